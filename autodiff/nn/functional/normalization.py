"""Layer, batch, group and RMS normalization: one registered op each."""

from __future__ import annotations

import math

from ... import checks, lazy
from ...engine.grad_mode import no_grad
from ...engine.namespace import recorder_of
from ...engine.registry import defop
from ...engine.tensor import Tensor
from ...rules.batch_rules import fold, unfold
from .linear import leading_sum, trailing_mean

__all__ = ["layer_norm", "batch_norm", "group_norm", "rms_norm"]

CH = "nn.normalization"


# -- layer norm ---------------------------------------------------------------------
def _moments(xp, x, k, eps):
    """(mean, 1 / sqrt(var + eps)) over the last ``k`` axes, kept (biased variance)."""
    mu = trailing_mean(xp, x, k)
    centered = x - mu
    return mu, 1 / xp.sqrt(trailing_mean(xp, centered * centered, k) + eps)


def _normalized(xp, x, k, eps):
    """(x - mean) / sqrt(var + eps) over the last ``k`` axes, 1 / sqrt(var + eps), axes."""
    mu, rstd = _moments(xp, x, k, eps)
    return (x - mu) * rstd, rstd, tuple(range(x.ndim - k, x.ndim))


def _layer_norm(xp, x, weight, bias, k, eps):
    """The output and, as the rule's residuals, (mean, rstd) per row."""
    mu, rstd = _moments(xp, x, k, eps)
    y = (x - mu) * rstd
    if weight is not None:
        y = y * weight
    return (y if bias is None else y + bias), (mu, rstd)


def _layer_norm_residuals(xp, x, weight, bias, *, k, eps):
    return _moments(xp, x, k, eps)


def _layer_norm_rule(xp, g, res, x, weight, bias, *, k, eps, needs):
    """dx = rstd (gh - mean(gh) - xhat mean(gh xhat)), gh = g w; dw = sum(g xhat) and
    db = sum(g) over the leading axes."""
    mu, rstd = res
    xhat = (x - mu) * rstd
    gx = gw = gb = None
    if needs[0]:
        gh = g if weight is None else g * weight
        mean_g = trailing_mean(xp, gh, k)
        gx = rstd * (gh - mean_g - xhat * trailing_mean(xp, gh * xhat, k))
    if needs[1] and weight is not None:
        gw = leading_sum(xp, g * xhat, k)
    if needs[2] and bias is not None:
        gb = leading_sum(xp, g, k)
    return gx, gw, gb


def _layer_norm_batch(c, x, w, b, *, k, eps):
    """The batch axis is one more leading axis; per-example weights applied after."""
    bx, bw, bb = c.bd
    x = c.lift(x, bx)
    if not bw and not bb:
        return c.f(x, w, b, k=k, eps=eps)
    y = c.f(x, None, None, k=k, eps=eps)
    r = x.ndim - 1
    if w is not None:
        y = y * (c.pad(w, r) if bw else w)
    if b is not None:
        y = y + (c.pad(b, r) if bb else b)
    return y


