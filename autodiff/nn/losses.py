"""Losses: cross-entropy (integer targets), mean squared error, binary
cross-entropy with logits. One registered op each with a fused rule."""

from __future__ import annotations

import math

from .. import checks
from ..namespace import recorder_of
from ..registry import defop
from ..tensor import Tensor
from ._dtypes import dtype_facts
from .activations import _exp_sum, _log1p_exp, _max_const, _sigmoid

__all__ = ["cross_entropy", "mse_loss", "binary_cross_entropy_with_logits"]

CH = "nn.loss"
_REDUCTIONS = ("none", "mean", "sum")


def _reduce(xp, loss, reduction, count=None):
    if reduction == "none":
        return loss
    total = xp.sum(loss)
    if reduction == "sum":
        return total
    return total / (math.prod(loss.shape) if count is None else count)


def _unreduce(xp, g, shape, reduction, count=None):
    """The cotangent of each element of the unreduced loss."""
    if reduction == "none":
        return g
    if reduction == "mean":  # divided before it is broadcast: no full-size temporary
        g = g / (math.prod(shape) if count is None else count)
    return xp.broadcast_to(xp.reshape(g, (1,) * len(shape)), shape) if shape else g


# -- cross-entropy ---------------------------------------------------------------
def _ce_parts(xp, logits, target, ignore_index):
    """Class axis last, valid-target mask, targets made safe to gather with.
    ``ignore_index=None``: no target is ignored (checked on the host), no mask."""
    z = xp.moveaxis(logits, 1, -1) if logits.ndim > 2 else logits
    if ignore_index is None:
        return z, None, target
    valid = target != ignore_index
    safe = xp.where(valid, target, xp.zeros_like(target))
    return z, valid, safe


def _flat_positions(xp, safe, c):
    """Where each target's logit lies in the flattened (rows, C) logits: a flat take
    or scatter instead of take_along_axis (slow in NumPy) or a one-hot matrix."""
    rows = math.prod(safe.shape)
    return xp.arange(rows, device=safe.device) * c + xp.reshape(safe, (-1,))


def _ce_count(xp, valid, dtype):
    """How many targets a 'mean' divides by (at least 1: all ignored gives 0, not NaN)."""
    n = xp.sum(xp.astype(valid, dtype))
    return xp.where(n == 0, xp.ones_like(n), n)


def _ce_softmax(xp, z, safe):
    """The row max m, exp(z - m), its row sums and the targets' flat positions: the
    softmax is e / s."""
    m = _max_const(xp, z, -1)
    e = xp.apply_("exp", z - m)
    s = _exp_sum(xp, xp.sum(e, axis=-1, keepdims=True))
    return m, e, s, _flat_positions(xp, safe, z.shape[-1])


def _ce_residuals(xp, logits, target, *, ignore_index, reduction, label_smoothing):
    """(e, s, positions) recomputed from the inputs (the residuals, under create_graph)."""
    z, _, safe = _ce_parts(xp, logits, target, ignore_index)
    return _ce_softmax(xp, z, safe)[1:]


def _cross_entropy(B, logits, target, ignore_index, reduction, label_smoothing):
    """The forward pass (``B`` a backend): nll = log(sum(exp(z - m))) - (z[target] - m),
    m the row max, from the sum and the picked logits alone (no (N, C) log-probabilities;
    z[target] - m first, so that large logits lose no precision)."""
    z, valid, safe = _ce_parts(B, logits, target, ignore_index)
    m, e, s, pos = _ce_softmax(B, z, safe)
    picked = B.reshape(B.take(B.reshape(z, (-1,)), pos), s.shape)
    log_s = B.log(s)
    nll = log_s - (picked - m)
    if label_smoothing:  # -mean(log p) = log_s - (mean(z) - m)
        mean_z = B.mean(z, axis=-1, keepdims=True)
        nll = (1 - label_smoothing) * nll + label_smoothing * (log_s - (mean_z - m))
    nll = B.reshape(nll, tuple(safe.shape))
    # exp(z - m), its row sums and the targets' flat positions are kept for the rule:
    # the softmax is e / s
    if valid is None:
        return _reduce(B, nll, reduction), (e, s, pos)
    loss = B.where(valid, nll, B.zeros_like(nll))
    count = _ce_count(B, valid, loss.dtype) if reduction == "mean" else None
    return _reduce(B, loss, reduction, count), (e, s, pos)


