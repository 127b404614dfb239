"""pydata sparse: the functions whose fill-value rules differ from the standard's, and
the creation functions it lacks.

A sparse array stores its elements that differ from a *fill value*, which is not always
zero: a gradient is often a constant broadcast to a shape (the cotangent of a sum), kept
as an array with no stored element and a fill value of 1, and ``exp`` of a sparse array
fills with 1. sparse's products refuse any fill value but zero ("requires zero fill
values") and its joins refuse operands of different fill values. The standard has no
fill values, so such operands are made explicit first: the result is the same as a
dense computation's.
"""

from __future__ import annotations

import numpy as np


def _zero_fill(x):
    """``x`` with a fill value of zero: its elements stored, where its fill is not zero."""
    fill = getattr(x, "fill_value", 0)
    if fill is None or fill == 0:
        return x
    import sparse

    return sparse.COO.from_numpy(x.todense())


def _one_fill(arrays):
    """``arrays`` with one fill value: as they are when they share one, else zero."""
    fills = {float(getattr(a, "fill_value", 0)) for a in arrays}
    return list(arrays) if len(fills) <= 1 else [_zero_fill(a) for a in arrays]


def matmul(x1, x2, /):
    """``x1 @ x2`` of operands of any fill value."""
    import sparse

    return sparse.matmul(_zero_fill(x1), _zero_fill(x2))


def tensordot(x1, x2, /, *, axes=2):
    """``tensordot`` of operands of any fill value."""
    import sparse

    return sparse.tensordot(_zero_fill(x1), _zero_fill(x2), axes=axes)


def vecdot(x1, x2, /, *, axis=-1):
    """``vecdot`` of operands of any fill value."""
    import sparse

    return sparse.vecdot(_zero_fill(x1), _zero_fill(x2), axis=axis)


def concat(arrays, /, *, axis=0):
    """``concat`` of arrays of any fill values."""
    import sparse

    return sparse.concat(_one_fill(arrays), axis=axis)


def stack(arrays, /, *, axis=0):
    """``stack`` of arrays of any fill values."""
    import sparse

    return sparse.stack(_one_fill(arrays), axis=axis)


def take(x, indices, /, *, axis=None):
    """``take`` with an index array of the library (sparse's takes NumPy's only)."""
    import sparse

    if hasattr(indices, "todense"):
        indices = indices.todense()
    return sparse.take(x, indices, axis=axis)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    """The standard's ``arange``, which sparse lacks: NumPy's, stored."""
    import sparse

    return sparse.COO.from_numpy(np.arange(start, stop, step, dtype=dtype))


FUNCTIONS = {
    "matmul": matmul,
    "tensordot": tensordot,
    "vecdot": vecdot,
    "concat": concat,
    "stack": stack,
    "arange": arange,
    "take": take,
}
