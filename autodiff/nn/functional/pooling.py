"""2-D max and average pooling (NCHW), written with the window kernels of conv, and
their 1-D forms (NCL), views over the 2-D ops as the 1-D convolutions."""

from __future__ import annotations

import math

from ... import checks
from ...backends import device_of
from ...engine.namespace import recorder_of
from ...engine.registry import defop
from ...rules.batch_rules import fold, unfold
from .conv import _as_2d, _back, pair, single

__all__ = ["max_pool2d", "avg_pool2d", "max_pool1d", "avg_pool1d"]

CH = "nn.pooling"


def _pool_args(name, kernel_size, stride, padding, dilation, ceil_mode):
    """A pooling's arguments checked once: (kernel, stride, padding, dilation, ceil_mode),
    pairs (stride defaults to the kernel) and a bool; padding at most half the kernel."""
    kernel = pair(kernel_size, name, "kernel_size")
    stride = kernel if stride is None else pair(stride, name, "stride")
    padding, dilation = pair(padding, name, "padding"), pair(dilation, name, "dilation")
    if any(p > k // 2 for p, k in zip(padding, kernel)):
        raise ValueError(f"{name}: padding {padding} must be at most half the kernel {kernel}")
    return kernel, stride, padding, dilation, checks.flag(name, "ceil_mode", ceil_mode)


def _geometry(name, x, args):
    """kernel, stride, dilation, (top, bottom, left, right) pads and output size, as torch
    (ceil_mode adds windows that start inside the input or its left padding), of checked
    arguments (``_pool_args``)."""
    if x.ndim != 4:
        raise ValueError(f"{name}: input must be 4-D (N, C, H, W), got {tuple(x.shape)}")
    kernel, stride, padding, dilation, ceil_mode = args
    out, extra = [], []
    for n, k, s, p, d in zip(x.shape[-2:], kernel, stride, padding, dilation):
        span = n + 2 * p - d * (k - 1) - 1
        if span < 0:
            raise ValueError(
                f"{name}: the window ({kernel}, dilation {dilation}) is larger than the padded "
                f"input {tuple(x.shape[-2:])} + padding {padding}"
            )
        o = (math.ceil(span / s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= n + p:
            o -= 1
        out.append(o)
        extra.append(max(0, (o - 1) * s + d * (k - 1) + 1 - (n + 2 * p)))
    pads = (padding[0], padding[0] + extra[0], padding[1], padding[1] + extra[1])
    return kernel, stride, dilation, pads, tuple(out), padding


def _windows(xp, x, kernel, stride, dilation, pads, out, value):
    xpad = xp.pad2d(x, pads=pads, value=value) if any(pads) else x
    w = xp.windows2d(xpad, kernel=kernel, stride=stride, dilation=dilation, out=out)
    n, c = x.shape[0], x.shape[1]
    return xp.reshape(w, (n, c, kernel[0] * kernel[1]) + out)


def _scatter(xp, x, g_windows, kernel, stride, dilation, pads, out):
    """Windows' gradients (N, C, K, oh, ow) back onto the input."""
    n, c, h, w = x.shape
    cols = xp.reshape(g_windows, (n, c) + kernel + out)
    size = (h + pads[0] + pads[1], w + pads[2] + pads[3])
    full = xp.col2im2d(cols, size=size, stride=stride, dilation=dilation)
    return full[..., pads[0] : pads[0] + h, pads[2] : pads[2] + w]


# -- max ------------------------------------------------------------------------------
def _offsets(kernel, stride, dilation, out):
    """The index of the strided plane each kernel offset reads, in window order."""
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, stride, dilation, out
    return [
        (
            ...,
            slice(i * dh, i * dh + (oh - 1) * sh + 1, sh),
            slice(j * dw, j * dw + (ow - 1) * sw + 1, sw),
        )
        for i in range(kh)
        for j in range(kw)
    ]


def _padded(xp, x, pads, value):
    return xp.pad2d(x, pads=pads, value=value) if any(pads) else x


def _max_pool(xp, x, *, kernel, stride, dilation, pads, out, with_offsets=False):
    """A running maximum over the kernel's strided planes (no window copies); with
    ``with_offsets``, also the offset of each window's first maximum (an integer), the
    residual for the rule: its backward is then one compare per offset, not four
    passes over the input."""
    xpad = _padded(xp, x, pads, -math.inf)
    keys = _offsets(kernel, stride, dilation, out)
    small = xp.uint8 if len(keys) <= 256 else xp.int32  # a kernel up to 16 x 16 in bytes
    result = offset = None
    for k, key in enumerate(keys):
        plane = xpad[key]
        if result is None:
            result = plane
            continue
        if with_offsets:
            # offsets grow: where this plane is larger, k exceeds every earlier offset
            later = xp.astype(plane > result, small)
            if offset is None:
                offset = later
            else:
                later *= k
                offset = xp.maximum(offset, later)
        result = xp.maximum(result, plane)
    if not with_offsets:
        return result
    if offset is None:  # a 1x1 window
        offset = xp.zeros(result.shape, dtype=small, device=device_of(result))
    return result, offset


def _max_pool_rule(xp, g, offset, x, *, kernel, stride, dilation, pads, out):
    """The first maximum of each window (in window order) gets the gradient: ``offset``
    says which kernel offset holds it."""
    n, c, h, w = x.shape
    size = (n, c, h + pads[0] + pads[1], w + pads[2] + pads[3])
    grad = xp.zeros(size, dtype=g.dtype, device=device_of(g))
    disjoint = all(s >= (k - 1) * d + 1 for k, s, d in zip(kernel, stride, dilation))
    for k, key in enumerate(_offsets(kernel, stride, dilation, out)):
        # A multiply by the 0/1 mask: NumPy's where is ten times slower.
        part = g * xp.astype(offset == k, g.dtype)
        grad = xp.set_(grad, key, part if disjoint else grad[key] + part)
    return grad[..., pads[0] : pads[0] + h, pads[2] : pads[2] + w] if any(pads) else grad


def _pool_batch(c, x, **kwargs):
    """max_pool2d / avg_pool2d, of one (N, C, H, W) input: the batch folded into N."""
    if not c.bd[0]:
        return NotImplemented
    return unfold(c, c.f(fold(c, x), **kwargs))


defop(
    "nn.max_pool2d",
    _max_pool_rule,
    chapter=CH,
    impl=lambda B: lambda x, **kw: _max_pool(B, x, **kw, with_offsets=True),
    lean=lambda B: lambda x, **kw: _max_pool(B, x, **kw),
    residuals=lambda xp, x, **kw: _max_pool(xp, x, **kw, with_offsets=True)[1],
    twice=False,
    batch=_pool_batch,
    doc="max over 2-D windows; padding is -inf; the first maximum gets the gradient",
)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """Max over sliding 2-D windows, as torch (padding counts as -inf; ``ceil_mode``);
    among equal maxima the first in the window gets the gradient."""
    name = "max_pool2d"
    return _max_pool2d(name, input, _pool_args(name, kernel_size, stride, padding, dilation,
                                                ceil_mode))  # fmt: skip


def _max_pool2d(name, input, args):
    """``max_pool2d`` of checked arguments (``_pool_args``)."""
    recorder_of(input)  # a non-array named first
    kernel, stride, dilation, pads, out, _ = _geometry(name, input, args)
    nn = recorder_of(input).xp.nn
    return nn.max_pool2d(input, kernel=kernel, stride=stride, dilation=dilation, pads=pads,
                         out=out)  # fmt: skip


# -- average --------------------------------------------------------------------------------
def _divisor(xp, x, kernel, stride, pads, out, padding, count_include_pad):
    """Per window: the number of cells counted (torch: the window clipped to the
    padded input, or to the input alone without count_include_pad)."""
    h, w = x.shape[-2:]
    ones = xp.ones((1, 1, h, w), dtype=x.dtype, device=device_of(x))
    if count_include_pad:
        ph, pw = padding
        ones = xp.pad2d(ones, pads=(ph, ph, pw, pw), value=1.0)
        rest = (pads[0] - ph, pads[1] - ph, pads[2] - pw, pads[3] - pw)
    else:
        rest = pads
    if any(rest):
        ones = xp.pad2d(ones, pads=rest, value=0.0)
    win = xp.windows2d(ones, kernel=kernel, stride=stride, dilation=(1, 1), out=out)
    return xp.sum(xp.reshape(win, (1, 1, kernel[0] * kernel[1]) + out), axis=2)


def _avg_pool(xp, x, *, kernel, stride, pads, out, padding, count_include_pad):
    win = _windows(xp, x, kernel, stride, (1, 1), pads, out, 0.0)
    return xp.sum(win, axis=2) / _divisor(xp, x, kernel, stride, pads, out, padding,
                                          count_include_pad)  # fmt: skip


def _avg_pool_rule(xp, g, ans, x, *, kernel, stride, pads, out, padding, count_include_pad):
    share = g / _divisor(xp, x, kernel, stride, pads, out, padding, count_include_pad)
    gw = xp.broadcast_to(xp.expand_dims(share, axis=2),
                         tuple(x.shape[:2]) + (kernel[0] * kernel[1],) + out)  # fmt: skip
    return _scatter(xp, x, gw, kernel, stride, (1, 1), pads, out)


defop(
    "nn.avg_pool2d",
    _avg_pool_rule,
    chapter=CH,
    impl=lambda B: lambda x, **kw: _avg_pool(B, x, **kw),
    saves=(),
    linear=True,
    batch=_pool_batch,
    doc="mean over 2-D windows (by default the full window, padding included)",
)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):  # fmt: skip
    """Mean over sliding 2-D windows, as torch: zero padding counted in the divisor
    unless ``count_include_pad=False``; ``ceil_mode`` windows are clipped."""
    name = "avg_pool2d"
    args = _pool_args(name, kernel_size, stride, padding, 1, ceil_mode)
    return _avg_pool2d(name, input, args, checks.flag(name, "count_include_pad",
                                                      count_include_pad))  # fmt: skip


def _avg_pool2d(name, input, args, count_include_pad):
    """``avg_pool2d`` of checked arguments (``_pool_args``, a bool)."""
    recorder_of(input)  # a non-array named first
    kernel, stride, _, pads, out, padding = _geometry(name, input, args)
    geometry = {"kernel": kernel, "stride": stride, "pads": pads, "out": out, "padding": padding}
    return recorder_of(input).xp.nn.avg_pool2d(
        input, count_include_pad=count_include_pad, **geometry
    )


# -- 1-D pooling -----------------------------------------------------------------------------
def _pool1d_args(name, kernel_size, stride, padding, dilation, ceil_mode):
    """The 2-D pooling arguments (``_pool_args``' form) of 1-D ones checked once:
    ints (stride defaults to the kernel), padding at most half the kernel, a bool."""
    kernel = single(kernel_size, name, "kernel_size")
    stride = kernel if stride is None else single(stride, name, "stride")
    padding, dilation = single(padding, name, "padding"), single(dilation, name, "dilation")
    if padding > kernel // 2:
        raise ValueError(f"{name}: padding {padding} must be at most half the kernel {kernel}")
    ceil_mode = checks.flag(name, "ceil_mode", ceil_mode)
    return (1, kernel), (1, stride), (0, padding), (1, dilation), ceil_mode


def _max_pool1d(name, input, args):
    x, unbatched = _as_2d(name, input)
    return _back(_max_pool2d(name, x, args), unbatched)


def _avg_pool1d(name, input, args, count_include_pad):
    x, unbatched = _as_2d(name, input)
    return _back(_avg_pool2d(name, x, args, count_include_pad), unbatched)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """Max over sliding 1-D windows, as torch (padding counts as -inf; ``ceil_mode``);
    among equal maxima the first in the window gets the gradient."""
    name = "max_pool1d"
    return _max_pool1d(name, input, _pool1d_args(name, kernel_size, stride, padding, dilation,
                                                  ceil_mode))  # fmt: skip


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):  # fmt: skip
    """Mean over sliding 1-D windows, as torch (zero padding counted in the divisor
    unless ``count_include_pad=False``)."""
    name = "avg_pool1d"
    args = _pool1d_args(name, kernel_size, stride, padding, 1, ceil_mode)
    include = checks.flag(name, "count_include_pad", count_include_pad)
    return _avg_pool1d(name, input, args, include)
