"""Manipulation functions: shapes, axes, joining and splitting. All are linear in their
arrays (``linear=True``): forward mode applies the op itself to the tangents."""

from __future__ import annotations

import math

from ..backends import device_of
from ..engine.registry import defop
from ._util import inverse_permutation, nondiff
from .batch_rules import REQUIRED, axis, broadcast_shape, example_shape, lift_all, shift


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


# -- batching rules (vmap): the batch axis first in each batched argument -----------------------
def _reshape_batch(c, x, shape=REQUIRED, **kwargs):
    if not c.bd[0]:
        return NotImplemented
    shape = kwargs.pop("shape") if shape is REQUIRED else shape
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return c.f(x, (c.n,) + shape, **kwargs)


def _permute_dims_batch(c, x, axes=REQUIRED, **kwargs):
    axes = kwargs.pop("axes") if axes is REQUIRED else axes
    r = x.ndim - 1
    return c.f(x, (0,) + tuple(a % r + 1 for a in axes), **kwargs)


def _moveaxis_batch(c, x, source, destination):
    r = x.ndim - 1

    def norm(a):
        return tuple(i % r + 1 for i in a) if isinstance(a, (tuple, list)) else a % r + 1

    return c.f(x, norm(source), norm(destination))


def _roll_batch(c, x, amount, axis=None):
    if not c.bd[0] or c.bd[1]:
        return NotImplemented
    if axis is None:  # rolled flattened, per example
        xp = c.xp
        flat = c.f(xp.reshape(x, (c.n, -1)), amount, axis=1)
        return xp.reshape(flat, tuple(x.shape))
    return c.f(x, amount, axis=shift(axis, x.ndim - 1))


def _broadcast_to_batch(c, x, shape=REQUIRED, **kwargs):
    shape = kwargs.pop("shape") if shape is REQUIRED else shape
    shape = tuple(shape)
    return c.f(c.pad(x, len(shape)), (c.n,) + shape, **kwargs)


def _broadcast_arrays_batch(c, *arrays):
    xp = c.xp
    shape = (c.n,) + broadcast_shape(*(example_shape(c, i, a) for i, a in enumerate(arrays)))
    out = []
    for a, b in zip(arrays, c.bd):
        a = c.pad(a, len(shape) - 1) if b else xp.expand_dims(a, axis=0)
        out.append(xp.broadcast_to(a, shape))
    return out


def _concat_batch(c, *arrays, axis=0):
    arrays = lift_all(c, arrays)
    if axis is None:  # each example flattened
        return c.f(*[c.xp.reshape(a, (c.n, -1)) for a in arrays], axis=1)
    return c.f(*arrays, axis=shift(axis, arrays[0].ndim - 1))


def _stack_batch(c, *arrays, axis=0):
    return c.f(*lift_all(c, arrays), axis=shift(axis, arrays[0].ndim))


def _tile_batch(c, x, repetitions):
    if not c.bd[0] or c.bd[1]:
        return NotImplemented
    reps = tuple(repetitions)
    r = x.ndim - 1
    if len(reps) > r:  # the example is promoted with leading axes first
        x = c.pad(x, len(reps))
    else:
        reps = (1,) * (r - len(reps)) + reps
    return c.f(x, (1,) + reps)


def _repeat_batch(c, x, repeats, *, axis=None):
    if not c.bd[0] or c.bd[1]:
        return NotImplemented
    if axis is None:
        return c.f(c.xp.reshape(x, (c.n, -1)), repeats, axis=1)
    return c.f(x, repeats, axis=shift(axis, x.ndim - 1))


_LINEAR = {"chapter": "manipulation", "saves": (), "linear": True}
defop("reshape", _same_shape, view=True, batch=_reshape_batch, **_LINEAR)
defop("expand_dims", _same_shape, view=True, batch=axis(default=0, pos=1), **_LINEAR)
defop("squeeze", _same_shape, view=True, batch=axis(default=REQUIRED, pos=1), **_LINEAR)
defop("permute_dims", _permute_dims, view=True, batch=_permute_dims_batch, **_LINEAR)
defop("flip", _flip, view=True, batch=axis(), **_LINEAR)
defop("roll", _roll, batch=_roll_batch, **_LINEAR)
defop("moveaxis", _moveaxis, view=True, batch=_moveaxis_batch, **_LINEAR)
defop("broadcast_to", _pass, view=True, batch=_broadcast_to_batch, **_LINEAR)
defop(
    "broadcast_arrays",
    vjp=_broadcast_arrays,
    chapter="manipulation",
    impl=lambda B: lambda *arrays: B.broadcast_arrays(*arrays),
    saves=(),
    linear=True,
    batch=_broadcast_arrays_batch,
)
defop(
    "concat",
    vjp=_concat,
    chapter="manipulation",
    impl=_varargs("concat"),
    public=lambda f, rec: lambda arrays, /, *, axis=0: f(*arrays, axis=axis),
    saves=(),
    linear=True,
    batch=_concat_batch,
)
defop(
    "stack",
    vjp=_stack,
    chapter="manipulation",
    impl=_varargs("stack"),
    public=lambda f, rec: lambda arrays, /, *, axis=0: f(*arrays, axis=axis),
    saves=(),
    linear=True,
    batch=_stack_batch,
)
defop("unstack", vjp=_unstack, view=True, batch=axis(default=0), **_LINEAR)
defop("tile", _tile, batch=_tile_batch, **_LINEAR)
defop("repeat", _repeat, chapter="manipulation", saves=(1,), linear=True, batch=_repeat_batch,
      data_dependent=True)  # fmt: skip
nondiff("manipulation", "broadcast_shapes")
