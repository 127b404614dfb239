"""``Identity`` and ``Linear``, as torch.nn: same constructor arguments, parameter
names, shapes and default initialization (a torch state dict loads one to one)."""

from __future__ import annotations

import math

from ..functional.linear import linear
from .module import Module, factory, flags, sizes, uniform_parameter

__all__ = ["Identity", "Linear"]


class Identity(Module):
    """Returns its input."""

    def forward(self, x):
        return x


class Linear(Module):
    """y = x W^T + b, W of shape (out_features, in_features).

    W and b are drawn from U(-1/sqrt(in), 1/sqrt(in)), as torch.
    """

    def __init__(self, in_features, out_features, bias=True, *, xp=None, dtype=None,
                 device=None, generator=None):  # fmt: skip
        super().__init__()
        sizes("Linear", in_features=in_features, out_features=out_features)
        flags("Linear", bias=bias)
        xp, dtype, device = factory(xp, dtype, device, "Linear", generator)
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features) if in_features else 0.0
        shape = (out_features, in_features)
        self.weight = uniform_parameter(xp, shape, bound, dtype, device, generator)
        self.bias = (
            uniform_parameter(xp, (out_features,), bound, dtype, device, generator)
            if bias
            else None
        )

    def forward(self, x):
        if x.shape[-1:] != (self.in_features,):
            raise ValueError(
                f"Linear: expected input with last axis {self.in_features}, got shape "
                f"{tuple(x.shape)}"
            )
        return linear(x, self.weight, self.bias)

    def extra_repr(self):
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )
