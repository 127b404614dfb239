"""Indexing: ``take``, ``take_along_axis``, ``x[key]``, ``x[key] = v``, and the
scatter-add kernel their rules are written with."""

from __future__ import annotations

import math

from ..backends import device_of
from ..engine.node import Zeros
from ..engine.registry import defop


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
    """Basic indexing writes g into zeros; array indexing scatter-adds it, so
    repeated indices accumulate. Recorded, basic indexing scatters too (no write in
    place: under ``vmap`` of a VJP, g holds one cotangent per example and the zeros
    don't)."""
    if _is_basic(key) and not xp.records:
        z = xp.zeros(x.shape, dtype=g.dtype, device=device_of(g))
        parts = key if isinstance(key, tuple) else (key,)
        if any(k is None for k in parts):  # new axes: drop them from g instead
            key = tuple(k for k in parts if k is not None)
            g = xp.reshape(g, z[key].shape)
        z[key] = g
        return z
    return _scatter_back(xp, x, _positions(xp, x, device_of(g))[key], g)


def _setitem_x(xp, g, ans, x, value, *, key):
    # the overwritten region is a structural zero (see graph.Zeros)
    mask = xp.zeros(g.shape, dtype=xp.bool, device=device_of(g))
    mask[key] = True
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
        out = xp.zeros(x.shape, dtype=x.dtype, device=device_of(x))
    else:
        out = xp.asarray(tx, copy=True)  # the tangent of x is another node's too
    out[key] = 0.0 if tv is None else tv
    return out


# gathers and scatter-adds are linear: forward mode applies them to the tangents
defop("take", _take, chapter="indexing", saves=(1,), linear=True)
defop("take_along_axis", _take_along_axis, chapter="indexing", saves=(1,), linear=True)
defop(
    "__getitem__",
    _getitem,
    chapter="indexing",
    saves=(),
    linear=True,
    impl=lambda B: lambda x, *, key: x[key],
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
    doc="out = x; out[..., indices[j], ...] += values[..., j, ...] (duplicates accumulate)",
)
