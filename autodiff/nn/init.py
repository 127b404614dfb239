"""Parameter initialization, as ``torch.nn.init``, from a seeded generator.

The standard has no random numbers, so values are drawn on the host by a NumPy
``Generator`` and copied to the tensor's device once. ``manual_seed(s)`` makes
every later module creation (and ``nn.Dropout``) reproducible; each function
also takes its own ``generator=``.

Each ``*_`` function fills a tensor in place (under ``no_grad``) and returns it.
"""

from __future__ import annotations

import math

from .. import checks
from ..backends import device_of
from ..engine import tracing
from ..engine.grad_mode import no_grad

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
    _generator = np.random.default_rng(checks.integer("manual_seed", "seed", seed, low=0))
    return _generator


def default_generator():
    """The generator used when none is given (seeded from the OS until ``manual_seed``)."""
    global _generator
    if _generator is None:
        import numpy as np

        _generator = np.random.default_rng()
    return _generator


def next_seed(owner, attribute="generator"):
    """A seed for a mask of the module ``owner``, from its generator (its ``attribute``)
    or the default one. Under ``ad.jit`` each replay draws it again, from the generator
    the module has then.

    >>> import autodiff.nn as nn
    >>> _ = nn.init.manual_seed(0)
    >>> a = nn.init.next_seed(nn.Dropout())
    >>> _ = nn.init.manual_seed(0)
    >>> a == nn.init.next_seed(nn.Dropout())
    True
    """

    def draw():
        gen = getattr(owner, attribute) or default_generator()
        return int(gen.integers(2**63 - 1))

    return tracing.seed(draw)


def check_generator(owner, generator):
    """``generator`` if it is None or a NumPy ``Generator`` (a TypeError naming ``owner``
    otherwise)."""
    if generator is not None:
        import numpy as np

        if not isinstance(generator, np.random.Generator):
            raise TypeError(
                f"{owner}: generator must be a numpy.random.Generator or None, got "
                f"{type(generator).__name__}"
            )
    return generator


def _gen(owner, generator):
    return check_generator(owner, generator) or default_generator()


def _shape(owner, tensor):
    shape = getattr(tensor, "shape", None)
    if shape is None or not hasattr(tensor, "__array_namespace__"):
        raise TypeError(
            f"{owner}: tensor must be an array or a Tensor, got {type(tensor).__name__}"
        )
    return tuple(shape)


def _fill(tensor, host):
    """Write host values into ``tensor``'s buffer, on its device and in its dtype."""
    xp = tensor.__array_namespace__()
    with no_grad():
        tensor[...] = xp.asarray(host, dtype=tensor.dtype, device=device_of(tensor))
    return tensor


def _fans(owner, tensor):
    """(fan_in, fan_out) of a weight laid out as torch's: (out, in, *kernel)."""
    if len(_shape(owner, tensor)) < 2:
        raise ValueError(
            f"{owner}: fan in and fan out need a tensor of at least 2 dimensions, got shape "
            f"{tuple(tensor.shape)}"
        )
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


_NONLINEARITIES = (
    "linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "sigmoid", "tanh", "relu", "leaky_relu", "selu",
)  # fmt: skip


def calculate_gain(nonlinearity, param=None, *, _owner="calculate_gain"):
    """The recommended gain for a nonlinearity (torch's table)."""
    checks.choice(_owner, "nonlinearity", nonlinearity, _NONLINEARITIES)
    if nonlinearity in ("linear", "sigmoid") or nonlinearity.startswith("conv"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else checks.number(_owner, "param", param)
        return math.sqrt(2.0 / (1 + slope**2))
    return 3.0 / 4  # selu


def _uniform(owner, tensor, a, b, generator):
    shape = _shape(owner, tensor)
    gen = _gen(owner, generator)
    return _fill(tensor, gen.uniform(a, b, size=shape))


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with values drawn from U(a, b), a <= b."""
    checks.number("uniform_", "a", a)
    checks.number("uniform_", "b", b, low=a)
    return _uniform("uniform_", tensor, a, b, generator)


def _normal(owner, tensor, mean, std, generator):
    shape = _shape(owner, tensor)
    gen = _gen(owner, generator)
    return _fill(tensor, gen.normal(mean, std, size=shape))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with values drawn from N(mean, std^2), std >= 0."""
    checks.number("normal_", "mean", mean)
    checks.number("normal_", "std", std, low=0)
    return _normal("normal_", tensor, mean, std, generator)


def constant_(tensor, value):
    """Fill with ``value`` (a number or a bool)."""
    if not isinstance(value, bool):
        checks.number("constant_", "value", value)
    _shape("constant_", tensor)
    xp = tensor.__array_namespace__()
    with no_grad():
        tensor[...] = xp.full(tensor.shape, value, dtype=tensor.dtype, device=device_of(tensor))
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
    name = "kaiming_uniform_"
    checks.number(name, "a", a)
    checks.choice(name, "mode", mode, ("fan_in", "fan_out"))
    gain = calculate_gain(nonlinearity, a, _owner=name)
    fan_in, fan_out = _fans(name, tensor)
    fan = fan_in if mode == "fan_in" else fan_out
    if fan == 0:  # nothing to fill (as torch)
        check_generator(name, generator)
        return tensor
    bound = gain * math.sqrt(3.0 / fan)
    return _uniform(name, tensor, -bound, bound, generator)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot initialization: U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out))."""
    name = "xavier_uniform_"
    checks.number(name, "gain", gain, low=0)
    fan_in, fan_out = _fans(name, tensor)
    bound = gain * math.sqrt(6.0 / max(fan_in + fan_out, 1))
    return _uniform(name, tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot initialization: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    name = "xavier_normal_"
    checks.number(name, "gain", gain, low=0)
    fan_in, fan_out = _fans(name, tensor)
    return _normal(name, tensor, 0.0, gain * math.sqrt(2.0 / max(fan_in + fan_out, 1)), generator)
