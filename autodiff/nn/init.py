"""Parameter initialization, as ``torch.nn.init``, from a seeded generator.

The standard has no random numbers, so values are drawn on the host by a NumPy
``Generator`` and copied to the tensor's device once. ``manual_seed(s)`` makes
every later module creation (and ``nn.Dropout``) reproducible; each function
also takes its own ``generator=``.

Each ``*_`` function fills a tensor in place (under ``no_grad``) and returns it.
"""

from __future__ import annotations

import math

from ..graph import no_grad

__all__ = [
    "manual_seed",
    "default_generator",
    "calculate_gain",
    "uniform_",
    "normal_",
    "zeros_",
    "ones_",
    "constant_",
    "kaiming_uniform_",
    "xavier_uniform_",
    "xavier_normal_",
]

_generator = None


def manual_seed(seed):
    """Seed the generator that initializes modules and draws dropout masks."""
    import numpy as np

    global _generator
    _generator = np.random.default_rng(seed)
    return _generator


def default_generator():
    """The generator used when none is given (seeded from the OS until ``manual_seed``)."""
    global _generator
    if _generator is None:
        import numpy as np

        _generator = np.random.default_rng()
    return _generator


def _fill(tensor, host):
    """Write host values into ``tensor``'s buffer, on its device and in its dtype."""
    xp = tensor.__array_namespace__()
    with no_grad():
        tensor[...] = xp.asarray(host, dtype=tensor.dtype, device=tensor.device)
    return tensor


def _fans(tensor):
    """(fan_in, fan_out) of a weight laid out as torch's: (out, in, *kernel)."""
    if tensor.ndim < 2:
        raise ValueError(
            f"init: fan in and fan out need at least 2 dimensions, got shape {tensor.shape}"
        )
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (torch's table)."""
    if nonlinearity in ("linear", "conv2d", "sigmoid", "conv_transpose2d"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unknown nonlinearity {nonlinearity!r}")


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with values drawn from U(a, b)."""
    gen = generator or default_generator()
    return _fill(tensor, gen.uniform(a, b, size=tensor.shape))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with values drawn from N(mean, std^2)."""
    gen = generator or default_generator()
    return _fill(tensor, gen.normal(mean, std, size=tensor.shape))


def constant_(tensor, value):
    """Fill with ``value``."""
    xp = tensor.__array_namespace__()
    with no_grad():
        tensor[...] = xp.full(tensor.shape, value, dtype=tensor.dtype, device=tensor.device)
    return tensor


def zeros_(tensor):
    """Fill with zeros."""
    return constant_(tensor, 0.0)


def ones_(tensor):
    """Fill with ones."""
    return constant_(tensor, 1.0)


def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He initialization: U(-b, b) with b = gain * sqrt(3 / fan).

    Torch's default for Linear and Conv2d weights is ``a=sqrt(5)``: b = 1/sqrt(fan_in).
    """
    fan_in, fan_out = _fans(tensor)
    fan = fan_in if mode == "fan_in" else fan_out
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan)
    return uniform_(tensor, -bound, bound, generator)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot initialization: U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _fans(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot initialization: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)