defop(
    "nn.layer_norm",
    vjp=_layer_norm_rule,
    needs=True,
    chapter=CH,
    impl=lambda B: lambda x, w, b, *, k, eps: _layer_norm(B, x, w, b, k, eps),
    lean=lambda B: lambda x, w, b, *, k, eps: _layer_norm(B, x, w, b, k, eps)[0],
    residuals=_layer_norm_residuals,
    saves=(0, 1),
    batch=_layer_norm_batch,
    doc="(x - mean) / sqrt(var + eps) * weight + bias over the trailing axes",
)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the trailing ``normalized_shape`` axes (biased variance, as
    torch), then scale by ``weight`` and shift by ``bias`` (both of that shape); ``eps``
    >= 0."""
    recorder_of(input, weight, bias)  # a non-array named first
    shape = checks.integers("layer_norm", "normalized_shape", normalized_shape, low=0)
    shape = tuple(int(n) for n in shape)
    checks.number("layer_norm", "eps", eps, low=0)
    return _layer_norm_checked(input, shape, weight, bias, float(eps))


def _layer_norm_checked(input, shape, weight, bias, eps):
    """``layer_norm`` of checked arguments (a tuple of ints, a float): the shapes are
    checked here."""
    k = len(shape)
    if k == 0 or tuple(input.shape[input.ndim - k :]) != shape:
        raise ValueError(
            f"layer_norm: normalized_shape {shape} doesn't match the trailing axes of the "
            f"input, shape {tuple(input.shape)}"
        )
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != shape:
            raise ValueError(f"layer_norm: {name} has shape {tuple(p.shape)}, expected {shape}")
    return recorder_of(input, weight, bias).xp.nn.layer_norm(input, weight, bias, k=k, eps=eps)


# -- batch norm, group norm, rms norm ---------------------------------------------------
def _channel(xp, p, ndim):
    """A per-channel (C,) array shaped (1, C, 1, ...) against an (N, C, *) input."""
    return xp.reshape(p, (1, p.shape[0]) + (1,) * (ndim - 2))


def _channel_sum(xp, a):
    """The sum of an (N, C, *) array over every axis but the channel one, as (C,).

    Over the batch axis first, then over the flattened rest: NumPy's reduction over
    the axes (0, 2, 3) at once is 2-3x slower than these two."""
    n, c = a.shape[0], a.shape[1]
    return xp.sum(xp.sum(xp.reshape(a, (n, c, -1)), axis=0), axis=-1)


def _count(x):
    """The number of values per channel of an (N, C, *) array."""
    return math.prod(x.shape) // max(x.shape[1], 1)


def _batch_stats(xp, x, mean, var, training, eps):
    """(mean, 1 / sqrt(var + eps)), each (1, C, 1, ...): the batch's statistics (biased
    variance) over every axis but the channel one when ``training``, else the given ones."""
    if training:
        n = _count(x)
        mu = _channel(xp, _channel_sum(xp, x) / n, x.ndim)
        centered = x - mu
        v = _channel(xp, _channel_sum(xp, centered * centered) / n, x.ndim)
    else:
        mu, v = _channel(xp, mean, x.ndim), _channel(xp, var, x.ndim)
    return mu, 1 / xp.sqrt(v + eps)


def _affine(xp, y, weight, bias):
    if weight is not None:
        y = y * _channel(xp, weight, y.ndim)
    return y if bias is None else y + _channel(xp, bias, y.ndim)


def _batch_norm(xp, x, weight, bias, mean, var, training, eps):
    """The output and, as the rule's residuals, (mean, rstd): the rule rebuilds x-hat
    from them in two passes instead of recomputing the statistics (four more)."""
    mu, rstd = _batch_stats(xp, x, mean, var, training, eps)
    scale = rstd if weight is None else rstd * _channel(xp, weight, x.ndim)
    y = (x - mu) * scale
    if bias is not None:
        y = y + _channel(xp, bias, x.ndim)
    return y, (mu, rstd)


def _batch_norm_residuals(xp, x, weight, bias, mean, var, *, training, eps):
    return _batch_stats(xp, x, mean, var, training, eps)


def _batch_norm_rule(xp, g, res, x, weight, bias, mean, var, *, training, eps, needs):
    """Training: dx = rstd w (g - mean(g) - xhat mean(g xhat)) over the batch axes;
    eval: dx = rstd w g, d mean = -sum(rstd w g), d var = -sum(w g (x - mu)) rstd^3 / 2.
    dw = sum(g xhat), db = sum(g) per channel."""
    mu, rstd = res
    xhat = (x - mu) * rstd
    scale = rstd if weight is None else rstd * _channel(xp, weight, x.ndim)
    gx = gm = gv = gw = gb = None
    sum_g = _channel_sum(xp, g) if needs[0] and training or needs[2] or needs[3] else None
    want_gx = needs[1] or needs[4] or needs[0] and training
    sum_gx = _channel_sum(xp, g * xhat) if want_gx else None
    if training:
        if needs[0]:
            n = _count(x)
            mean_g = _channel(xp, sum_g / n, x.ndim)
            gx = scale * (g - mean_g - xhat * _channel(xp, sum_gx / n, x.ndim))
    else:
        gx = g * scale if needs[0] else None
        s = xp.reshape(scale, (-1,))
        if needs[3]:
            gm = -s * sum_g
        if needs[4]:
            gv = -0.5 * xp.reshape(rstd, (-1,)) * s * sum_gx
    if needs[1] and weight is not None:
        gw = sum_gx
    if needs[2] and bias is not None:
        gb = sum_g
    return gx, gw, gb, gm, gv


def _per_channel_flat(c, a, batched):
    """A per-channel (C,) argument, or (n, C) per example, as (n * C,)."""
    if a is None:
        return None
    if not batched:
        a = c.xp.broadcast_to(a, (c.n,) + tuple(a.shape))
    return c.xp.reshape(a, (-1,))


def _batch_norm_batch(c, x, w, b, m, v, *, training, eps):
    """The batch moved into the channels: (n, N, C, *) -> (N, n * C, *), so each
    example's channels get their own statistics (and running stats, weights)."""
    xp, n = c.xp, c.n
    x = c.lift(x, c.bd[0])
    shape = tuple(x.shape)
    xc = xp.reshape(xp.moveaxis(x, 0, 1), (shape[1], n * shape[2]) + shape[3:])
    args = [_per_channel_flat(c, a, bd) for a, bd in zip((w, b, m, v), c.bd[1:])]
    y = c.f(xc, *args, training=training, eps=eps)
    return xp.moveaxis(xp.reshape(y, (shape[1], n) + shape[2:]), 1, 0)


