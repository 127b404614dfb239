"""``linear``: y = x W^T + b as one op, with torch's (out, in) weight layout.

One node instead of three (transpose, matmul, add); its rule forms W's gradient
directly in W's layout, g^T x summed over the batch axes, and skips the input's
gradient when the input needs none (the first layer of a network).
"""

from __future__ import annotations

import math

from ...backends import device_of
from ...engine.namespace import recorder_of
from ...engine.registry import defop

__all__ = ["linear"]


def _linear(xp, x, w, b):
    # (..., in) as one (rows, in) matrix: one BLAS call instead of one per leading index
    y = xp.matmul(_rows(xp, x), xp.matrix_transpose(w))
    if b is not None:
        if b.dtype == y.dtype and b.ndim == 1:
            y += b  # y is ours alone (and not a view): adding in place saves a temporary
        else:
            y = y + b
    return _unrows(xp, y, x.shape[:-1])


def _rows(xp, a):
    """``a`` as a matrix: the batch axes merged into one."""
    if a.ndim == 2:
        return a
    n = a.shape[-1]
    # (-1, 0) can't be reshaped to: with no columns the row count must be spelled out
    return xp.reshape(a, (-1, n) if n else (math.prod(a.shape[:-1]), 0))


def _unrows(xp, m, lead):
    """A (rows, n) matrix back to shape ``lead + (n,)``."""
    return m if len(lead) == 1 else xp.reshape(m, tuple(lead) + (m.shape[-1],))


def trailing_mean(xp, a, k):
    """The mean over the last ``k`` axes (kept, of length 1), as a product with a vector
    of ones: NumPy's reduction over rows of 64 values is ~6x slower than that one BLAS
    call (float32 (512, 64): 13 us against 2.3 us). LayerNorm's statistics."""
    n = math.prod(a.shape[a.ndim - k :])
    lead = tuple(a.shape[: a.ndim - k])
    if n == 0 or math.prod(lead) == 0:  # no rows or empty rows: the reduction's own answer
        return xp.mean(a, axis=tuple(range(a.ndim - k, a.ndim)), keepdims=True)
    ones = xp.ones((n, 1), dtype=a.dtype, device=device_of(a))
    m = xp.reshape(a, (math.prod(lead), n)) @ ones
    return xp.reshape(m / n, lead + (1,) * k)


def leading_sum(xp, a, k):
    """The sum over every axis but the last ``k``, as ``ones @ rows`` (BLAS: 2.5x faster
    than NumPy's reduction over the first axis of a (512, 256) float32 array): bias and
    LayerNorm weight gradients."""
    trail = tuple(a.shape[a.ndim - k :])
    n, rows = math.prod(trail), math.prod(a.shape[: a.ndim - k])
    if n == 0 or rows == 0 or a.ndim == k:
        return xp.sum(a, axis=tuple(range(a.ndim - k))) if a.ndim > k else a
    ones = xp.ones((1, rows), dtype=a.dtype, device=device_of(a))
    return xp.reshape(ones @ xp.reshape(a, (rows, n)), trail)


def _linear_jvp(xp, ts, ans, x, w, b):
    """tx W^T + x tW^T + tb (bilinear in x and W, linear in b)."""
    tx, tw, tb = ts
    r = None if tx is None else _linear(xp, tx, w, None)
    if tw is not None:
        c = _linear(xp, x, tw, None)
        r = c if r is None else r + c
    if tb is not None:
        r = tb if r is None else r + tb
    return r


def _linear_batch(c, x, w, b):
    """Shared weights: the op itself (it batches over x's leading axes); per-example
    weights: one batched matmul, (n, rows, in) @ (n, in, out)."""
    xp, n = c.xp, c.n
    bx, bw, bb = c.bd
    if not bw and not bb:
        return c.f(x, w, b)  # x (n, ..., in): the op batches over leading axes
    x = c.lift(x, bx)
    rows = xp.reshape(x, (n, -1, x.shape[-1]))
    y = rows @ xp.matrix_transpose(w)  # (n, rows, out), per-example weights or not
    if b is not None:
        y = y + (xp.expand_dims(b, axis=1) if bb else b)
    return xp.reshape(y, tuple(x.shape[:-1]) + (y.shape[-1],))


defop(
    "nn.linear",
    vjp=(
        lambda xp, g, ans, x, w, b: _unrows(xp, xp.matmul(_rows(xp, g), w), g.shape[:-1]),
        lambda xp, g, ans, x, w, b: xp.matmul(xp.matrix_transpose(_rows(xp, g)), _rows(xp, x)),
        lambda xp, g, ans, x, w, b: leading_sum(xp, g, 1),
    ),
    chapter="nn.linear",
    saves=((1,), (0,), ()),
    impl=lambda B: lambda x, w, b: _linear(B, x, w, b),
    jvp=_linear_jvp,
    batch=_linear_batch,
    doc="x W^T + b",
)


def linear(input, weight, bias=None):
    """x W^T + b, as torch: ``weight`` (out, in), ``bias`` (out,), ``input`` (..., in)."""
    recorder_of(input, weight, bias)  # a non-array named first
    if weight.ndim != 2:
        raise ValueError(f"linear: weight must be 2-D (out, in), got shape {tuple(weight.shape)}")
    out_f, in_f = weight.shape
    if input.ndim < 1 or input.shape[-1] != in_f:
        raise ValueError(
            f"linear: input's last axis must be in_features={in_f}, got shape {tuple(input.shape)}"
        )
    if bias is not None and tuple(bias.shape) != (out_f,):
        raise ValueError(f"linear: bias must have shape ({out_f},), got {tuple(bias.shape)}")
    return recorder_of(input, weight, bias).xp.nn.linear(input, weight, bias)
