"""Searching functions: ``where`` carries gradients, the rest return indices."""

from __future__ import annotations

from ..backends import device_of
from ..engine.node import Zeros
from ..engine.registry import defop
from ._util import nondiff
from .batch_rules import FLAT, axis, flags


def _mask(xp, condition, g):
    """``condition`` as a boolean array of ``g``'s shape (the same object where it is one:
    the two branches' masks are then known to be disjoint, see graph.Zeros)."""
    c = condition if hasattr(condition, "shape") else xp.asarray(condition, device=device_of(g))
    if c.dtype != xp.bool:  # numpy takes any condition: nonzero is True
        c = c != 0
    return c if c.shape == g.shape else xp.broadcast_to(c, g.shape)


def _zero(xp, g):
    """A 0-d zero of ``g``'s dtype and device: ``where`` broadcasts it (cheaper than
    ``zeros_like(g)``: no buffer of ``g``'s size to fill; 7% of the where benchmark's
    backward)."""
    return xp.zeros((), dtype=g.dtype, device=device_of(g))


def _where_true(xp, g, ans, condition, x1, x2):
    # where x2 is taken, x1's cotangent is a structural zero (see graph.Zeros)
    c = _mask(xp, condition, g)
    return Zeros(xp.where(c, g, _zero(xp, g)), c, flip=True)


def _where_false(xp, g, ans, condition, x1, x2):
    c = _mask(xp, condition, g)
    return Zeros(xp.where(c, _zero(xp, g), g), c)


def _searchsorted_batch(c, x1, x2, **kwargs):
    """Batched search values over one sorted ``x1``; a batched ``x1`` loops."""
    if c.bd[0] or any(flags(c.kd)):
        return NotImplemented
    return c.f(x1, x2, **kwargs)


# linear in x1 and x2 (the condition is piecewise constant); element-wise in all three
# (diagonal), so it batches by broadcasting
defop("where", None, _where_true, _where_false, chapter="searching", saves=(0,), linear=True,
      diagonal=True)  # fmt: skip
nondiff("searching", "argmax", "argmin", batch=axis(none=FLAT))
nondiff("searching", "count_nonzero", batch=axis())
nondiff("searching", "nonzero", data_dependent=True)  # batched by the loop
nondiff("searching", "searchsorted", batch=_searchsorted_batch)
