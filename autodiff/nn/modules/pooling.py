"""Max and average pooling layers, as torch.nn: ``MaxPool2d``, ``AvgPool2d``,
``MaxPool1d`` and ``AvgPool1d``, with torch's constructor arguments."""

from __future__ import annotations

from ... import checks
from ..functional.pooling import (
    _avg_pool1d,
    _avg_pool2d,
    _max_pool1d,
    _max_pool2d,
    _pool1d_args,
    _pool_args,
)
from .module import Module

__all__ = ["MaxPool2d", "AvgPool2d", "MaxPool1d", "AvgPool1d"]


class MaxPool2d(Module):
    """Max over windows; the first maximum of a window gets the gradient."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
        super().__init__()
        self._args = _pool_args("MaxPool2d", kernel_size, stride, padding, dilation, ceil_mode)
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.ceil_mode = dilation, ceil_mode

    def forward(self, x):
        return _max_pool2d("max_pool2d", x, self._args)

    def extra_repr(self):
        stride = self.kernel_size if self.stride is None else self.stride
        return (
            f"kernel_size={self.kernel_size}, stride={stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class AvgPool2d(Module):
    """Mean over windows (the divisor counts padding unless ``count_include_pad=False``)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):  # fmt: skip
        super().__init__()
        self._args = _pool_args("AvgPool2d", kernel_size, stride, padding, 1, ceil_mode)
        checks.flag("AvgPool2d", "count_include_pad", count_include_pad)
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, x):
        return _avg_pool2d("avg_pool2d", x, self._args, self.count_include_pad)

    def extra_repr(self):
        stride = self.kernel_size if self.stride is None else self.stride
        return f"kernel_size={self.kernel_size}, stride={stride}, padding={self.padding}"


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