def _cross_entropy_rule(xp, g, res, logits, target, *, ignore_index, reduction, label_smoothing):
    """softmax - (1 - eps) onehot(t) - eps / C per valid target, times its cotangent.
    The softmax is e / s from the forward pass (``res``); the one-hot part is a
    scatter-add at flat positions: no (N, C) one-hot matrix."""
    z, valid, safe = _ce_parts(xp, logits, target, ignore_index)
    c = z.shape[-1]
    shape = tuple(safe.shape)
    rows = math.prod(shape)
    if valid is None and reduction != "none":
        # every target's cotangent is the same number: kept 0-d, broadcast by the ops
        gcol = g / rows if reduction == "mean" else g
        gl = xp.broadcast_to(xp.reshape(gcol, (1,)), (rows,))
    else:
        if valid is None:
            gl = _unreduce(xp, g, shape, reduction)
        else:
            count = _ce_count(xp, valid, z.dtype) if reduction == "mean" else None
            gl = _unreduce(xp, g, shape, reduction, count)
            gl = xp.where(valid, gl, xp.zeros_like(gl))
        gcol = xp.expand_dims(gl, axis=-1)
        gl = xp.reshape(gl, (-1,))
    e, s, pos = res
    grad = e * (gcol / s)  # one pass over (N, C)
    if label_smoothing:
        grad = grad - (label_smoothing / c) * gcol
    # grad is ours: the one-hot part is added into it, no copy (recorded: a new array)
    flat = xp.index_add_(xp.reshape(grad, (-1,)), pos, -(1 - label_smoothing) * gl)
    grad = xp.reshape(flat, z.shape)
    return xp.moveaxis(grad, -1, 1) if logits.ndim > 2 else grad


defop(
    "nn.cross_entropy",
    _cross_entropy_rule,
    None,
    residuals=_ce_residuals,
    chapter=CH,
    impl=lambda B: lambda logits, target, **kw: _cross_entropy(B, logits, target, **kw),
    doc="softmax cross-entropy with integer targets (class axis 1)",
)


