"""Utility functions: ``diff`` carries gradients; ``all``, ``any``, ``isin`` don't."""

from __future__ import annotations

from ..backends import device_of
from ..engine.registry import defop
from ._util import nondiff


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
)
nondiff("utility", "all", "any", "isin")
