"""Activation functions: one registered op each, with its own fused VJP rule.

Forwards are written with the standard's functions on the backend ``B``; rules
with the namespace they are given (raw backend, or the differentiable one
under ``create_graph``), so both run on every backend.
"""

from __future__ import annotations

from ..registry import defop
from ._dispatch import ops_of

__all__ = ["relu"]

CH = "nn.activation"


def _relu(B):
    return lambda x: B.where(x > 0, x, B.zeros_like(x))


defop(
    "nn.relu",
    lambda xp, g, ans, x: xp.where(ans > 0, g, xp.zeros_like(g)),  # relu'(0) = 0
    chapter=CH,
    impl=_relu,
    saves=(),
    saves_ans=True,
    twice=False,
    doc="max(x, 0); the gradient at 0 is 0",
)


def relu(x):
    """max(x, 0) elementwise; relu'(0) = 0."""
    return ops_of(x).nn.relu(x)
