"""Adaptive average pools and ``Upsample``, as torch.nn: each calls its composition of
``autodiff.nn.functional.resample``."""

from __future__ import annotations

from ..functional.resample import (
    _adaptive_avg_pool,
    _interpolate_args,
    _interpolate_checked,
    _output_size_args,
)
from .module import Module

__all__ = ["AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "Upsample"]


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
