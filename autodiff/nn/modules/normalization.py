"""Normalization layers as in ``torch.nn``: ``LayerNorm``, ``BatchNorm1d``,
``BatchNorm2d``, ``InstanceNorm2d``, ``GroupNorm`` and ``RMSNorm``, with torch's
constructor arguments, parameter and buffer names (``weight``, ``bias``,
``running_mean``, ``running_var``, ``num_batches_tracked``) and train/eval behaviour,
so a torch state dict loads one to one. Created on a namespace as the other layers
(``xp=``, ``dtype=``, ``device=``)."""

from __future__ import annotations

from ... import checks, lazy
from ...engine.grad_mode import no_grad
from ..functional.normalization import (
    _batch_norm_checked,
    _check_channels,
    _group_norm_checked,
    _layer_norm_checked,
    _rms_norm_checked,
    _update_running,
)
from .module import Module, factory, flags, sizes

__all__ = ["LayerNorm", "BatchNorm1d", "BatchNorm2d", "InstanceNorm2d", "GroupNorm", "RMSNorm"]


def _momentum(name, momentum):
    if momentum is not None:
        momentum = float(checks.number(name, "momentum", momentum, 0.0, 1.0))
    return momentum


class _NormBase(Module):
    """Per-channel weight and bias (``affine``) and running statistics
    (``track_running_stats``), as torch's ``_NormBase``."""

    _affine_default = True
    _track_default = True

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=None,
                 track_running_stats=None, *, xp=None, dtype=None, device=None):  # fmt: skip
        super().__init__()
        name = type(self).__name__
        affine = self._affine_default if affine is None else affine
        track = self._track_default if track_running_stats is None else track_running_stats
        sizes(name, positive=("num_features",), num_features=num_features)
        checks.number(name, "eps", eps, low=0)
        flags(name, affine=affine, track_running_stats=track)
        xp, dtype, device = factory(xp, dtype, device, name)
        self.num_features, self.eps = int(num_features), float(eps)
        self.momentum = _momentum(name, momentum)
        self.affine, self.track_running_stats = bool(affine), bool(track)
        c = (self.num_features,)
        if self.affine:
            self.weight = xp.ones(c, dtype=dtype, device=device, requires_grad=True)
            self.bias = xp.zeros(c, dtype=dtype, device=device, requires_grad=True)
        else:
            self.weight = self.bias = None
        if self.track_running_stats:
            self.register_buffer("running_mean", xp.zeros(c, dtype=dtype, device=device))
            self.register_buffer("running_var", xp.ones(c, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", xp.zeros((), dtype=xp.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self):
        if self.track_running_stats:
            with no_grad():
                self.running_mean[...] = 0.0
                self.running_var[...] = 1.0
                self.num_batches_tracked[...] = 0

    def _check_input(self, x):
        name = type(self).__name__
        if x.ndim not in self._ndims:
            shown = " or ".join(f"{n}-D" for n in self._ndims)
            raise ValueError(f"{name}: expected {shown} input, got shape {tuple(x.shape)}")
        if x.shape[1 if x.ndim > min(self._ndims) or len(self._ndims) == 1 else 0] != (
            self.num_features
        ) and (self.affine or self.track_running_stats):
            raise ValueError(
                f"{name}: expected {self.num_features} channels, got input of shape "
                f"{tuple(x.shape)}"
            )

    def extra_repr(self):
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, track_running_stats={self.track_running_stats}"
        )


class _BatchNorm(_NormBase):
    """Normalize per channel with the batch's statistics while training (updating the
    running ones), with the running ones in eval mode (as torch)."""

    def _check_input(self, x):
        name = type(self).__name__
        if x.ndim not in self._ndims:
            shown = " or ".join(f"{n}-D" for n in self._ndims)
            raise ValueError(f"{name}: expected {shown} input, got shape {tuple(x.shape)}")
        if x.shape[1] != self.num_features:
            raise ValueError(
                f"{name}: expected {self.num_features} channels (axis 1), got input of shape "
                f"{tuple(x.shape)}"
            )

    def forward(self, x):
        self._check_input(x)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with no_grad():
                self.num_batches_tracked[...] = self.num_batches_tracked + 1
                if self.num_batches_tracked._rec.backend.lazy:
                    lazy.written(self.num_batches_tracked)
            if self.momentum is None:  # cumulative average (reads the count on the host)
                factor = 1.0 / float(self.num_batches_tracked)
        training = self.training or self.running_mean is None
        use_running = not self.training or self.track_running_stats
        return _batch_norm_checked(
            x,
            self.running_mean if use_running else None,
            self.running_var if use_running else None,
            self.weight,
            self.bias,
            training,
            factor,
            self.eps,
            type(self).__name__,
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L) inputs, as ``torch.nn.BatchNorm1d``."""

    _ndims = (2, 3)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, *, xp=None, dtype=None, device=None):  # fmt: skip
        super().__init__(num_features, eps, momentum, affine, track_running_stats,
                         xp=xp, dtype=dtype, device=device)  # fmt: skip


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W) inputs, as ``torch.nn.BatchNorm2d``."""

    _ndims = (4,)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, *, xp=None, dtype=None, device=None):  # fmt: skip
        super().__init__(num_features, eps, momentum, affine, track_running_stats,
                         xp=xp, dtype=dtype, device=device)  # fmt: skip