defop(
    "nn.batch_norm",
    vjp=_batch_norm_rule,
    needs=True,
    chapter=CH,
    impl=lambda B: (
        lambda x, w, b, m, v, *, training, eps: _batch_norm(B, x, w, b, m, v, training, eps)
    ),
    lean=lambda B: (
        lambda x, w, b, m, v, *, training, eps: _batch_norm(B, x, w, b, m, v, training, eps)[0]
    ),
    residuals=_batch_norm_residuals,
    saves=(0, 1, 3, 4),
    batch=_batch_norm_batch,
    doc="(x - mean) / sqrt(var + eps) * weight + bias per channel (axis 1): the batch's "
    "statistics when training, else the given running ones",
)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):  # fmt: skip
    """Normalize an (N, C, *) input per channel (axis 1), then scale by ``weight`` and
    shift by ``bias`` (each (C,)), as torch. When ``training`` the batch's statistics
    normalize (biased variance) and the running ones, where given, are updated in place:
    ``running = (1 - momentum) * running + momentum * batch`` (the unbiased variance);
    otherwise ``running_mean`` and ``running_var`` normalize."""
    name = "batch_norm"
    training = checks.flag(name, "training", training)
    checks.number(name, "momentum", momentum, 0.0, 1.0)
    checks.number(name, "eps", eps, low=0)
    return _batch_norm_checked(
        input, running_mean, running_var, weight, bias, training, float(momentum), float(eps)
    )


def _check_channels(name, input, c_axis_min=2, **arrays):
    if input.ndim < c_axis_min:
        raise ValueError(
            f"{name}: input must have at least {c_axis_min} axes (N, C, ...), got shape "
            f"{tuple(input.shape)}"
        )
    c = input.shape[1]
    for what, p in arrays.items():
        if p is not None and tuple(p.shape) != (c,):
            raise ValueError(
                f"{name}: {what} has shape {tuple(p.shape)}, expected ({c},) (the input's "
                f"channels, axis 1)"
            )
    return c


def _batch_norm_checked(input, running_mean, running_var, weight, bias, training, momentum,
                        eps, name="batch_norm"):  # fmt: skip
    """``batch_norm`` of checked flags and numbers: the shapes are checked here."""
    recorder_of(input, running_mean, running_var, weight, bias)  # a non-array named first
    _check_channels(name, input, weight=weight, bias=bias, running_mean=running_mean,
                    running_var=running_var)  # fmt: skip
    rec = recorder_of(input, weight, bias, running_mean, running_var)
    if training:
        n = math.prod(input.shape) // max(input.shape[1], 1)
        if n <= 1:
            raise ValueError(
                f"{name}: expected more than 1 value per channel when training, got input of "
                f"shape {tuple(input.shape)}"
            )
        if running_mean is not None or running_var is not None:
            _update_running(rec, input, running_mean, running_var, momentum)
        return rec.xp.nn.batch_norm(input, weight, bias, None, None, training=True, eps=eps)
    if running_mean is None or running_var is None:
        raise ValueError(f"{name}: running_mean and running_var are needed when not training")
    return rec.xp.nn.batch_norm(
        input, weight, bias, running_mean, running_var, training=False, eps=eps
    )


