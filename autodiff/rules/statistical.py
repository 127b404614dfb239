"""Statistical functions: reductions and cumulative sums/products. ``sum``, ``mean`` and
``cumulative_sum`` are linear (their JVP is the op on the tangent); the other reductions'
JVPs come from their VJP rules (``reduction_jvp``); ``cumulative_prod`` falls back."""

from __future__ import annotations

import math

from ..backends import device_of
from ..engine.registry import defop
from ._util import (
    axes_of,
    conj,
    count,
    count_of,
    expand,
    inverse_permutation,
    keep_shape,
    reduction_jvp,
)
from .batch_rules import axis, shift


def _sum(xp, g, ans, x, *, axis=None, dtype=None, keepdims=False):
    return expand(xp, g, x.shape, axis, keepdims)


def _mean(xp, g, ans, x, *, axis=None, keepdims=False):
    # divide the reduced cotangent, then broadcast it: no full-size temporary
    n = count_of(xp, x, axis)
    if not isinstance(n, int):  # a lazy count, kept dims: divide after the reshape
        return expand(xp, g, x.shape, axis, keepdims) / n
    return expand(xp, g / n, x.shape, axis, keepdims)


def _extremum(xp, g, ans, x, *, axis=None, keepdims=False):
    """max/min: ties split the gradient evenly."""
    axes = axes_of(axis, x.ndim)
    kept = keep_shape(x.shape, axes)
    hit = x == xp.reshape(ans, kept)
    n = xp.sum(xp.astype(hit, x.dtype), axis=axes, keepdims=True)
    return xp.where(hit, expand(xp, g, x.shape, axis, keepdims) / n, xp.zeros_like(x))


def _var(xp, g, ans, x, *, axis=None, correction=0.0, keepdims=False):
    axes = axes_of(axis, x.ndim)
    centered = conj(xp, x - xp.mean(x, axis=axes, keepdims=True))  # var = mean |x - m|^2
    n = count_of(xp, x, axis) - correction
    # n = 0 (no elements, or one with correction=1): the var is NaN and so is its
    # gradient (0 * inf), as in torch; an empty x has an empty gradient
    if not isinstance(n, (int, float)):  # a lazy count (dask): n = 0 gives inf, as below
        return expand(xp, g, x.shape, axis, keepdims) * centered * (2 / n)
    return expand(xp, g, x.shape, axis, keepdims) * centered * (2 / n if n else math.inf)


def _std(xp, g, ans, x, *, axis=None, correction=0.0, keepdims=False):
    """d std = d var / (2 std); zero where std is 0 (all values equal)."""
    axes = axes_of(axis, x.ndim)
    s = xp.reshape(ans, keep_shape(x.shape, axes))
    zero = s == 0
    safe = xp.where(zero, xp.ones_like(s), s)
    centered = conj(xp, x - xp.mean(x, axis=axes, keepdims=True))
    scale = xp.where(zero, xp.zeros_like(s), 1 / ((count_of(xp, x, axis) - correction) * safe))
    return expand(xp, g, x.shape, axis, keepdims) * centered * scale


def _others_product(xp, x):
    """Product of every other element along the last axis, exact with zeros:
    exclusive cumulative products from the left and from the right."""
    left = _exclusive_cumprod(xp, x)
    right = xp.flip(_exclusive_cumprod(xp, xp.flip(x, axis=-1)), axis=-1)
    return left * right


def _exclusive_cumprod(xp, x):
    """``[1, x0, x0*x1, ...]`` along the last axis (without its last product): a 1
    concatenated before the cumulative product, since the standard lets a library
    lack ``include_initial`` (cubed)."""
    if x.shape[-1] == 0:
        return x
    one = xp.ones(tuple(x.shape[:-1]) + (1,), dtype=x.dtype, device=device_of(x))
    last = x.ndim - 1  # cubed's concat takes no negative axis
    return xp.concat([one, xp.cumulative_prod(x[..., :-1], axis=last)], axis=last)


def _prod(xp, g, ans, x, *, axis=None, dtype=None, keepdims=False):
    axes = axes_of(axis, x.ndim)
    if not axes:
        return expand(xp, g, x.shape, axis, keepdims)
    rest = tuple(a for a in range(x.ndim) if a not in axes)
    perm = rest + axes
    moved = xp.permute_dims(x, perm) if perm != tuple(range(x.ndim)) else x
    # the reduced length given, not -1: reshape can't infer it when a kept axis is 0
    flat = xp.reshape(moved, tuple(x.shape[a] for a in rest) + (count(x.shape, axes),))
    others = xp.reshape(_others_product(xp, flat), moved.shape)
    if perm != tuple(range(x.ndim)):
        others = xp.permute_dims(others, inverse_permutation(perm))
    return expand(xp, g, x.shape, axis, keepdims) * others


