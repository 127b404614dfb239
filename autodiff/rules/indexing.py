"""Indexing: ``take``, ``take_along_axis``, ``x[key]``, ``x[key] = v``, and the
scatter-add kernel their rules are written with."""

from __future__ import annotations

import math

from ..backends import device_of
from ..engine.node import Zeros
from ..engine.registry import defop
from .batch_rules import (
    broadcast_shape,
    is_bool,
    is_index_array,
    key_parts,
    lift_all,
    mask_error,
    shift,
)


def _index_add_impl(B):
    return lambda x, indices, values, axis=0: B.index_add(x, indices, values, axis=axis)


def _positions(xp, x, device):
    """Flat position of every element of ``x``: gathering it the way the forward
    gathered ``x`` tells where each output element came from."""
    n = math.prod(x.shape)
    return xp.reshape(xp.arange(n, device=device), x.shape)


def _scatter_back(xp, x, positions, g):
    """A zero array shaped like ``x`` with ``g`` added at flat ``positions``."""
    n = math.prod(x.shape)
    z = xp.zeros((n,), dtype=g.dtype, device=device_of(g))
    if g.shape != positions.shape:  # a reduction's, to the unknown size of a masked pick
        g = g * xp.ones_like(positions, dtype=g.dtype)
    z = xp.index_add(z, xp.reshape(positions, (-1,)), xp.reshape(g, (-1,)), axis=0)
    return xp.reshape(z, x.shape)


def _take(xp, g, ans, x, indices, *, axis=None):
    if x.ndim == 0:  # NumPy takes a 0-d x as one element: every pick is it
        return xp.sum(g)
    z = xp.zeros(x.shape, dtype=g.dtype, device=device_of(g))
    return xp.index_add(z, indices, g, axis=0 if axis is None else axis)


def _take_along_axis(xp, g, ans, x, indices, *, axis=-1):
    pos = xp.take_along_axis(_positions(xp, x, device_of(g)), indices, axis=axis)
    return _scatter_back(xp, x, pos, g)


def _is_basic(key):
    parts = key if isinstance(key, tuple) else (key,)
    return all(k is None or k is Ellipsis or isinstance(k, (int, slice)) for k in parts)


def _getitem(xp, g, ans, x, *, key):
    """Basic indexing lays g into zeros; array indexing scatter-adds it, so
    repeated indices accumulate. Recorded, basic indexing scatters too (no write in
    place: under ``vmap`` of a VJP, g holds one cotangent per example and the zeros
    don't)."""
    if _is_basic(key) and not xp.records:
        return xp.embed(g, x.shape, key)
    mask = _leading_mask(xp, key)
    if mask is not None:
        return _mask_back(xp, x, mask, key, g)
    return _scatter_back(xp, x, _positions(xp, x, device_of(g))[key], g)


def _leading_mask(xp, key):
    """The boolean array of a key that is one mask over the leading axes (the rest
    whole), else None."""
    parts = key if isinstance(key, tuple) else (key,)
    first = parts[0] if parts else None
    if not hasattr(first, "dtype") or not xp.isdtype(first.dtype, "bool"):
        return None
    if any(k is not Ellipsis and k != slice(None) for k in parts[1:]):
        return None
    return first


def _mask_back(xp, x, mask, key, g):
    """``x[mask]``'s gradient, scattered along one axis: the masked axes as one of
    known length, the others whole, so ``g`` (whose first axis has a length known only
    from the values: dask's NaN) is never reshaped."""
    device = device_of(g)
    rest = tuple(x.shape[mask.ndim :])
    n = math.prod(mask.shape)
    if g.shape != tuple(g.shape[:1]) + rest or g.ndim != 1 + len(rest):
        g = g * xp.ones_like(_positions(xp, x, device)[key], dtype=g.dtype)
    picked = xp.arange(n, device=device)[xp.reshape(mask, (-1,))]
    z = xp.zeros((n,) + rest, dtype=g.dtype, device=device)
    return xp.reshape(xp.index_add(z, picked, g, axis=0), x.shape)


