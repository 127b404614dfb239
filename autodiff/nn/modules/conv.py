"""Convolution layers, as torch.nn: ``Conv1d``, ``Conv2d``, ``ConvTranspose1d`` and
``ConvTranspose2d``, with the same constructor arguments, parameter names, shapes and
default initialization (a torch state dict loads one to one)."""

from __future__ import annotations

import math

from ..functional.conv import (
    _conv1d_args,
    _conv1d_call,
    _conv2d_call,
    _conv_args,
    _conv_transpose1d_args,
    _conv_transpose1d_call,
    _conv_transpose2d_call,
    _conv_transpose_args,
)
from .module import Module, factory, flags, sizes, uniform_parameter

__all__ = ["Conv2d", "ConvTranspose2d", "Conv1d", "ConvTranspose1d"]


class _ConvNd(Module):
    def _setup(self, in_channels, out_channels, kernel_size, groups, bias, wshape, fan_in,
               xp, dtype, device, generator):  # fmt: skip
        name = type(self).__name__
        flags(name, bias=bias)
        if in_channels % groups or out_channels % groups:
            raise ValueError(
                f"{name}: groups={groups} must divide in_channels={in_channels} and "
                f"out_channels={out_channels}"
            )
        xp, dtype, device = factory(xp, dtype, device, name, generator)
        bound = 1.0 / math.sqrt(fan_in)
        self.weight = uniform_parameter(xp, wshape, bound, dtype, device, generator)
        self.bias = (
            uniform_parameter(xp, (out_channels,), bound, dtype, device, generator)
            if bias
            else None
        )

    def extra_repr(self):
        s = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        zeros, ones = (0,) * len(self.kernel_size), (1,) * len(self.kernel_size)
        if self.padding not in (zeros, "valid"):
            s += f", padding={self.padding}"
        if getattr(self, "output_padding", zeros) != zeros:
            s += f", output_padding={self.output_padding}"
        if self.dilation != ones:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class Conv2d(_ConvNd):
    """2-D convolution over (N, C, H, W); weight (out, in/groups, kh, kw), as torch."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, *, xp=None, dtype=None, device=None,
                 generator=None):  # fmt: skip
        super().__init__()
        name = "Conv2d"
        sizes(name, in_channels=in_channels, out_channels=out_channels)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding, self.dilation, self.groups = _conv_args(
            name, kernel_size, stride, padding, dilation, groups
        )
        kh, kw = self.kernel_size
        wshape = (out_channels, in_channels // groups, kh, kw)
        fan_in = in_channels // groups * kh * kw
        self._setup(in_channels, out_channels, self.kernel_size, groups, bias, wshape, fan_in,
                    xp, dtype, device, generator)  # fmt: skip

    def forward(self, x):
        return _conv2d_call("conv2d", x, self.weight, self.bias, self.stride, self.padding,
                       self.dilation, self.groups)  # fmt: skip


class ConvTranspose2d(_ConvNd):
    """Transposed 2-D convolution; weight (in, out/groups, kh, kw), as torch."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, *, xp=None, dtype=None,
                 device=None, generator=None):  # fmt: skip
        super().__init__()
        name = "ConvTranspose2d"
        sizes(name, in_channels=in_channels, out_channels=out_channels)
        self.in_channels, self.out_channels = in_channels, out_channels
        (self.kernel_size, self.stride, self.padding, self.output_padding, self.groups,
         self.dilation) = _conv_transpose_args(name, kernel_size, stride, padding, output_padding,
                                               groups, dilation)  # fmt: skip
        kh, kw = self.kernel_size
        wshape = (in_channels, out_channels // groups, kh, kw)
        # torch computes the fan from weight.shape[1]: out/groups * kh * kw
        fan_in = out_channels // groups * kh * kw
        self._setup(in_channels, out_channels, self.kernel_size, groups, bias, wshape, fan_in,
                    xp, dtype, device, generator)  # fmt: skip

    def forward(self, x):
        return _conv_transpose2d_call("conv_transpose2d", x, self.weight, self.bias, self.stride,
                                      self.padding, self.output_padding, self.groups,
                                      self.dilation)  # fmt: skip


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