def cross_entropy(input, target, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Softmax cross-entropy of ``input`` (N, C) or (N, C, d1, ...) against integer
    targets (N,) or (N, d1, ...), as torch: ``ignore_index`` targets count for
    nothing ('mean' divides by the others; if all are ignored the loss is 0), and
    ``label_smoothing`` mixes the target with the uniform distribution.

    Out-of-range targets raise ``IndexError`` on CPU backends; on GPU backends they
    are not checked (no device-to-host read), as torch's CUDA kernels assert
    asynchronously; CuPy wraps them around, as in its integer indexing."""
    ignore_index = int(checks.integer("cross_entropy", "ignore_index", ignore_index))
    checks.choice("cross_entropy", "reduction", reduction, _REDUCTIONS)
    checks.number("cross_entropy", "label_smoothing", label_smoothing, 0.0, 1.0)
    rec = recorder_of(input, target)
    xp = rec.namespace
    if input.ndim < 2:
        raise ValueError(f"cross_entropy: input must be (N, C, ...), got shape {input.shape}")
    if not isinstance(target, Tensor):
        target = xp.asarray(target)
    if not dtype_facts(xp, target.dtype).integral:
        raise TypeError(
            f"cross_entropy: targets must be integers (class indices), got {target.dtype}"
        )
    expected = (input.shape[0],) + tuple(input.shape[2:])
    if tuple(target.shape) != expected:
        raise ValueError(
            f"cross_entropy: target shape {tuple(target.shape)} doesn't match input "
            f"{tuple(input.shape)} (expected {expected})"
        )
    c = input.shape[1]
    B, t = rec.backend, target.data  # checked on the raw array: no graph, no wrappers
    # The check reads a bool back to the host: a stream sync on a GPU, so skipped there.
    if B.checks_on_host(t):
        outside = (t < 0) | (t >= c)
        if bool(B.any(outside)):  # ignored targets, or targets out of range
            if bool(B.any(outside & (t != ignore_index))):
                raise IndexError(f"cross_entropy: target out of range: classes are 0..{c - 1}")
        elif not 0 <= ignore_index < c or not bool(B.any(t == ignore_index)):
            ignore_index = None  # nothing to ignore: the op skips the masks
    return rec.xp.nn.cross_entropy(input, target, ignore_index=ignore_index, reduction=reduction,
                                   label_smoothing=float(label_smoothing))  # fmt: skip


# -- mean squared error -----------------------------------------------------------
def _mse_rule(xp, g, ans, input, target, *, reduction):
    d = input - target
    gd = 2 * _unreduce(xp, g, tuple(xp.broadcast_arrays(input, target)[0].shape), reduction) * d
    return gd, -gd


def _mse_jvp(xp, ts, ans, input, target, *, reduction):
    """The reduction of 2 (input - target) (t_input - t_target)."""
    ti, tt = ts
    dt = ti if tt is None else (-tt if ti is None else ti - tt)
    return _reduce(xp, 2 * (input - target) * dt, reduction)


defop(
    "nn.mse_loss",
    vjp=_mse_rule,
    jvp=_mse_jvp,
    chapter=CH,
    impl=lambda B: lambda input, target, *, reduction: _reduce(B, (input - target) ** 2, reduction),
    doc="mean (or sum) of (input - target)^2",
)


def mse_loss(input, target, reduction="mean"):
    """(input - target)^2, reduced by 'mean' (default), 'sum' or 'none'."""
    checks.choice("mse_loss", "reduction", reduction, _REDUCTIONS)
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(
            f"mse_loss: input shape {tuple(input.shape)} != target {tuple(target.shape)}"
        )
    return recorder_of(input, target).xp.nn.mse_loss(input, target, reduction=reduction)


# -- binary cross-entropy with logits ---------------------------------------------
def _broadcasts(shape, to):
    """Whether an array of ``shape`` broadcasts to ``to`` without growing it."""
    return len(shape) <= len(to) and all(n in (1, m) for n, m in zip(reversed(shape), reversed(to)))


def _bce_elements(xp, x, y, weight, pos_weight):
    """(1 - y) x + (1 + (p - 1) y) softplus(-x), times weight (torch's stable form)."""
    sp = _log1p_exp(xp, -x)
    coef = 1 + (pos_weight - 1) * y if pos_weight is not None else 1
    loss = (1 - y) * x + coef * sp
    return loss if weight is None else loss * weight


def _bce_rule(xp, g, ans, x, y, weight, pos_weight, *, reduction):
    shape = tuple(
        xp.broadcast_arrays(*[a for a in (x, y, weight, pos_weight) if a is not None])[0].shape
    )
    ge = _unreduce(xp, g, shape, reduction)
    w = ge if weight is None else ge * weight
    sp = _log1p_exp(xp, -x)
    p1 = 0 if pos_weight is None else pos_weight - 1
    coef = 1 + p1 * y
    gx = w * ((1 - y) - coef * _sigmoid(xp, -x))
    gy = w * (-x + p1 * sp)
    gw = None if weight is None else ge * _bce_elements(xp, x, y, None, pos_weight)
    gp = None if pos_weight is None else w * y * sp
    return gx, gy, gw, gp


defop(
    "nn.binary_cross_entropy_with_logits",
    vjp=_bce_rule,
    chapter=CH,
    impl=lambda B: (
        lambda x, y, weight, pos_weight, *, reduction: _reduce(
            B, _bce_elements(B, x, y, weight, pos_weight), reduction
        )
    ),
    doc="binary cross-entropy of sigmoid(x) against y, in the stable softplus form",
)


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean", pos_weight=None):
    """-[p y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))] * weight, p = ``pos_weight``
    (broadcast over the last axis as torch), reduced by 'mean', 'sum' or 'none'."""
    name = "binary_cross_entropy_with_logits"
    checks.choice(name, "reduction", reduction, _REDUCTIONS)
    shape = tuple(input.shape)
    if shape != tuple(target.shape):
        raise ValueError(f"{name}: input shape {shape} != target {tuple(target.shape)}")
    for label, a in (("weight", weight), ("pos_weight", pos_weight)):
        if a is not None:
            s = getattr(a, "shape", None)
            if s is None:
                raise TypeError(f"{name}: {label} must be an array or None, got {type(a).__name__}")
            if not _broadcasts(tuple(s), shape):
                raise ValueError(
                    f"{name}: {label} has shape {tuple(s)}, which doesn't broadcast to the "
                    f"input's {shape}"
                )
    rec = recorder_of(input, target, weight, pos_weight)
    return rec.xp.nn.binary_cross_entropy_with_logits(input, target, weight, pos_weight,
                                                      reduction=reduction)  # fmt: skip
