"""``Flatten`` and ``Unflatten``, as torch.nn: reshapes of the namespace, no op of their
own."""

from __future__ import annotations

import math

from ... import checks
from .module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    """Merge axes ``start_dim`` .. ``end_dim`` into one."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        checks.integer("Flatten", "start_dim", start_dim)
        checks.integer("Flatten", "end_dim", end_dim)
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        xp = x.__array_namespace__()
        n = x.ndim
        m = max(n, 1)  # a 0-d input has one axis to name, as in torch
        if not (-m <= self.start_dim < m and -m <= self.end_dim < m):
            for what, d in (("start_dim", self.start_dim), ("end_dim", self.end_dim)):
                checks.integer("Flatten", what, d, -m, m - 1)
        s, e = self.start_dim % m, self.end_dim % m
        if s > e:
            raise ValueError(
                f"Flatten: start_dim={self.start_dim} comes after end_dim={self.end_dim} for an "
                f"input of {n} axes"
            )
        if n == 0:
            return xp.reshape(x, (1,))
        shape = x.shape[:s] + (math.prod(x.shape[s : e + 1]),) + x.shape[e + 1 :]
        return xp.reshape(x, shape)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


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