def _setitem_x(xp, g, ans, x, value, *, key):
    # the overwritten region is a structural zero (see graph.Zeros)
    mask = xp.set_(xp.zeros(g.shape, dtype=xp.bool, device=device_of(g)), key, True)
    return Zeros(xp.where(mask, xp.zeros_like(g), g), mask)


def _setitem_value(xp, g, ans, x, value, *, key):
    gv = g[key]
    parts = key if isinstance(key, tuple) else (key,)
    if not any(hasattr(k, "dtype") and xp.isdtype(k.dtype, "integral") for k in parts):
        return gv  # each position written once
    # Repeated integer indices: the last write wins (as numpy assigns), so only the
    # last element written to a position gets its gradient.
    pos = xp.reshape(_positions(xp, x, device_of(g))[key], (-1,))
    order = xp.argsort(pos, stable=True)
    ranked = xp.take(pos, order)
    last = xp.concat([ranked[:-1] != ranked[1:], xp.ones((1,), dtype=xp.bool, device=device_of(g))])
    last = xp.take(last, xp.argsort(order))  # back to the order of writing
    return xp.where(xp.reshape(last, gv.shape), gv, xp.zeros_like(gv))


def _setitem_jvp(xp, ts, ans, x, value, *, key):
    """The old tangent with the written region replaced by the value's tangent."""
    tx, tv = ts
    if tx is None:
        tx = xp.zeros(x.shape, dtype=x.dtype, device=device_of(x))
    return xp.set_at(tx, key, 0.0 if tv is None else tv)  # tx is another node's too


# -- batching rules (vmap): the batch axis first in each batched argument -----------------------
def _contiguous(parts):
    """Whether the array (and integer) parts of a key are next to each other: numpy then
    keeps the advanced index's axes where they are, else it moves them first."""
    pos = [i for i, k in enumerate(parts) if is_index_array(k) or type(k) is int]
    if not any(is_index_array(k) for k in parts):
        return True
    return pos == list(range(pos[0], pos[0] + len(pos)))


def _getitem_batch(c, x, *, key):
    xp, n = c.xp, c.n
    parts = key_parts(key)
    flags = c.kd.get("key", False)
    flags = flags if isinstance(flags, tuple) else (flags,) * len(parts)
    if not any(flags):
        arrays = [i for i, k in enumerate(parts) if is_index_array(k)]
        if not arrays:
            return x[(slice(None),) + parts]
        if len(parts) == 1 and is_bool(parts[0]):  # one mask for every example
            mask = xp.broadcast_to(parts[0], (n,) + tuple(parts[0].shape))
            picked = x[mask]
            return xp.reshape(picked, (n, -1) + tuple(picked.shape[1:]))
        if arrays[0] == 0 and _contiguous(parts) and not any(is_bool(parts[i]) for i in arrays):
            # integer arrays from the first axis on: the batch indexed by an arange
            # too (the standard takes integer arrays only alongside integers)
            shapes = [tuple(getattr(k, "shape", ())) for k in parts if is_index_array(k)]
            r = len(broadcast_shape(*shapes))
            first = xp.reshape(xp.arange(n, device=device_of(x)), (n,) + (1,) * r)
            return x[(first,) + parts]
        if not _contiguous(parts):
            return NotImplemented
        return x[(slice(None),) + parts]
    for k, b in zip(parts, flags):
        if b and is_bool(k):
            raise mask_error("x[mask]")
    # batched integer arrays: a gather with the examples' own indices
    adv = [i for i, k in enumerate(parts) if is_index_array(k) or type(k) is int]
    if not _contiguous(parts) or any(not isinstance(k, slice) for k in parts[: adv[0]]):
        return NotImplemented
    if any(k is None or k is Ellipsis for k in parts[adv[0] :]):
        return NotImplemented
    shapes = [
        tuple(k.shape[1:]) if b else tuple(getattr(k, "shape", ()))
        for k, b in zip(parts, flags)
        if is_index_array(k)
    ]
    r = len(broadcast_shape(*shapes))
    idx = [c.pad(k, r) if b else k for k, b in zip(parts, flags)]
    pre = adv[0]
    if c.bd[0]:
        first = xp.reshape(xp.arange(n, device=device_of(x)), (n,) + (1,) * r)
        out = x[(first,) + tuple(idx)]  # advanced axes first: (n, S..., pre..., rest)
        if pre:
            out = xp.moveaxis(out, tuple(range(1, 1 + r)), tuple(range(1 + pre, 1 + pre + r)))
        return out
    out = x[tuple(idx)]  # (pre..., n, S..., rest)
    return xp.moveaxis(out, pre, 0) if pre else out