class InstanceNorm2d(_NormBase):
    """Normalize each (example, channel) of an (N, C, H, W) or (C, H, W) input over its
    spatial axes, as ``torch.nn.InstanceNorm2d`` (``affine`` and ``track_running_stats``
    False by default; with running statistics, eval mode uses them)."""

    _ndims = (3, 4)
    _affine_default = False
    _track_default = False

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, *, xp=None, dtype=None, device=None):  # fmt: skip
        super().__init__(num_features, eps, momentum, affine, track_running_stats,
                         xp=xp, dtype=dtype, device=device)  # fmt: skip

    def forward(self, x):
        name = type(self).__name__
        self._check_input(x)
        unbatched = x.ndim == 3
        if unbatched:
            x = x.__array_namespace__().expand_dims(x, axis=0)
        c = _check_channels(name, x, weight=self.weight, bias=self.bias,
                            running_mean=self.running_mean)  # fmt: skip
        if self.training or not self.track_running_stats:
            if x.shape[2] * x.shape[3] <= 1 and self.training:
                raise ValueError(
                    f"{name}: expected more than 1 spatial element when training, got input "
                    f"of shape {tuple(x.shape)}"
                )
            if self.training and self.track_running_stats:
                momentum = 0.0 if self.momentum is None else self.momentum
                from ...engine.namespace import recorder_of

                _update_running(recorder_of(x), x, self.running_mean, self.running_var,
                                momentum, instance=True)  # fmt: skip
            y = _group_norm_checked(x, c, self.weight, self.bias, self.eps, name)
        else:
            y = _batch_norm_checked(x, self.running_mean, self.running_var, self.weight,
                                    self.bias, False, 0.0, self.eps, name)  # fmt: skip
        return y[0, ...] if unbatched else y


class GroupNorm(Module):
    """Normalize over groups of channels per example, as ``torch.nn.GroupNorm``."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, *,
                 xp=None, dtype=None, device=None):  # fmt: skip
        super().__init__()
        name = "GroupNorm"
        sizes(name, positive=("num_groups", "num_channels"), num_groups=num_groups,
              num_channels=num_channels)  # fmt: skip
        if num_channels % num_groups:
            raise ValueError(
                f"{name}: num_channels ({num_channels}) must be divisible by num_groups "
                f"({num_groups})"
            )
        checks.number(name, "eps", eps, low=0)
        flags(name, affine=affine)
        xp, dtype, device = factory(xp, dtype, device, name)
        self.num_groups, self.num_channels = int(num_groups), int(num_channels)
        self.eps, self.affine = float(eps), bool(affine)
        c = (self.num_channels,)
        if self.affine:
            self.weight = xp.ones(c, dtype=dtype, device=device, requires_grad=True)
            self.bias = xp.zeros(c, dtype=dtype, device=device, requires_grad=True)
        else:
            self.weight = self.bias = None

    def forward(self, x):
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ValueError(
                f"GroupNorm: expected input (N, {self.num_channels}, *), got shape {tuple(x.shape)}"
            )
        return _group_norm_checked(x, self.num_groups, self.weight, self.bias, self.eps,
                                   "GroupNorm")  # fmt: skip

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class RMSNorm(Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last axes, as ``torch.nn.RMSNorm``
    (``eps`` None: the machine epsilon of the input's dtype)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, *,
                 xp=None, dtype=None, device=None):  # fmt: skip
        super().__init__()
        name = "RMSNorm"
        shape = tuple(
            int(n) for n in checks.integers(name, "normalized_shape", normalized_shape, low=0)
        )
        if not shape:
            raise ValueError(f"{name}: normalized_shape must hold at least one size, got ()")
        if eps is not None:
            eps = float(checks.number(name, "eps", eps, low=0))
        flags(name, elementwise_affine=elementwise_affine)
        xp, dtype, device = factory(xp, dtype, device, name)
        self.normalized_shape, self.eps = shape, eps
        self.elementwise_affine = bool(elementwise_affine)
        self.weight = (
            xp.ones(shape, dtype=dtype, device=device, requires_grad=True)
            if elementwise_affine
            else None
        )

    def forward(self, x):
        return _rms_norm_checked(x, self.normalized_shape, self.weight, self.eps, "RMSNorm")

    def extra_repr(self):
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )


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
