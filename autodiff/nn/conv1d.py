"""1-D convolution, transposed convolution and pooling (NCL), as torch.

Each is a thin composition over its 2-D op: the input (N, C, L) is viewed as
(N, C, 1, L) and the kernel (O, C/groups, k) as (O, C/groups, 1, k), so the fused
2-D rules (first and second order, batching) are reused; no op is registered here.
An unbatched input (C, L) is accepted, as torch does.
"""

from __future__ import annotations

from .. import checks
from ..engine.namespace import recorder_of
from .conv import _conv2d_call, _conv_transpose2d_call
from .pooling import _avg_pool2d, _max_pool2d

__all__ = ["conv1d", "conv_transpose1d", "max_pool1d", "avg_pool1d"]


def single(v, name, what):
    """``v`` (an int or a tuple of one int) as an int: a padding (``what`` "padding",
    "output_padding") >= 0, a kernel size, stride or dilation >= 1, checked by
    ``checks.integer`` (a TypeError for a wrong type, a ValueError for a wrong value or
    length, naming ``name`` and ``what``)."""
    low = 0 if what.endswith("padding") else 1
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise ValueError(f"{name}: {what} must be an int or a tuple of one int, got {v!r}")
        v = v[0]
    return int(checks.integer(name, what, v, low))


def _as_2d(name, x, what="input"):
    """(x as (N, C, 1, L), whether it was unbatched), for a 2-D or 3-D ``x``."""
    if not hasattr(x, "ndim"):
        raise TypeError(f"{name}: {what} must be an array or a Tensor, got {type(x).__name__}")
    if x.ndim not in (2, 3):
        shape = tuple(getattr(x, "shape", ()))
        raise ValueError(f"{name}: {what} must be 3-D (N, C, L) or 2-D (C, L), got {shape}")
    xp = recorder_of(x).xp
    unbatched = x.ndim == 2
    shape = ((1,) if unbatched else ()) + tuple(x.shape)
    return xp.reshape(x, shape[:2] + (1, shape[2])), unbatched


def _back(y, unbatched):
    """(N, C, 1, L') back to (N, C, L') (or (C, L'))."""
    xp = recorder_of(y).xp
    shape = (y.shape[1], y.shape[3]) if unbatched else (y.shape[0], y.shape[1], y.shape[3])
    return xp.reshape(y, shape)


def _kernel_2d(name, w):
    if not hasattr(w, "ndim"):
        raise TypeError(f"{name}: weight must be an array or a Tensor, got {type(w).__name__}")
    if w.ndim != 3:
        shape = tuple(getattr(w, "shape", ()))
        raise ValueError(f"{name}: weight must be 3-D (O, C/groups, k), got {shape}")
    xp = recorder_of(w).xp
    return xp.reshape(w, (w.shape[0], w.shape[1], 1, w.shape[2]))


# -- conv1d --------------------------------------------------------------------------------
def _conv1d_args(name, kernel_size, stride, padding, dilation, groups):
    """(kernel, stride, padding, dilation, groups) checked once: ints but ``padding``
    "valid" or "same" (which needs stride 1); ``kernel`` None when ``kernel_size`` is."""
    kernel = None if kernel_size is None else single(kernel_size, name, "kernel_size")
    stride, dilation = single(stride, name, "stride"), single(dilation, name, "dilation")
    if isinstance(padding, str):
        checks.choice(name, "padding", padding, ("valid", "same"))
        if padding == "same" and stride != 1:
            raise ValueError(f"{name}: padding='same' needs stride 1, got stride {stride}")
    else:
        padding = single(padding, name, "padding")
    return kernel, stride, padding, dilation, int(checks.integer(name, "groups", groups, low=1))


def _conv1d_call(name, input, weight, bias, stride, padding, dilation, groups):
    """``conv1d`` of checked arguments (``_conv1d_args``)."""
    x, unbatched = _as_2d(name, input)
    w = _kernel_2d(name, weight)
    pad = padding if isinstance(padding, str) else (0, padding)
    y = _conv2d_call(name, x, w, bias, (1, stride), pad, (1, dilation), groups)
    return _back(y, unbatched)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution as torch: ``input`` (N, C, L), ``weight`` (O, C/groups, k),
    ``padding`` an int, "valid" or "same"."""
    _, stride, padding, dilation, groups = _conv1d_args("conv1d", None, stride, padding,
                                                        dilation, groups)  # fmt: skip
    return _conv1d_call("conv1d", input, weight, bias, stride, padding, dilation, groups)


# -- conv_transpose1d ------------------------------------------------------------------------
def _conv_transpose1d_args(name, kernel_size, stride, padding, output_padding, groups, dilation):
    """(kernel, stride, padding, output_padding, groups, dilation) checked once, ints;
    ``output_padding`` smaller than stride or dilation."""
    kernel = None if kernel_size is None else single(kernel_size, name, "kernel_size")
    stride, dilation = single(stride, name, "stride"), single(dilation, name, "dilation")
    padding = single(padding, name, "padding")
    output_padding = single(output_padding, name, "output_padding")
    if output_padding >= max(stride, dilation):
        raise ValueError(
            f"{name}: output_padding {output_padding} must be smaller than stride or dilation"
        )
    groups = int(checks.integer(name, "groups", groups, low=1))
    return kernel, stride, padding, output_padding, groups, dilation


def _conv_transpose1d_call(name, input, weight, bias, stride, padding, output_padding, groups,
                           dilation):  # fmt: skip
    x, unbatched = _as_2d(name, input)
    w = _kernel_2d(name, weight)
    y = _conv_transpose2d_call(name, x, w, bias, (1, stride), (0, padding), (0, output_padding),
                               groups, (1, dilation))  # fmt: skip
    return _back(y, unbatched)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):  # fmt: skip
    """Transposed 1-D convolution as torch: ``weight`` (C_in, C_out/groups, k), output
    length (L - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1."""
    name = "conv_transpose1d"
    args = _conv_transpose1d_args(name, None, stride, padding, output_padding, groups, dilation)
    return _conv_transpose1d_call(name, input, weight, bias, *args[1:])


# -- pooling ---------------------------------------------------------------------------------
def _pool1d_args(name, kernel_size, stride, padding, dilation, ceil_mode):
    """The 2-D pooling arguments (``pooling._pool_args``' form) of 1-D ones checked once:
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
