"""Utility functions: ``diff`` carries gradients; ``all``, ``any``, ``isin`` don't."""

from __future__ import annotations

from ..backends import device_of
from ..engine.registry import defop
from ._util import nondiff
from .batch_rules import axis, lift_all, shift


def _diff_impl(B):
    def diff(x, prepend=None, append=None, *, axis=-1, n=1):
        kw = {k: v for k, v in (("prepend", prepend), ("append", append)) if v is not None}
        return B.diff(x, axis=axis, n=n, **kw)

    return diff


def _diff(xp, g, ans, x, prepend, append, *, axis=-1, n=1):
    """Adjoint of n first differences over concat(prepend, x, append):
    d/dx_i sum_j g_j (x_{j+1} - x_j) = g_{i-1} - g_i."""
    axis = axis % g.ndim
    for _ in range(n):
        zshape = list(g.shape)
        zshape[axis] = 1
        z = xp.zeros(tuple(zshape), dtype=g.dtype, device=device_of(g))
        g = xp.concat([z, g], axis=axis) - xp.concat([g, z], axis=axis)
    pieces = {}
    start = 0
    for name, a in (("prepend", prepend), ("x", x), ("append", append)):
        if a is not None:
            size = a.shape[axis]
            pieces[name] = g[(slice(None),) * axis + (slice(start, start + size), ...)]
            start += size
    return pieces["x"], pieces.get("prepend"), pieces.get("append")


def _diff_batch(c, x, prepend, append, *, axis=-1, n=1):
    x, prepend, append = lift_all(c, (x, prepend, append))
    return c.f(x, prepend, append, axis=shift(axis, x.ndim - 1), n=n)


def _isin_batch(c, x1, x2, **kwargs):
    """Element-wise in ``x1``; a batched ``x2`` (one set per example) loops."""
    if c.bd[1]:
        return NotImplemented
    return c.f(x1, x2, **kwargs)


defop(
    "diff",
    vjp=_diff,
    chapter="utility",
    impl=_diff_impl,
    public=lambda f, rec: (
        lambda x, /, *, axis=-1, n=1, prepend=None, append=None: f(
            x, prepend, append, axis=axis, n=n
        )
    ),
    saves=(),
    linear=True,
    batch=_diff_batch,
)
nondiff("utility", "all", "any", batch=axis())
nondiff("utility", "isin", batch=_isin_batch)
