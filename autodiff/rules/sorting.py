"""Sorting functions: ``sort`` routes each gradient back to where its value came from."""

from __future__ import annotations

from ..engine.registry import defop
from ._util import nondiff
from .batch_rules import axis


def _sort(xp, g, ans, x, *, axis=-1, descending=False, stable=True):
    order = xp.argsort(x, axis=axis, descending=descending, stable=True)
    inverse = xp.argsort(order, axis=axis)
    return xp.take_along_axis(g, inverse, axis=axis)


def _sort_jvp(xp, ts, ans, x, *, axis=-1, descending=False, stable=True):
    """The tangents in the order the values were sorted."""
    order = xp.argsort(x, axis=axis, descending=descending, stable=True)
    return xp.take_along_axis(ts[0], order, axis=axis)


defop("sort", _sort, chapter="sorting", twice=False, complex=False, jvp=_sort_jvp,
      batch=axis(default=-1))  # fmt: skip
nondiff("sorting", "argsort", batch=axis(default=-1))
