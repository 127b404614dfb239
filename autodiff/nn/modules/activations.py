"""Activation modules, as torch.nn (a reduction axis is ``axis``, as everywhere here);
each calls its op of ``autodiff.nn.functional.activations``."""

from __future__ import annotations

from ... import checks
from ...engine.namespace import recorder_of
from ..functional import activations as A
from ..functional.activations import _check_softplus
from .module import Module

__all__ = [
    "ReLU",
    "GELU",
    "SiLU",
    "Sigmoid",
    "Tanh",
    "Softplus",
    "Softmax",
    "LogSoftmax",
    "LeakyReLU",
    "ELU",
    "Mish",
    "Hardswish",
    "GLU",
    "Softmin",
]


class ReLU(Module):
    """max(x, 0)."""

    def forward(self, x):
        return recorder_of(x).xp.nn.relu(x)


class GELU(Module):
    """x * Phi(x) (``approximate="tanh"`` for the tanh form)."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = checks.choice("GELU", "approximate", approximate, ("none", "tanh"))

    def forward(self, x):
        return recorder_of(x).xp.nn.gelu(x, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """x * sigmoid(x)."""

    def forward(self, x):
        return recorder_of(x).xp.nn.silu(x)


class Sigmoid(Module):
    """1 / (1 + exp(-x))."""

    def forward(self, x):
        return recorder_of(x).xp.nn.sigmoid(x)


class Tanh(Module):
    """tanh(x)."""

    def forward(self, x):
        return x.__array_namespace__().tanh(x)


class Softplus(Module):
    """log(1 + exp(beta x)) / beta (linear above ``threshold``)."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        _check_softplus("Softplus", beta, threshold)
        self.beta, self.threshold = beta, threshold

    def forward(self, x):
        return recorder_of(x).xp.nn.softplus(x, beta=self.beta, threshold=self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Softmax(Module):
    """softmax along ``axis``."""

    def __init__(self, axis=-1):
        super().__init__()
        self.axis = None if axis is None else int(checks.integer(type(self).__name__, "axis", axis))

    def forward(self, x):
        return recorder_of(x).xp.nn.softmax(x, axis=self.axis)

    def extra_repr(self):
        return f"axis={self.axis}"


class LogSoftmax(Softmax):
    """log_softmax along ``axis``."""

    def forward(self, x):
        return recorder_of(x).xp.nn.log_softmax(x, axis=self.axis)


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
