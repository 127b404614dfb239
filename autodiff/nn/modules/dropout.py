"""``Dropout``, as torch.nn: masks from the seeded generator while training."""

from __future__ import annotations

from ... import checks
from .. import init
from ..functional.dropout import _dropout
from .module import Module

__all__ = ["Dropout"]


class Dropout(Module):
    """Zero each element with probability ``p`` while training, scaling the rest by
    1/(1-p); the identity in eval mode. Masks come from the seeded generator."""

    def __init__(self, p=0.5, *, generator=None):
        super().__init__()
        checks.number("Dropout", "p", p, 0.0, 1.0)
        self.p, self.generator = p, init.check_generator("Dropout", generator)

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        return _dropout(x, self.p, init.next_seed(self))

    def extra_repr(self):
        return f"p={self.p}"
