"""More activation modules and ``Unflatten``, as torch.nn (a reduction axis is ``axis``,
as everywhere here)."""

from __future__ import annotations

import math

from .. import checks
from . import activations as A
from .module import Module

__all__ = ["LeakyReLU", "ELU", "Mish", "Hardswish", "GLU", "Softmin", "Unflatten"]


class LeakyReLU(Module):
    """x where x > 0, else ``negative_slope`` x."""

    def __init__(self, negative_slope=0.01):
        super().__init__()
        self.negative_slope = checks.number("LeakyReLU", "negative_slope", negative_slope)

    def forward(self, x):
        return A.leaky_relu(x, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}"


class ELU(Module):
    """x where x > 0, else alpha (exp(x) - 1)."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self.alpha = checks.number("ELU", "alpha", alpha)

    def forward(self, x):
        return A.elu(x, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}"


class Mish(Module):
    """x tanh(softplus(x))."""

    def forward(self, x):
        return A.mish(x)


class Hardswish(Module):
    """x relu6(x + 3) / 6."""

    def forward(self, x):
        return A.hardswish(x)


class GLU(Module):
    """a sigmoid(b) of the two halves of the input along ``axis``."""

    def __init__(self, axis=-1):
        super().__init__()
        self.axis = checks.integer("GLU", "axis", axis)

    def forward(self, x):
        return A.glu(x, self.axis)

    def extra_repr(self):
        return f"axis={self.axis}"


class Softmin(Module):
    """softmax(-x) along ``axis``."""

    def __init__(self, axis=-1):
        super().__init__()
        self.axis = None if axis is None else checks.integer("Softmin", "axis", axis)

    def forward(self, x):
        return A.softmin(x, self.axis)

    def extra_repr(self):
        return f"axis={self.axis}"


class Unflatten(Module):
    """Split axis ``dim`` into ``unflattened_size`` (one entry may be -1)."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim = checks.integer("Unflatten", "dim", dim)
        self.unflattened_size = checks.integers(
            "Unflatten", "unflattened_size", unflattened_size, -1
        )
        if self.unflattened_size.count(-1) > 1:
            raise ValueError("Unflatten: unflattened_size may hold at most one -1")

    def forward(self, x):
        n = x.ndim
        if not -n <= self.dim < n:
            raise ValueError(f"Unflatten: dim {self.dim} is out of range for {n} axes")
        d = self.dim % n
        sizes = self.unflattened_size
        known = math.prod(s for s in sizes if s != -1)
        if (-1 in sizes and (known == 0 or x.shape[d] % known)) or (
            -1 not in sizes and known != x.shape[d]
        ):
            raise ValueError(
                f"Unflatten: axis {self.dim} of size {x.shape[d]} can't be split as {sizes}"
            )
        shape = tuple(x.shape[:d]) + tuple(sizes) + tuple(x.shape[d + 1 :])
        return x.__array_namespace__().reshape(x, shape)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