def _take_batch(c, x, indices, *, axis=None):
    xp, n = c.xp, c.n
    bx, bi = c.bd
    if axis is None:  # one example flattened (the standard: a 1-D x)
        x = xp.reshape(x, (n, -1) if bx else (-1,))
        ax = 0
    else:
        ax = axis % (x.ndim - bx)
    if not bi:
        return c.f(x, indices, axis=ax + 1)
    if indices.ndim != 2:
        return NotImplemented
    k = indices.shape[1]
    if not bx:  # every example's picks at once, then the examples' axis first
        out = c.f(x, xp.reshape(indices, (-1,)), axis=ax)
        out = xp.reshape(out, tuple(x.shape[:ax]) + (n, k) + tuple(x.shape[ax + 1 :]))
        return xp.moveaxis(out, ax, 0)
    # each example's own indices: offsets into the examples laid end to end
    xm = xp.moveaxis(x, ax + 1, 1)
    m = xm.shape[1]
    flat = xp.reshape(xm, (n * m,) + tuple(xm.shape[2:]))
    offsets = xp.reshape(xp.arange(n, dtype=indices.dtype, device=device_of(indices)) * m, (n, 1))
    out = c.f(flat, xp.reshape(indices + offsets, (-1,)), axis=0)
    out = xp.reshape(out, (n, k) + tuple(xm.shape[2:]))
    return xp.moveaxis(out, 1, ax + 1)


def _take_along_axis_batch(c, x, indices, *, axis=-1):
    x, indices = lift_all(c, (x, indices))
    return c.f(x, indices, axis=shift(axis, x.ndim - 1))


def _index_add_batch(c, x, indices, values, *, axis=0):
    if c.bd[1]:
        return NotImplemented
    x, values = c.lift(x, c.bd[0]), c.lift(values, c.bd[2])
    return c.f(x, indices, values, axis=shift(axis, x.ndim - 1))


def _setitem_batch(c, x, value, *, key):
    """``x[key] = value`` never reaches the op table (it is no function of the namespace):
    a Batched ``x`` writes into its value itself (``Batched.__setitem__``: full slices for
    the batch axes, or example by example for batched indices); an unbatched one refuses
    a batched value (``inplace.setitem``)."""
    raise AssertionError("__setitem__ is batched by Batched.__setitem__")


# gathers and scatter-adds are linear: forward mode applies them to the tangents
defop("take", _take, chapter="indexing", saves=(1,), linear=True, batch=_take_batch)
defop("take_along_axis", _take_along_axis, chapter="indexing", saves=(1,), linear=True,
      batch=_take_along_axis_batch)  # fmt: skip
defop(
    "__getitem__",
    _getitem,
    chapter="indexing",
    saves=(),
    linear=True,
    impl=lambda B: lambda x, *, key: x[key],
    batch=_getitem_batch,
    doc="x[key]: basic slicing and integer or boolean array indexing",
)
defop(
    "__setitem__",
    _setitem_x,
    _setitem_value,
    chapter="indexing",
    saves=(),
    jvp=_setitem_jvp,
    impl=lambda B: None,
    batch=_setitem_batch,
    doc="x[key] = value: the gradient flows to the surviving old values and to value",
)
defop(
    "index_add",
    lambda xp, g, ans, x, indices, values, *, axis=0: g,
    None,
    lambda xp, g, ans, x, indices, values, *, axis=0: xp.take(g, indices, axis=axis),
    chapter="kernels",
    impl=_index_add_impl,
    saves=(1,),
    linear=True,
    batch=_index_add_batch,
    doc="out = x; out[..., indices[j], ...] += values[..., j, ...] (duplicates accumulate)",
)
