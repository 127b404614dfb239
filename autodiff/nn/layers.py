"""Layers as in ``torch.nn``: same constructor arguments, parameter names, shapes
and default initialization, so a torch state dict loads one to one.

Every layer with parameters is created on a namespace: ``xp=`` (raw or
differentiable, default ``Autodiff(numpy)``), ``dtype=`` (default float32),
``device=``, and ``generator=`` (a NumPy Generator; default: the one seeded by
``autodiff.nn.init.manual_seed``).
"""

from __future__ import annotations

import math

from .. import checks
from ..engine.namespace import recorder_of
from . import init
from .activations import _check_softplus
from .conv import _conv2d_call, _conv_args, _conv_transpose2d_call, _conv_transpose_args
from .linear import linear
from .module import Module, _dtype_in, default_namespace
from .normalization import _dropout, _embedding_checked, _layer_norm_checked
from .pooling import _avg_pool2d, _max_pool2d, _pool_args

__all__ = [
    "Identity",
    "Linear",
    "Conv2d",
    "ConvTranspose2d",
    "MaxPool2d",
    "AvgPool2d",
    "Flatten",
    "ReLU",
    "GELU",
    "SiLU",
    "Sigmoid",
    "Tanh",
    "Softplus",
    "Softmax",
    "LogSoftmax",
    "Embedding",
    "LayerNorm",
    "Dropout",
]


def factory(xp, dtype, device, owner="Module", generator=None):
    """(namespace, dtype, device) a layer creates its parameters with; ``xp``, ``dtype``
    and ``generator`` checked, errors naming ``owner``."""
    xp = default_namespace(xp, owner)
    init.check_generator(owner, generator)
    return xp, (xp.float32 if dtype is None else _dtype_in(xp, dtype, owner)), device


def sizes(name, positive=(), **counts):
    """Check a layer's sizes once, at construction: each an int (a TypeError otherwise)
    >= 0, those named in ``positive`` >= 1 (a ValueError otherwise), naming the layer and
    the argument."""
    for what, v in counts.items():
        checks.integer(name, what, v, low=1 if what in positive else 0)


def flags(name, **values):
    """Check a layer's bool options once, at construction (a TypeError naming the layer
    and the argument)."""
    for what, v in values.items():
        checks.flag(name, what, v)


def parameter(xp, shape, dtype, device):
    """A zero leaf that requires grad, to be filled by an ``init`` function."""
    return xp.zeros(shape, dtype=dtype, device=device, requires_grad=True)


def uniform_parameter(xp, shape, bound, dtype, device, generator):
    """A parameter drawn from U(-bound, bound) (torch's default for most layers)."""
    return init.uniform_(parameter(xp, shape, dtype, device), -bound, bound, generator)


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