def _write(target, value):
    """``target[...] = value`` (a Tensor, or a raw array: then the value's data)."""
    target[...] = value if isinstance(target, Tensor) else value.data


def _update_running(rec, input, running_mean, running_var, momentum, instance=False):
    """Update the running statistics in place with the batch's (unbiased variance), as
    torch; ``instance``: per (example, channel) over the spatial axes, averaged over the
    batch (instance norm)."""
    xp = rec.namespace
    with no_grad():
        x = xp.asarray(input.detach() if isinstance(input, Tensor) else input)
        if instance:
            axes = tuple(range(2, x.ndim))
            stats = (xp.mean(xp.mean(x, axis=axes), axis=0),
                     xp.mean(xp.var(x, axis=axes, correction=1), axis=0))  # fmt: skip
        else:
            n = _count(x)
            mu = _channel_sum(xp, x) / n
            centered = x - _channel(xp, mu, x.ndim)
            stats = (mu, _channel_sum(xp, centered * centered) / (n - 1))
        for target, batch in zip((running_mean, running_var), stats):
            if target is None:
                continue
            old = xp.asarray(target)
            batch = xp.astype(batch, old.dtype)
            _write(target, (1 - momentum) * old + momentum * batch)
            if rec.backend.lazy and isinstance(target, Tensor):
                lazy.written(target)  # persisted by the next optimizer step


