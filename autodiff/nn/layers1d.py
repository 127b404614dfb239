"""1-D convolution and pooling layers, adaptive average pools and ``Upsample``, as
``torch.nn``: same constructor arguments, parameter names, shapes and default
initialization (a torch state dict loads one to one)."""

from __future__ import annotations

from .. import checks
from .conv1d import (
    _avg_pool1d,
    _conv1d_args,
    _conv1d_call,
    _conv_transpose1d_args,
    _conv_transpose1d_call,
    _max_pool1d,
    _pool1d_args,
)
from .layers import _ConvNd, sizes
from .module import Module
from .resample import (
    _adaptive_avg_pool,
    _interpolate_args,
    _interpolate_checked,
    _output_size_args,
)

__all__ = [
    "Conv1d",
    "ConvTranspose1d",
    "MaxPool1d",
    "AvgPool1d",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "Upsample",
]


class Conv1d(_ConvNd):
    """1-D convolution over (N, C, L); weight (out, in/groups, k), as torch."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, *, xp=None, dtype=None, device=None,
                 generator=None):  # fmt: skip
        super().__init__()
        name = "Conv1d"
        sizes(name, in_channels=in_channels, out_channels=out_channels)
        self.in_channels, self.out_channels = in_channels, out_channels
        k, s, p, d, g = _conv1d_args(name, kernel_size, stride, padding, dilation, groups)
        self.kernel_size, self.stride, self.dilation, self.groups = (k,), (s,), (d,), g
        self.padding = p if isinstance(p, str) else (p,)
        wshape = (out_channels, in_channels // groups, k)
        self._setup(in_channels, out_channels, self.kernel_size, groups, bias, wshape,
                    in_channels // groups * k, xp, dtype, device, generator)  # fmt: skip

    def forward(self, x):
        p = self.padding if isinstance(self.padding, str) else self.padding[0]
        return _conv1d_call("Conv1d", x, self.weight, self.bias, self.stride[0], p,
                            self.dilation[0], self.groups)  # fmt: skip


class ConvTranspose1d(_ConvNd):
    """Transposed 1-D convolution; weight (in, out/groups, k), as torch."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, *, xp=None, dtype=None,
                 device=None, generator=None):  # fmt: skip
        super().__init__()
        name = "ConvTranspose1d"
        sizes(name, in_channels=in_channels, out_channels=out_channels)
        self.in_channels, self.out_channels = in_channels, out_channels
        k, s, p, op, g, d = _conv_transpose1d_args(name, kernel_size, stride, padding,
                                                   output_padding, groups, dilation)  # fmt: skip
        self.kernel_size, self.stride, self.padding = (k,), (s,), (p,)
        self.output_padding, self.groups, self.dilation = (op,), g, (d,)
        wshape = (in_channels, out_channels // groups, k)
        # torch computes the fan from weight.shape[1]: out/groups * k
        self._setup(in_channels, out_channels, self.kernel_size, groups, bias, wshape,
                    out_channels // groups * k, xp, dtype, device, generator)  # fmt: skip

    def forward(self, x):
        return _conv_transpose1d_call("ConvTranspose1d", x, self.weight, self.bias,
                                      self.stride[0], self.padding[0], self.output_padding[0],
                                      self.groups, self.dilation[0])  # fmt: skip


class MaxPool1d(Module):
    """Max over 1-D windows; the first maximum of a window gets the gradient."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
        super().__init__()
        self._args = _pool1d_args("MaxPool1d", kernel_size, stride, padding, dilation,
                                  ceil_mode)  # fmt: skip
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.ceil_mode = dilation, ceil_mode

    def forward(self, x):
        return _max_pool1d("MaxPool1d", x, self._args)

    def extra_repr(self):
        stride = self.kernel_size if self.stride is None else self.stride
        return (
            f"kernel_size={self.kernel_size}, stride={stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class AvgPool1d(Module):
    """Mean over 1-D windows (the divisor counts padding unless
    ``count_include_pad=False``)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):  # fmt: skip
        super().__init__()
        self._args = _pool1d_args("AvgPool1d", kernel_size, stride, padding, 1, ceil_mode)
        checks.flag("AvgPool1d", "count_include_pad", count_include_pad)
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, x):
        return _avg_pool1d("AvgPool1d", x, self._args, self.count_include_pad)

    def extra_repr(self):
        stride = self.kernel_size if self.stride is None else self.stride
        return f"kernel_size={self.kernel_size}, stride={stride}, padding={self.padding}"


class AdaptiveAvgPool1d(Module):
    """Mean over ``output_size`` bins of the last axis (torch's bin edges)."""

    def __init__(self, output_size):
        super().__init__()
        self._size = _output_size_args("AdaptiveAvgPool1d", output_size, 1)
        self.output_size = output_size

    def forward(self, x):
        return _adaptive_avg_pool("AdaptiveAvgPool1d", x, self._size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool2d(Module):
    """Mean over ``output_size`` bins of the last two axes (torch's bin edges); a None
    size keeps the input's."""

    def __init__(self, output_size):
        super().__init__()
        self._size = _output_size_args("AdaptiveAvgPool2d", output_size, 2)
        self.output_size = output_size

    def forward(self, x):
        return _adaptive_avg_pool("AdaptiveAvgPool2d", x, self._size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class Upsample(Module):
    """``F.interpolate`` as a layer: ``size`` or ``scale_factor``, ``mode`` "nearest",
    "linear" or "bilinear"."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):  # fmt: skip
        super().__init__()
        self._args = _interpolate_args("Upsample", size, scale_factor, mode, align_corners,
                                       recompute_scale_factor)  # fmt: skip
        self.size, self.mode, self.align_corners = size, mode, align_corners
        self.recompute_scale_factor = recompute_scale_factor
        self.scale_factor = (
            tuple(float(f) for f in scale_factor)
            if isinstance(scale_factor, (tuple, list))
            else (float(scale_factor) if scale_factor else None)
        )

    def forward(self, x):
        return _interpolate_checked("Upsample", x, self._args)

    def extra_repr(self):
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor}"
        else:
            info = f"size={self.size}"
        return info + f", mode={self.mode!r}"
