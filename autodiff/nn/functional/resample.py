"""Adaptive average pooling and ``interpolate`` (nearest, linear, bilinear), as torch.

Both are compositions of differentiable standard ops, so they need no rule of their
own: an adaptive pool is a reshape and a mean where the bins are equal (L divisible
by the output size), else one mean per bin over torch's bin edges
``floor(i * L / out)`` .. ``ceil((i + 1) * L / out)``; ``interpolate`` is one or two
gathers (``take``) per axis and their weighted sum, with torch's source indices
(nearest: ``floor(i * scale)`` in float32, as torch computes it; linear:
``scale * (i + 0.5) - 0.5`` clamped at 0, or ``i * (in - 1) / (out - 1)`` with
``align_corners``).
"""

from __future__ import annotations

import math
import struct

from ... import checks
from ...backends import device_of
from ...engine.namespace import recorder_of

__all__ = ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "interpolate"]


# -- adaptive average pooling --------------------------------------------------------------
def _floating(name, xp, x):
    """A TypeError naming ``name`` unless ``x`` has a real floating dtype (a mean or a
    weighted sum of integers would truncate)."""
    if not xp.isdtype(x.dtype, "real floating"):
        raise TypeError(f"{name}: input must have a real floating dtype, got {x.dtype}")


def _array(name, x):
    if not hasattr(x, "ndim"):
        raise TypeError(f"{name}: input must be an array or a Tensor, got {type(x).__name__}")


def _output_size_args(name, output_size, dims):
    """``output_size`` as a tuple of ``dims`` ints >= 1 (an int is repeated; in 2-D a None
    entry keeps the input's size), checked once."""
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != dims:
            raise ValueError(
                f"{name}: output_size must be an int or a tuple of {dims}, got {output_size!r}"
            )
        return tuple(
            None if (v is None and dims > 1) else int(checks.integer(name, "output_size", v, 1))
            for v in output_size
        )
    return (int(checks.integer(name, "output_size", output_size, 1)),) * dims