class _ConvNd(Module):
    def _setup(self, in_channels, out_channels, kernel_size, groups, bias, wshape, fan_in,
               xp, dtype, device, generator):  # fmt: skip
        name = type(self).__name__
        flags(name, bias=bias)
        if in_channels % groups or out_channels % groups:
            raise ValueError(
                f"{name}: groups={groups} must divide in_channels={in_channels} and "
                f"out_channels={out_channels}"
            )
        xp, dtype, device = factory(xp, dtype, device, name, generator)
        bound = 1.0 / math.sqrt(fan_in)
        self.weight = uniform_parameter(xp, wshape, bound, dtype, device, generator)
        self.bias = (
            uniform_parameter(xp, (out_channels,), bound, dtype, device, generator)
            if bias
            else None
        )

    def extra_repr(self):
        s = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        zeros, ones = (0,) * len(self.kernel_size), (1,) * len(self.kernel_size)
        if self.padding not in (zeros, "valid"):
            s += f", padding={self.padding}"
        if getattr(self, "output_padding", zeros) != zeros:
            s += f", output_padding={self.output_padding}"
        if self.dilation != ones:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class Conv2d(_ConvNd):
    """2-D convolution over (N, C, H, W); weight (out, in/groups, kh, kw), as torch."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, *, xp=None, dtype=None, device=None,
                 generator=None):  # fmt: skip
        super().__init__()
        name = "Conv2d"
        sizes(name, in_channels=in_channels, out_channels=out_channels)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding, self.dilation, self.groups = _conv_args(
            name, kernel_size, stride, padding, dilation, groups
        )
        kh, kw = self.kernel_size
        wshape = (out_channels, in_channels // groups, kh, kw)
        fan_in = in_channels // groups * kh * kw
        self._setup(in_channels, out_channels, self.kernel_size, groups, bias, wshape, fan_in,
                    xp, dtype, device, generator)  # fmt: skip

    def forward(self, x):
        return _conv2d_call("conv2d", x, self.weight, self.bias, self.stride, self.padding,
                       self.dilation, self.groups)  # fmt: skip


class ConvTranspose2d(_ConvNd):
    """Transposed 2-D convolution; weight (in, out/groups, kh, kw), as torch."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, *, xp=None, dtype=None,
                 device=None, generator=None):  # fmt: skip
        super().__init__()
        name = "ConvTranspose2d"
        sizes(name, in_channels=in_channels, out_channels=out_channels)
        self.in_channels, self.out_channels = in_channels, out_channels
        (self.kernel_size, self.stride, self.padding, self.output_padding, self.groups,
         self.dilation) = _conv_transpose_args(name, kernel_size, stride, padding, output_padding,
                                               groups, dilation)  # fmt: skip
        kh, kw = self.kernel_size
        wshape = (in_channels, out_channels // groups, kh, kw)
        # torch computes the fan from weight.shape[1]: out/groups * kh * kw
        fan_in = out_channels // groups * kh * kw
        self._setup(in_channels, out_channels, self.kernel_size, groups, bias, wshape, fan_in,
                    xp, dtype, device, generator)  # fmt: skip

    def forward(self, x):
        return _conv_transpose2d_call("conv_transpose2d", x, self.weight, self.bias, self.stride,
                                      self.padding, self.output_padding, self.groups,
                                      self.dilation)  # fmt: skip


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


class Embedding(Module):
    """A lookup table: row ``i`` of ``weight`` (num_embeddings, embedding_dim) for index i.

    Initialized from N(0, 1), with the ``padding_idx`` row zero (and never trained).
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, *, xp=None,
                 dtype=None, device=None, generator=None):  # fmt: skip
        super().__init__()
        sizes("Embedding", num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        xp, dtype, device = factory(xp, dtype, device, "Embedding", generator)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None:
            checks.integer("Embedding", "padding_idx", padding_idx, -num_embeddings,
                           num_embeddings - 1)  # fmt: skip
            padding_idx = int(padding_idx) % num_embeddings
        self.padding_idx = padding_idx
        w = init.normal_(parameter(xp, (num_embeddings, embedding_dim), dtype, device),
                         generator=generator)  # fmt: skip
        if padding_idx is not None:
            from ..engine.grad_mode import no_grad

            with no_grad():
                w[padding_idx, ...] = 0.0
        self.weight = w

    def forward(self, indices):
        return _embedding_checked(indices, self.weight, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s if self.padding_idx is None else s + f", padding_idx={self.padding_idx}"


class LayerNorm(Module):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axes."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, *,
                 xp=None, dtype=None, device=None):  # fmt: skip
        super().__init__()
        name = "LayerNorm"
        normalized_shape = tuple(
            int(n) for n in checks.integers(name, "normalized_shape", normalized_shape, low=0)
        )
        if not normalized_shape:
            raise ValueError(f"{name}: normalized_shape must hold at least one size, got ()")
        checks.number(name, "eps", eps, low=0)
        flags(name, elementwise_affine=elementwise_affine, bias=bias)
        xp, dtype, device = factory(xp, dtype, device, name)
        self.normalized_shape, self.eps = normalized_shape, float(eps)
        self.elementwise_affine = elementwise_affine
        shape = self.normalized_shape
        self.weight = (
            xp.ones(shape, dtype=dtype, device=device, requires_grad=True)
            if elementwise_affine
            else None
        )
        self.bias = (
            xp.zeros(shape, dtype=dtype, device=device, requires_grad=True)
            if elementwise_affine and bias
            else None
        )

    def forward(self, x):
        return _layer_norm_checked(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )


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
        gen = self.generator or init.default_generator()
        return _dropout(x, self.p, int(gen.integers(2**63 - 1)))

    def extra_repr(self):
        return f"p={self.p}"
