"""Manipulation functions: shapes, axes, joining and splitting. All are linear in their
arrays (``linear=True``): forward mode applies the op itself to the tangents."""

from __future__ import annotations

import math

from ..backends import device_of
from ..engine.registry import defop
from ._util import inverse_permutation, nondiff


def _same_shape(xp, g, ans, x, *args, **kwargs):
    return xp.reshape(g, x.shape)


def _permute_dims(xp, g, ans, x, axes):
    return xp.permute_dims(g, inverse_permutation([a % x.ndim for a in axes]))


def _flip(xp, g, ans, x, *, axis=None):
    return xp.flip(g, axis=axis)


def _roll(xp, g, ans, x, shift, *, axis=None):
    back = tuple(-s for s in shift) if isinstance(shift, tuple) else -shift
    return xp.roll(g, back, axis=axis)


def _moveaxis(xp, g, ans, x, source, destination):
    return xp.moveaxis(g, destination, source)


def _pass(xp, g, ans, *args, **kwargs):
    return g  # broadcasting is undone centrally


def _concat(xp, g, ans, *arrays, axis=0):
    """Slice the cotangent back into the pieces (flattened ones for axis=None)."""
    flat = axis is None
    ax = 0 if flat else axis % g.ndim
    grads, start = [], 0
    for a in arrays:
        n = math.prod(a.shape) if flat else a.shape[ax]
        piece = g[(slice(None),) * ax + (slice(start, start + n), ...)]
        grads.append(xp.reshape(piece, a.shape) if flat else piece)
        start += n
    return grads


def _stack(xp, g, ans, *arrays, axis=0):
    return list(xp.unstack(g, axis=axis))


def _unstack(xp, gs, ans, x, *, axis=0):
    return (xp.stack(gs, axis=axis),)


def _broadcast_arrays(xp, gs, ans, *arrays):
    return list(gs)


def _tile(xp, g, ans, x, repetitions):
    n = max(x.ndim, len(repetitions))
    reps = (1,) * (n - len(repetitions)) + tuple(repetitions)
    shape = (1,) * (n - x.ndim) + tuple(x.shape)
    split = []
    for r, s in zip(reps, shape):
        split += [r, s]
    g = xp.sum(xp.reshape(g, tuple(split)), axis=tuple(range(0, 2 * n, 2)))
    return xp.reshape(g, x.shape)


def _repeat(xp, g, ans, x, repeats, *, axis=None):
    if axis is None or x.ndim == 0:  # NumPy and array-api-strict repeat a 0-d one as 1-D
        flat_shape = (math.prod(x.shape),)
        axis_ = 0
    else:
        flat_shape = x.shape
        axis_ = axis % x.ndim
    n = flat_shape[axis_]
    if isinstance(repeats, int):
        shape = flat_shape[:axis_] + (n, repeats) + flat_shape[axis_ + 1 :]
        out = xp.sum(xp.reshape(g, shape), axis=axis_ + 1)
    else:
        idx = xp.repeat(xp.arange(n, device=device_of(g)), repeats)
        zeros = xp.zeros(flat_shape, dtype=g.dtype, device=device_of(g))
        out = xp.index_add(zeros, idx, g, axis=axis_)
    return xp.reshape(out, x.shape)


def _varargs(name):
    """Forward for ``name(arrays, ...)``: the op takes the arrays as positional args."""
    return lambda B: lambda *arrays, **kw: getattr(B, name)(list(arrays), **kw)


_LINEAR = {"chapter": "manipulation", "saves": (), "linear": True}
defop("reshape", _same_shape, view=True, **_LINEAR)
defop("expand_dims", _same_shape, view=True, **_LINEAR)
defop("squeeze", _same_shape, view=True, **_LINEAR)
defop("permute_dims", _permute_dims, view=True, **_LINEAR)
defop("flip", _flip, view=True, **_LINEAR)
defop("roll", _roll, **_LINEAR)
defop("moveaxis", _moveaxis, view=True, **_LINEAR)
defop("broadcast_to", _pass, view=True, **_LINEAR)
defop(
    "broadcast_arrays",
    vjp=_broadcast_arrays,
    chapter="manipulation",
    impl=lambda B: lambda *arrays: B.broadcast_arrays(*arrays),
    saves=(),
    linear=True,
)
defop(
    "concat",
    vjp=_concat,
    chapter="manipulation",
    impl=_varargs("concat"),
    public=lambda f, rec: lambda arrays, /, *, axis=0: f(*arrays, axis=axis),
    saves=(),
    linear=True,
)
defop(
    "stack",
    vjp=_stack,
    chapter="manipulation",
    impl=_varargs("stack"),
    public=lambda f, rec: lambda arrays, /, *, axis=0: f(*arrays, axis=axis),
    saves=(),
    linear=True,
)
defop("unstack", vjp=_unstack, view=True, **_LINEAR)
defop("tile", _tile, **_LINEAR)
defop("repeat", _repeat, chapter="manipulation", saves=(1,), linear=True)
nondiff("manipulation", "broadcast_shapes")