def _adaptive_axis(xp, x, axis, out):
    """Mean over ``out`` bins of ``axis`` (a positive axis), torch's bin edges."""
    n = x.shape[axis]
    if n % out == 0:
        shape = tuple(x.shape[:axis]) + (out, n // out) + tuple(x.shape[axis + 1 :])
        return xp.mean(xp.reshape(x, shape), axis=axis + 1)
    lead = (slice(None),) * axis
    parts = []
    for i in range(out):
        start, end = (i * n) // out, -(-((i + 1) * n) // out)
        parts.append(xp.mean(x[lead + (slice(start, end), ...)], axis=axis, keepdims=True))
    return xp.concat(parts, axis=axis)


def _adaptive_avg_pool(name, input, size):
    """Adaptive average pooling of the last ``len(size)`` axes, of a checked size."""
    dims = len(size)
    _array(name, input)
    if getattr(input, "ndim", None) not in (dims + 1, dims + 2):
        shape = tuple(getattr(input, "shape", ()))
        raise ValueError(
            f"{name}: input must be {dims + 2}-D or {dims + 1}-D (unbatched), got {shape}"
        )
    if any(n < 1 for n in input.shape[-dims:]):
        raise ValueError(f"{name}: input has an empty spatial axis, shape {tuple(input.shape)}")
    xp = recorder_of(input).xp
    _floating(name, xp, input)
    y = input
    for k, out in enumerate(size):
        axis = input.ndim - dims + k
        if out is not None:
            y = _adaptive_axis(xp, y, axis, out)
    return y


def adaptive_avg_pool1d(input, output_size):
    """Mean over ``output_size`` bins of the last axis of (N, C, L) or (C, L), as torch."""
    name = "adaptive_avg_pool1d"
    return _adaptive_avg_pool(name, input, _output_size_args(name, output_size, 1))


def adaptive_avg_pool2d(input, output_size):
    """Mean over ``output_size`` bins of the last two axes of (N, C, H, W) or (C, H, W),
    as torch (an int or a pair; a None entry keeps that axis)."""
    name = "adaptive_avg_pool2d"
    return _adaptive_avg_pool(name, input, _output_size_args(name, output_size, 2))


# -- interpolate -----------------------------------------------------------------------------
_MODES = ("nearest", "linear", "bilinear")
_DIMS = {"linear": 1, "bilinear": 2}


def _interpolate_args(name, size, scale_factor, mode, align_corners, recompute_scale_factor=None,
                      antialias=False):  # fmt: skip
    """(size, scale_factor, mode, align_corners) checked once: exactly one of ``size`` (ints
    >= 1) and ``scale_factor`` (numbers > 0), each an int/number or a tuple; ``mode`` one of
    "nearest", "linear", "bilinear"; ``align_corners`` None or a bool (None for nearest)."""
    checks.choice(name, "mode", mode, _MODES)
    if align_corners is not None:
        checks.flag(name, "align_corners", align_corners)
        if mode == "nearest":
            raise ValueError(
                f"{name}: align_corners can only be set with mode 'linear' or 'bilinear', "
                f"got align_corners={align_corners} with mode 'nearest'"
            )
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{name}: give exactly one of size and scale_factor")
    if size is not None:
        size = checks.integers(name, "size", size, low=1)
    else:
        fs = scale_factor if isinstance(scale_factor, (tuple, list)) else (scale_factor,)
        if not fs:
            raise ValueError(f"{name}: scale_factor must be a number or a tuple of numbers")
        scale_factor = tuple(
            float(checks.number(name, "scale_factor", f, 0, open_low=True)) for f in fs
        )
    if recompute_scale_factor is not None:
        checks.flag(name, "recompute_scale_factor", recompute_scale_factor)
        if recompute_scale_factor and size is not None:
            raise ValueError(f"{name}: recompute_scale_factor=True needs scale_factor, not size")
    if checks.flag(name, "antialias", antialias):
        raise ValueError(f"{name}: antialias=True is not supported (modes {_MODES} only)")
    return size, scale_factor, mode, bool(align_corners), bool(recompute_scale_factor)


def _f32(v):
    """``v`` rounded to float32 (torch computes nearest indices in float)."""
    return struct.unpack("f", struct.pack("f", v))[0]


def _nearest_indices(n, out, factor, shortcuts):
    """torch's nearest source indices: ``floor(i * scale)`` in float32; with ``shortcuts``
    (torch's 2-D kernel, not its 1-D one) an axis of unchanged size is copied and one of
    twice the size reads ``i // 2``, whatever the scale factor."""
    if shortcuts and out == n:
        return list(range(out))
    if shortcuts and out == 2 * n:
        return [i >> 1 for i in range(out)]
    scale = _f32(1.0 / factor) if factor is not None else _f32(n / out)
    return [min(int(math.floor(_f32(i * scale))), n - 1) for i in range(out)]


def _linear_weights(n, out, factor, align_corners):
    """(i0, i1, lambda0, lambda1) per output index, torch's source coordinates (an axis
    of unchanged size is copied, whatever the scale factor, as torch does)."""
    if out == n:
        return list(range(n)), list(range(n)), [1.0] * n, [0.0] * n
    if align_corners:
        scale = (n - 1) / (out - 1) if out > 1 else 0.0
    else:
        scale = 1.0 / factor if factor is not None else n / out
    i0s, i1s, l0s, l1s = [], [], [], []
    for i in range(out):
        src = scale * i if align_corners else max(scale * (i + 0.5) - 0.5, 0.0)
        i0 = int(math.floor(src))
        lam = min(max(src - i0, 0.0), 1.0)
        i0s.append(i0)
        i1s.append(i0 + (1 if i0 < n - 1 else 0))
        l0s.append(1.0 - lam)
        l1s.append(lam)
    return i0s, i1s, l0s, l1s


def _interpolate_checked(name, input, args):
    size, factors, mode, align_corners, recompute = args
    _array(name, input)
    ndim = input.ndim
    allowed = (3, 4) if mode == "nearest" else (_DIMS[mode] + 2,)
    if ndim not in allowed:
        shape = tuple(getattr(input, "shape", ()))
        want = " or ".join(f"{d}-D" for d in allowed)
        raise ValueError(f"{name}: mode {mode!r} needs a {want} input (N, C, ...), got {shape}")
    dims = ndim - 2
    spatial = tuple(input.shape[2:])
    if size is not None:
        if len(size) not in (1, dims):
            raise ValueError(
                f"{name}: size must be an int or a tuple of {dims} for a {ndim}-D input, "
                f"got {size!r}"
            )
        out = size * dims if len(size) == 1 else size
        factors = (None,) * dims
    else:
        if len(factors) not in (1, dims):
            raise ValueError(
                f"{name}: scale_factor must be a number or a tuple of {dims} for a {ndim}-D "
                f"input, got {factors!r}"
            )
        factors = factors * dims if len(factors) == 1 else factors
        out = tuple(int(math.floor(n * f)) for n, f in zip(spatial, factors))
        if min(out) < 1:
            raise ValueError(
                f"{name}: scale_factor {factors} leaves no output for the input size {spatial}"
            )
        if recompute:  # the sizes alone set the scale, as torch
            factors = (None,) * dims
    if min(spatial) < 1:
        raise ValueError(f"{name}: input has an empty spatial axis, shape {tuple(input.shape)}")
    xp = recorder_of(input).xp
    if mode != "nearest":
        _floating(name, xp, input)
    dev = device_of(input)
    y = input
    # the last axis first: with two axes this is torch's bilinear sum, term for term
    for axis in reversed(range(2, ndim)):
        n, o, f = spatial[axis - 2], out[axis - 2], factors[axis - 2]
        if mode == "nearest":
            idx = _nearest_indices(n, o, f, ndim == 4)
            idx = xp.asarray(idx, dtype=xp.int64, device=dev)
            y = xp.take(y, idx, axis=axis)
            continue
        if o == n:
            continue
        i0, i1, l0, l1 = _linear_weights(n, o, f, align_corners)
        shape = (o,) + (1,) * (ndim - 1 - axis)
        w0 = xp.reshape(xp.asarray(l0, dtype=y.dtype, device=dev), shape)
        w1 = xp.reshape(xp.asarray(l1, dtype=y.dtype, device=dev), shape)
        a = xp.take(y, xp.asarray(i0, dtype=xp.int64, device=dev), axis=axis)
        b = xp.take(y, xp.asarray(i1, dtype=xp.int64, device=dev), axis=axis)
        y = a * w0 + b * w1
    return y


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):  # fmt: skip
    """Resize the spatial axes of (N, C, L) or (N, C, H, W) as torch: ``size`` or
    ``scale_factor`` (output size ``floor(n * scale_factor)``; the scale itself sets the
    source coordinates unless ``recompute_scale_factor``); ``mode`` "nearest" (1-D, 2-D),
    "linear" (1-D) or "bilinear" (2-D), ``align_corners`` for the last two;
    ``antialias`` must be False."""
    name = "interpolate"
    args = _interpolate_args(name, size, scale_factor, mode, align_corners,
                             recompute_scale_factor, antialias)  # fmt: skip
    return _interpolate_checked(name, input, args)