# group norm
def _grouped(xp, x, groups, eps):
    """(xhat, rstd) of x (N, C, *) normalized per (example, group): xhat in x's shape,
    rstd (N, G, 1)."""
    xg = xp.reshape(x, (x.shape[0], groups, math.prod(x.shape[1:]) // groups))
    xhat, rstd, _ = _normalized(xp, xg, 1, eps)
    return xp.reshape(xhat, x.shape), rstd


def _group_norm(xp, x, weight, bias, groups, eps):
    xhat, _ = _grouped(xp, x, groups, eps)
    return _affine(xp, xhat, weight, bias)


def _group_norm_rule(xp, g, ans, x, weight, bias, *, groups, eps, needs):
    """As layer norm per (example, group), with gh = g w per channel; dw = sum(g xhat),
    db = sum(g) per channel."""
    xhat, rstd = _grouped(xp, x, groups, eps)
    gx = None
    if needs[0]:
        gh = g if weight is None else g * _channel(xp, weight, x.ndim)
        shape = (x.shape[0], groups, math.prod(x.shape[1:]) // groups)
        ghg, xg = xp.reshape(gh, shape), xp.reshape(xhat, shape)
        mean_g = xp.mean(ghg, axis=2, keepdims=True)
        mean_gx = xp.mean(ghg * xg, axis=2, keepdims=True)
        gx = xp.reshape(rstd * (ghg - mean_g - xg * mean_gx), x.shape)
    gw = _channel_sum(xp, g * xhat) if needs[1] and weight is not None else None
    gb = _channel_sum(xp, g) if needs[2] and bias is not None else None
    return gx, gw, gb


def _group_norm_batch(c, x, w, b, *, groups, eps):
    """The batch folded into N; per-example weights applied after."""
    bx, bw, bb = c.bd
    x = c.lift(x, bx)
    if not bw and not bb:
        return unfold(c, c.f(fold(c, x), w, b, groups=groups, eps=eps))
    y = unfold(c, c.f(fold(c, x), None, None, groups=groups, eps=eps))
    tail = (1,) * (x.ndim - 3)
    for p, bp, op in ((w, bw, "mul"), (b, bb, "add")):
        if p is not None:
            shape = (p.shape[0], 1, p.shape[1]) if bp else (p.shape[0],)
            p = c.xp.reshape(p, shape + tail)
            y = y * p if op == "mul" else y + p
    return y


defop(
    "nn.group_norm",
    vjp=_group_norm_rule,
    needs=True,
    chapter=CH,
    impl=lambda B: lambda x, w, b, *, groups, eps: _group_norm(B, x, w, b, groups, eps),
    saves=(0, 1),
    batch=_group_norm_batch,
    doc="(x - mean) / sqrt(var + eps) per (example, group of channels), then weight and "
    "bias per channel",
)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalize an (N, C, *) input over each group of ``C / num_groups`` channels (and
    the spatial axes) per example, biased variance, then scale by ``weight`` and shift by
    ``bias`` (each (C,)), as torch."""
    name = "group_norm"
    num_groups = int(checks.integer(name, "num_groups", num_groups, low=1))
    checks.number(name, "eps", eps, low=0)
    return _group_norm_checked(input, num_groups, weight, bias, float(eps))


def _group_norm_checked(input, num_groups, weight, bias, eps, name="group_norm"):
    recorder_of(input, weight, bias)  # a non-array named first
    c = _check_channels(name, input, weight=weight, bias=bias)
    if c % num_groups:
        raise ValueError(f"{name}: {c} channels can't be split into {num_groups} groups")
    return recorder_of(input, weight, bias).xp.nn.group_norm(
        input, weight, bias, groups=num_groups, eps=eps
    )


# rms norm
def _rms(xp, x, k, eps):
    axes = tuple(range(x.ndim - k, x.ndim))
    return 1 / xp.sqrt(xp.mean(x * x, axis=axes, keepdims=True) + eps), axes


def _rms_norm_forward(xp, x, weight, k, eps):
    r, _ = _rms(xp, x, k, eps)
    return x * r if weight is None else x * r * weight


def _rms_norm_rule(xp, g, ans, x, weight, *, k, eps, needs):
    """r = 1 / sqrt(mean(x^2) + eps): dx = r (gh - x r^2 mean(gh x)), gh = g w;
    dw = g x r (summed over the leading axes by the graph)."""
    r, axes = _rms(xp, x, k, eps)
    gx = gw = None
    if needs[0]:
        gh = g if weight is None else g * weight
        gx = r * (gh - x * (r * r) * xp.mean(gh * x, axis=axes, keepdims=True))
    if needs[1] and weight is not None:
        gw = g * x * r
    return gx, gw


def _rms_norm_batch(c, x, w, *, k, eps):
    """The batch axis is one more leading axis; a per-example weight applied after."""
    bx, bw = c.bd
    x = c.lift(x, bx)
    if not bw:
        return c.f(x, w, k=k, eps=eps)
    y = c.f(x, None, k=k, eps=eps)
    return y if w is None else y * c.pad(w, x.ndim - 1)


defop(
    "nn.rms_norm",
    vjp=_rms_norm_rule,
    needs=True,
    chapter=CH,
    impl=lambda B: lambda x, w, *, k, eps: _rms_norm_forward(B, x, w, k, eps),
    saves=(0, 1),
    batch=_rms_norm_batch,
    doc="x / sqrt(mean(x^2) + eps) * weight over the trailing axes",
)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the trailing ``normalized_shape``
    axes, as torch; ``eps`` None: the machine epsilon of the input's dtype."""
    recorder_of(input, weight)  # a non-array named first
    name = "rms_norm"
    shape = tuple(int(n) for n in checks.integers(name, "normalized_shape", normalized_shape,
                                                  low=0))  # fmt: skip
    if eps is not None:
        eps = float(checks.number(name, "eps", eps, low=0))
    return _rms_norm_checked(input, shape, weight, eps)


def _rms_norm_checked(input, shape, weight, eps, name="rms_norm"):
    k = len(shape)
    if k == 0 or tuple(input.shape[input.ndim - k :]) != shape:
        raise ValueError(
            f"{name}: normalized_shape {shape} doesn't match the trailing axes of the "
            f"input, shape {tuple(input.shape)}"
        )
    if weight is not None and tuple(weight.shape) != shape:
        raise ValueError(f"{name}: weight has shape {tuple(weight.shape)}, expected {shape}")
    rec = recorder_of(input, weight)
    if eps is None:
        eps = float(rec.namespace.finfo(input.dtype).eps)
    return rec.xp.nn.rms_norm(input, weight, k=k, eps=eps)
