"""``linear``: y = x W^T + b as one op, with torch's (out, in) weight layout.

One node instead of three (transpose, matmul, add); its rule forms W's gradient
directly in W's layout, g^T x summed over the batch axes, and skips the input's
gradient when the input needs none (the first layer of a network).
"""

from __future__ import annotations

import math

from ..backends import device_of
from ..namespace import recorder_of
from ..registry import defop

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


def _column_sum(xp, m):
    """The sum of a (rows, n) matrix's rows, as ``ones @ m``: one BLAS call, 2.5x faster
    than NumPy's reduction over the first axis (float32 (512, 256): 18 us against 7 us)."""
    if m.shape[0] == 0 or m.shape[1] == 0:
        return xp.sum(m, axis=0)
    ones = xp.ones((1, m.shape[0]), dtype=m.dtype, device=device_of(m))
    return xp.reshape(ones @ m, (m.shape[1],))


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


defop(
    "nn.linear",
    vjp=(
        lambda xp, g, ans, x, w, b: _unrows(xp, xp.matmul(_rows(xp, g), w), g.shape[:-1]),
        lambda xp, g, ans, x, w, b: xp.matmul(xp.matrix_transpose(_rows(xp, g)), _rows(xp, x)),
        lambda xp, g, ans, x, w, b: _column_sum(xp, _rows(xp, g)),
    ),
    chapter="nn.linear",
    saves=((1,), (0,), ()),
    impl=lambda B: lambda x, w, b: _linear(B, x, w, b),
    jvp=_linear_jvp,
    doc="x W^T + b",
)


def linear(input, weight, bias=None):
    """x W^T + b, as torch: ``weight`` (out, in), ``bias`` (out,), ``input`` (..., in)."""
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