def _reverse_cumsum(xp, g, axis):
    return xp.flip(xp.cumulative_sum(xp.flip(g, axis=axis), axis=axis), axis=axis)


def _drop_initial(xp, g, axis, include_initial):
    if not include_initial:
        return g
    return g[(slice(None),) * axis + (slice(1, None), ...)]


def _cumulative_sum(xp, g, ans, x, *, axis=None, dtype=None, include_initial=False):
    if x.ndim == 0:  # NumPy's result is [x] (or [0, x]): x's gradient is g's last
        return xp.reshape(g[-1:], ())
    axis = 0 if axis is None else axis % x.ndim
    return _reverse_cumsum(xp, _drop_initial(xp, g, axis, include_initial), axis)


def _cumulative_prod(xp, g, ans, x, *, axis=None, dtype=None, include_initial=False):
    """Exact with zeros. Before the first zero z of a row: reverse_cumsum(g*p)/x.
    At z: prod(x[:z]) * sum_{j>=z} g_j prod(x[z+1:j+1]). After z: 0."""
    if x.ndim == 0:  # [x] (or [1, x])
        return xp.reshape(g[-1:], ())
    axis = 0 if axis is None else axis % x.ndim
    g = _drop_initial(xp, g, axis, include_initial)
    if xp.records:  # the O(n) form below has no exact derivative at zeros
        return _cumulative_prod_polynomial(xp, g, x, axis)
    one, zero = xp.ones_like(x), xp.zeros_like(x)
    is_zero = x == 0
    zeros_upto = xp.cumulative_sum(xp.astype(is_zero, xp.int32), axis=axis)
    before = zeros_upto == 0
    first = is_zero & (zeros_upto == 1)
    p = xp.cumulative_prod(x, axis=axis)
    plain = _reverse_cumsum(xp, g * p, axis) / xp.where(is_zero, one, x)
    prefix = xp.prod(xp.where(before, x, one), axis=axis, keepdims=True)
    q = xp.cumulative_prod(xp.where(before | first, one, x), axis=axis)
    tail = _reverse_cumsum(xp, xp.where(before, zero, g * q), axis)
    return xp.where(before, plain, xp.where(first, prefix * tail, zero))


def _cumulative_prod_polynomial(xp, g, x, axis):
    """The same gradient as a polynomial in x, O(n^2) along the axis: used when
    the backward pass is recorded, so that second derivatives are exact at zeros
    too. grad_i = prod(x[:i]) * sum_{j>=i} g_j prod(x[i+1:j+1])."""
    xm = xp.moveaxis(x, axis, -1)
    gm = xp.moveaxis(g, axis, -1)
    n = xm.shape[-1]
    idx = xp.arange(n, device=device_of(x))
    row, col = idx[:, None], idx[None, :]
    one = xp.ones((), dtype=x.dtype, device=device_of(x))
    spans = xp.cumulative_prod(xp.where(col > row, xm[..., None, :], one), axis=-1)
    inner = xp.sum(xp.where(col >= row, spans * gm[..., None, :], one * 0), axis=-1)
    prefix = _exclusive_cumprod(xp, xm)
    return xp.moveaxis(prefix * inner, -1, axis)


def _cumulative_batch(c, x, **kwargs):
    """cumulative_sum and cumulative_prod: the axis shifted past the batch axis; none
    given (a 1-D example) is the example's only axis."""
    if not c.bd[0]:
        return NotImplemented
    if kwargs.get("axis") is None:
        if x.ndim > 2:
            return NotImplemented  # the backend's error: axis is required beyond 1-D
        x = c.xp.reshape(x, (c.n, -1))
        kwargs["axis"] = 1
    else:
        kwargs["axis"] = shift(kwargs["axis"], x.ndim - 1)
    return c.f(x, **kwargs)


# reductions batch by shifting their axes past the batch axis (axis=None: one example's)
defop("sum", _sum, chapter="statistical", saves=(), linear=True, batch=axis())
defop("mean", _mean, chapter="statistical", saves=(), linear=True, batch=axis())
defop("max", _extremum, chapter="statistical", saves_ans=True, twice=False, complex=False,
      jvp=reduction_jvp(_extremum), batch=axis())  # fmt: skip
defop("min", _extremum, chapter="statistical", saves_ans=True, twice=False, complex=False,
      jvp=reduction_jvp(_extremum), batch=axis())  # fmt: skip
defop("var", _var, chapter="statistical", jvp=reduction_jvp(_var), batch=axis())
defop("std", _std, chapter="statistical", saves_ans=True, jvp=reduction_jvp(_std), batch=axis())
defop("prod", _prod, chapter="statistical", jvp=reduction_jvp(_prod, real=False), batch=axis())
defop("cumulative_sum", _cumulative_sum, chapter="statistical", saves=(), linear=True,
      batch=_cumulative_batch)  # fmt: skip
defop("cumulative_prod", _cumulative_prod, chapter="statistical", batch=_cumulative_batch)
