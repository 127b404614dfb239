"""Losses: cross-entropy (integer or probability targets, class weights), negative
log-likelihood, mean squared error, L1, Huber, smooth L1, KL divergence, binary
cross-entropy (of probabilities, or with logits). One registered op each with a fused
rule (cross-entropy with class weights and integer targets is log_softmax then
nll_loss, as in torch)."""

from __future__ import annotations

import math

from ... import checks
from ...backends import device_of
from ...engine.namespace import recorder_of
from ...engine.registry import defop
from ...engine.tensor import Tensor
from ...rules.batch_rules import fold, lift_all, unfold
from ._dtypes import dtype_facts
from .activations import _exp_sum, _log1p_exp, _max_const, _sigmoid

__all__ = [
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "huber_loss",
    "smooth_l1_loss",
    "kl_div",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
]

CH = "nn.loss"
_REDUCTIONS = ("none", "mean", "sum")


def _per_example(c, loss, reduction, count=None):
    """Batching: a loss computed with reduction 'none' on every example (the batch axis
    first), reduced per example (its 'mean' divided by ``count`` per example if given)."""
    if reduction == "none":
        return loss
    total = c.xp.sum(loss, axis=tuple(range(1, loss.ndim)))
    if reduction == "sum":
        return total
    return total / (math.prod(loss.shape[1:]) if count is None else count)


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
    return xp.arange(rows, device=device_of(safe)) * c + xp.reshape(safe, (-1,))


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


def _cross_entropy_batch(c, z, t, *, ignore_index, reduction, label_smoothing):
    """The batch folded into N, reduction 'none', then reduced per example ('mean' over
    each example's valid targets)."""
    xp = c.xp
    z, t = lift_all(c, (z, t))
    loss = c.f(fold(c, z), fold(c, t), ignore_index=ignore_index, reduction="none",
               label_smoothing=label_smoothing)  # fmt: skip
    loss = unfold(c, loss)
    count = None
    if reduction == "mean" and ignore_index is not None:  # the valid targets, at least 1
        valid = xp.astype(t != ignore_index, loss.dtype)
        count = xp.sum(valid, axis=tuple(range(1, valid.ndim)))
        count = xp.where(count == 0, xp.ones_like(count), count)
    return _per_example(c, loss, reduction, count)


defop(
    "nn.cross_entropy",
    _cross_entropy_rule,
    None,
    residuals=_ce_residuals,
    chapter=CH,
    impl=lambda B: lambda logits, target, **kw: _cross_entropy(B, logits, target, **kw),
    batch=_cross_entropy_batch,
    doc="softmax cross-entropy with integer targets (class axis 1)",
)


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):  # fmt: skip
    """Softmax cross-entropy of ``input`` (N, C), (N, C, d1, ...) or (C,), as torch, against
    integer targets (N,) or (N, d1, ...) or class probabilities (a float target of the
    input's shape). Integer targets: ``ignore_index`` ones count for nothing ('mean'
    divides by the others, or by their ``weight`` s; if all are ignored the loss is 0).
    ``label_smoothing`` mixes the target with the uniform distribution; ``weight`` (C,)
    weighs the classes.

    Out-of-range targets raise ``IndexError`` on CPU backends; on GPU backends they
    are not checked (no device-to-host read), as torch's CUDA kernels assert
    asynchronously; CuPy wraps them around, as in its integer indexing."""
    name = "cross_entropy"
    ignore_index = int(checks.integer(name, "ignore_index", ignore_index))
    checks.choice(name, "reduction", reduction, _REDUCTIONS)
    checks.number(name, "label_smoothing", label_smoothing, 0.0, 1.0)
    eps = float(label_smoothing)
    rec = recorder_of(input, target, weight)
    xp = rec.xp
    if input.ndim == 1:
        return _unbatched(cross_entropy, rec, input, target, weight, ignore_index,
                          reduction=reduction, label_smoothing=eps)  # fmt: skip
    if input.ndim < 2:
        raise ValueError(f"{name}: input must be (N, C, ...), got shape {tuple(input.shape)}")
    _class_weight(name, weight, input.shape[1])
    target = _as_tensor(xp, target)
    if xp.isdtype(target.dtype, "real floating"):
        if tuple(target.shape) != tuple(input.shape):
            raise TypeError(
                f"{name}: targets must be integers (class indices), or class probabilities "
                f"of the input's shape {tuple(input.shape)}; got {target.dtype} of shape "
                f"{tuple(target.shape)}"
            )
        return xp.nn.cross_entropy_probs(input, target, weight, reduction=reduction,
                                         label_smoothing=eps)  # fmt: skip
    target, ii = _class_targets(name, rec, input, target, ignore_index)
    if weight is not None:
        return _weighted_cross_entropy(rec, input, target, weight, ii, ignore_index,
                                       reduction, eps)  # fmt: skip
    return xp.nn.cross_entropy(input, target, ignore_index=ii, reduction=reduction,
                               label_smoothing=eps)  # fmt: skip


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


def _mse_loss_batch(c, x, y, *, reduction):
    x, y = lift_all(c, (x, y))
    return _per_example(c, c.f(x, y, reduction="none"), reduction)


defop(
    "nn.mse_loss",
    vjp=_mse_rule,
    jvp=_mse_jvp,
    chapter=CH,
    impl=lambda B: lambda input, target, *, reduction: _reduce(B, (input - target) ** 2, reduction),
    batch=_mse_loss_batch,
    doc="mean (or sum) of (input - target)^2",
)


def mse_loss(input, target, reduction="mean"):
    """(input - target)^2, reduced by 'mean' (default), 'sum' or 'none'."""
    recorder_of(input, target)  # a non-array named first
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


def _bce_batch(c, x, y, weight, pos_weight, *, reduction):
    x, y = lift_all(c, (x, y))
    r = x.ndim - 1
    weight, pos_weight = (
        c.pad(a, r) if b and a is not None else a for a, b in zip((weight, pos_weight), c.bd[2:])
    )
    return _per_example(c, c.f(x, y, weight, pos_weight, reduction="none"), reduction)


defop(
    "nn.binary_cross_entropy_with_logits",
    vjp=_bce_rule,
    chapter=CH,
    impl=lambda B: (
        lambda x, y, weight, pos_weight, *, reduction: _reduce(
            B, _bce_elements(B, x, y, weight, pos_weight), reduction
        )
    ),
    batch=_bce_batch,
    doc="binary cross-entropy of sigmoid(x) against y, in the stable softplus form",
)


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean", pos_weight=None):
    """-[p y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))] * weight, p = ``pos_weight``
    (broadcast over the last axis as torch), reduced by 'mean', 'sum' or 'none'."""
    recorder_of(input, target, weight, pos_weight)  # a non-array named first
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


# -- shared checks ----------------------------------------------------------------
def _same_shape(name, input, target):
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(
            f"{name}: input shape {tuple(input.shape)} != target {tuple(target.shape)}"
        )


def _as_tensor(xp, a):
    return a if isinstance(a, Tensor) else xp.asarray(a)


def _class_targets(name, rec, input, target, ignore_index):
    """Checks integer class targets of ``input`` (N, C, ...) as cross_entropy does; returns
    the target tensor and ``ignore_index`` (None when no target is ignored)."""
    if input.ndim < 2:
        raise ValueError(f"{name}: input must be (N, C, ...), got shape {tuple(input.shape)}")
    target = _as_tensor(rec.xp, target)
    if not dtype_facts(rec.xp, target.dtype).integral:
        raise TypeError(f"{name}: targets must be integers (class indices), got {target.dtype}")
    expected = (input.shape[0],) + tuple(input.shape[2:])
    if tuple(target.shape) != expected:
        raise ValueError(
            f"{name}: target shape {tuple(target.shape)} doesn't match input "
            f"{tuple(input.shape)} (expected {expected})"
        )
    c = input.shape[1]
    B, t = rec.backend, target.data
    if B.checks_on_host(t):
        outside = (t < 0) | (t >= c)
        if bool(B.any(outside)):
            if bool(B.any(outside & (t != ignore_index))):
                raise IndexError(f"{name}: target out of range: classes are 0..{c - 1}")
        elif not 0 <= ignore_index < c or not bool(B.any(t == ignore_index)):
            ignore_index = None
    return target, ignore_index


def _unbatched(f, rec, input, target, *args, reduction, **kw):
    """An input of one example (C,), as torch: ``f`` on a batch of one, a 0-d 'none'."""
    xp = rec.xp
    target = _as_tensor(xp, target)
    if tuple(target.shape) not in ((), tuple(input.shape)):
        raise ValueError(
            f"{f.__name__}: for an input of shape {tuple(input.shape)} the target must be 0-d "
            f"(a class index) or of the same shape, got {tuple(target.shape)}"
        )
    out = f(xp.expand_dims(input, axis=0), xp.reshape(target, (1,) + tuple(target.shape)),
            *args, reduction=reduction, **kw)  # fmt: skip
    return xp.reshape(out, ()) if reduction == "none" else out


def _class_weight(name, weight, c):
    if weight is None:
        return
    s = getattr(weight, "shape", None)
    if s is None:
        raise TypeError(f"{name}: weight must be an array or None, got {type(weight).__name__}")
    if tuple(s) != (c,):
        raise ValueError(f"{name}: weight must have shape ({c},) (one per class), got {tuple(s)}")


# -- negative log-likelihood --------------------------------------------------------
def _nll_parts(xp, input, target, weight, ignore_index):
    """Class axis last, flat positions of the targets, the picked log-probabilities
    and the per-target weights (None: all 1, nothing ignored)."""
    z, valid, safe = _ce_parts(xp, input, target, ignore_index)
    shape = tuple(safe.shape)
    pos = _flat_positions(xp, safe, z.shape[-1])
    picked = xp.reshape(xp.take(xp.reshape(z, (-1,)), pos), shape)
    vw = None
    if weight is not None:
        vw = xp.reshape(xp.take(weight, xp.reshape(safe, (-1,))), shape)
    if valid is not None:
        vw = xp.astype(valid, z.dtype) if vw is None else xp.where(valid, vw, xp.zeros_like(vw))
    return z, safe, pos, picked, vw, valid


def _nll_count(xp, vw, reduction):
    """What 'mean' divides by: the weights of the valid targets (at least... 1 when
    their sum is 0, so that a loss whose targets are all ignored is 0, not NaN)."""
    if reduction != "mean" or vw is None:
        return None
    n = xp.sum(vw)
    return xp.where(n == 0, xp.ones_like(n), n)


def _nll(B, input, target, weight, *, ignore_index, reduction):
    _, _, _, picked, vw, _ = _nll_parts(B, input, target, weight, ignore_index)
    loss = -picked if vw is None else -(picked * vw)
    return _reduce(B, loss, reduction, _nll_count(B, vw, reduction))


def _nll_rule(xp, g, ans, input, target, weight, *, ignore_index, reduction):
    z, safe, pos, picked, vw, valid = _nll_parts(xp, input, target, weight, ignore_index)
    shape = tuple(safe.shape)
    count = _nll_count(xp, vw, reduction)
    ge = _unreduce(xp, g, shape, reduction, count)
    gel = -ge if vw is None else -(ge * vw)
    n = math.prod(z.shape)
    zeros = xp.zeros((n,), dtype=g.dtype, device=device_of(g))
    gz = xp.reshape(xp.index_add(zeros, pos, xp.reshape(gel, (-1,)), axis=0), z.shape)
    gz = xp.moveaxis(gz, -1, 1) if input.ndim > 2 else gz
    gw = None
    if weight is not None:
        # d loss / d w_c: the targets of class c, each -picked (minus the mean loss for
        # 'mean', whose denominator holds the weights too), times its cotangent
        contrib = -picked
        if reduction == "mean":
            contrib = contrib - xp.sum(-(picked * vw)) / count
        contrib = contrib * ge
        if valid is not None:
            contrib = xp.where(valid, contrib, xp.zeros_like(contrib))
        zw = xp.zeros(weight.shape, dtype=g.dtype, device=device_of(g))
        gw = xp.index_add(zw, xp.reshape(safe, (-1,)), xp.reshape(contrib, (-1,)), axis=0)
    return gz, None, gw


def _class_weights(c, w, batched, ndim):
    """Class weights (C,), or (n, C) batched, as (n, 1, C, 1, ...) against (n, N, C, ...)."""
    w = c.lift(w, batched)
    return c.xp.reshape(w, (c.n, 1, w.shape[1]) + (1,) * (ndim - 3))


def _nll_loss_batch(c, z, t, w, *, ignore_index, reduction):
    """The class weights folded into the log-probabilities (loss w_t (-z_t)); 'mean'
    divides each example by its weights of valid targets (the op on -w)."""
    xp = c.xp
    z, t = lift_all(c, (z, t))
    kw = {"ignore_index": ignore_index, "reduction": "none"}
    if w is None:
        loss = unfold(c, c.f(fold(c, z), fold(c, t), None, **kw))
        count = None
        if reduction == "mean" and ignore_index is not None:
            valid = xp.astype(t != ignore_index, loss.dtype)
            count = xp.sum(valid, axis=tuple(range(1, valid.ndim)))
    else:
        wb = _class_weights(c, w, c.bd[2], z.ndim)
        loss = unfold(c, c.f(fold(c, z * wb), fold(c, t), None, **kw))
        count = None
        if reduction == "mean":
            mw = -xp.broadcast_to(wb, tuple(z.shape))
            vw = unfold(c, c.f(fold(c, mw), fold(c, t), None, **kw))
            count = xp.sum(vw, axis=tuple(range(1, vw.ndim)))
    if count is not None:
        count = xp.where(count == 0, xp.ones_like(count), count)
    return _per_example(c, loss, reduction, count)


defop(
    "nn.nll_loss",
    vjp=_nll_rule,
    chapter=CH,
    impl=lambda B: lambda input, target, weight, **kw: _nll(B, input, target, weight, **kw),
    batch=_nll_loss_batch,
    doc="negative log-likelihood of log-probabilities (class axis 1), integer targets",
)


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """-input[n, target[n]] * weight[target[n]], as torch: ``ignore_index`` targets count
    for nothing, 'mean' divides by the weights of the others (0 if all are ignored)."""
    name = "nll_loss"
    ignore_index = int(checks.integer(name, "ignore_index", ignore_index))
    checks.choice(name, "reduction", reduction, _REDUCTIONS)
    rec = recorder_of(input, target, weight)
    if input.ndim == 1:
        return _unbatched(nll_loss, rec, input, target, weight, ignore_index,
                          reduction=reduction)  # fmt: skip
    target, ii = _class_targets(name, rec, input, target, ignore_index)
    _class_weight(name, weight, input.shape[1])
    return rec.xp.nn.nll_loss(input, target, weight, ignore_index=ii, reduction=reduction)


# -- cross-entropy with probability targets -----------------------------------------
def _soft_parts(xp, z, y, weight, label_smoothing):
    """log-softmax over axis 1, softmax, the (smoothed) targets and the weighted ones."""
    m = _max_const(xp, z, 1)
    e = xp.exp(z - m)
    s = xp.sum(e, axis=1, keepdims=True)
    logp = (z - m) - xp.log(s)
    c = z.shape[1]
    ys = (1 - label_smoothing) * y + label_smoothing / c if label_smoothing else y
    if weight is None:
        return logp, e / s, ys, ys, None
    wb = xp.reshape(weight, (1, c) + (1,) * (z.ndim - 2))
    return logp, e / s, ys, ys * wb, wb


def _soft_ce(B, z, y, weight, *, reduction, label_smoothing):
    logp, _, _, a, _ = _soft_parts(B, z, y, weight, label_smoothing)
    return _reduce(B, -B.sum(a * logp, axis=1), reduction)


def _soft_ce_rule(xp, g, ans, z, y, weight, *, reduction, label_smoothing):
    logp, p, ys, a, wb = _soft_parts(xp, z, y, weight, label_smoothing)
    shape = (z.shape[0],) + tuple(z.shape[2:])
    ge = xp.expand_dims(_unreduce(xp, g, shape, reduction), axis=1)
    gz = ge * (p * xp.sum(a, axis=1, keepdims=True) - a)
    gyl = -(ge * logp)
    gy = (1 - label_smoothing) * (gyl if wb is None else gyl * wb)
    gw = None
    if weight is not None:
        axes = (0,) + tuple(range(2, z.ndim))
        gw = xp.sum(gyl * ys, axis=axes)
    return gz, gy, gw


def _cross_entropy_probs_batch(c, z, y, w, *, reduction, label_smoothing):
    """The (smoothed) targets times the class weights: the op with no weight."""
    z, y = lift_all(c, (z, y))
    if w is not None:
        if label_smoothing:
            y = (1 - label_smoothing) * y + label_smoothing / z.shape[2]
            label_smoothing = 0.0
        y = y * _class_weights(c, w, c.bd[2], z.ndim)
    loss = c.f(fold(c, z), fold(c, y), None, reduction="none", label_smoothing=label_smoothing)
    return _per_example(c, unfold(c, loss), reduction)


defop(
    "nn.cross_entropy_probs",
    vjp=_soft_ce_rule,
    chapter=CH,
    impl=lambda B: lambda z, y, weight, **kw: _soft_ce(B, z, y, weight, **kw),
    batch=_cross_entropy_probs_batch,
    doc="softmax cross-entropy against class probabilities (class axis 1)",
)


def _weighted_cross_entropy(rec, input, target, weight, ii, ignore_index, reduction, eps):
    """Integer targets with class weights, as torch: nll_loss of log_softmax, plus the
    label-smoothing term (normalized by the targets' weights for 'mean')."""
    from .activations import log_softmax

    xp = rec.xp
    lp = log_softmax(input, axis=1)
    nll = xp.nn.nll_loss(lp, target, weight, ignore_index=ii, reduction=reduction)
    if not eps:
        return nll
    c = input.shape[1]
    weight = _as_tensor(xp, weight)
    wb = xp.reshape(weight, (1, c) + (1,) * (input.ndim - 2))
    smooth = -xp.sum(lp * wb, axis=1)
    valid = target != ignore_index
    smooth = xp.where(valid, smooth, xp.zeros_like(smooth))
    if reduction == "none":
        red = smooth
    else:
        red = xp.sum(smooth)
        if reduction == "mean":
            safe = xp.where(valid, target, xp.zeros_like(target))
            wt = xp.take(weight, xp.reshape(safe, (-1,)))
            d = xp.sum(xp.where(xp.reshape(valid, (-1,)), wt, xp.zeros_like(wt)))
            red = red / xp.where(d == 0, xp.ones_like(d), d)
    return (1 - eps) * nll + red * (eps / c)


# -- L1, Huber, smooth L1 ------------------------------------------------------------
def _tangent_diff(ts):
    ti, tt = ts
    if ti is None and tt is None:
        return None
    return ti if tt is None else (-tt if ti is None else ti - tt)


def _l1_rule(xp, g, ans, input, target, *, reduction):
    d = input - target
    gd = _unreduce(xp, g, tuple(d.shape), reduction) * xp.sign(d)
    return gd, -gd


def _pair_loss_batch(c, x, y, *, reduction, **kwargs):
    """l1, Huber and smooth L1 losses, element-wise in two same-shaped arrays."""
    x, y = lift_all(c, (x, y))
    return _per_example(c, c.f(x, y, reduction="none", **kwargs), reduction)


defop(
    "nn.l1_loss",
    vjp=_l1_rule,
    jvp=lambda xp, ts, ans, input, target, *, reduction: _reduce(
        xp, xp.sign(input - target) * _tangent_diff(ts), reduction
    ),
    chapter=CH,
    impl=lambda B: lambda input, target, *, reduction: _reduce(B, B.abs(input - target), reduction),
    batch=_pair_loss_batch,
    doc="mean (or sum) of |input - target|",
)


def _huber_elements(xp, d, delta, scale):
    """0.5 d^2 / scale where |d| < delta, else (|d| - 0.5 delta) delta / scale: Huber with
    scale 1, smooth L1 (beta = delta) with scale delta."""
    a = xp.abs(d)
    return xp.where(a < delta, (0.5 * d * d) / scale, (a - 0.5 * delta) * (delta / scale))


def _huber_slope(xp, d, delta, scale):
    return xp.clip(d, -delta, delta) / scale


def _robust(name, delta_key, smooth):
    def scale_of(delta):
        return delta if smooth else 1.0

    def impl(B):
        def f(input, target, *, reduction, **kw):
            delta = kw[delta_key]
            d = input - target
            if smooth and delta == 0:
                return _reduce(B, B.abs(d), reduction)
            return _reduce(B, _huber_elements(B, d, delta, scale_of(delta)), reduction)

        return f

    def slope(xp, d, delta):
        return xp.sign(d) if smooth and delta == 0 else _huber_slope(xp, d, delta, scale_of(delta))

    def rule(xp, g, ans, input, target, *, reduction, **kw):
        d = input - target
        gd = _unreduce(xp, g, tuple(d.shape), reduction) * slope(xp, d, kw[delta_key])
        return gd, -gd

    def jvp(xp, ts, ans, input, target, *, reduction, **kw):
        d = input - target
        return _reduce(xp, slope(xp, d, kw[delta_key]) * _tangent_diff(ts), reduction)

    doc = "smooth L1 loss (beta)" if smooth else "Huber loss (delta)"
    defop(f"nn.{name}", vjp=rule, jvp=jvp, chapter=CH, impl=impl, batch=_pair_loss_batch, doc=doc)


_robust("huber_loss", "delta", smooth=False)
_robust("smooth_l1_loss", "beta", smooth=True)


def _pair_loss(name, input, target, reduction):
    checks.choice(name, "reduction", reduction, _REDUCTIONS)
    rec = recorder_of(input, target)
    target = _as_tensor(rec.xp, target)
    _same_shape(name, input, target)
    return rec, target


def l1_loss(input, target, reduction="mean"):
    """|input - target|, reduced by 'mean' (default), 'sum' or 'none'."""
    rec, target = _pair_loss("l1_loss", input, target, reduction)
    return rec.xp.nn.l1_loss(input, target, reduction=reduction)


def huber_loss(input, target, reduction="mean", delta=1.0):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta), d = input - target."""
    checks.number("huber_loss", "delta", delta, 0.0, open_low=True)
    rec, target = _pair_loss("huber_loss", input, target, reduction)
    return rec.xp.nn.huber_loss(input, target, reduction=reduction, delta=float(delta))


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta = 0: the L1 loss)."""
    checks.number("smooth_l1_loss", "beta", beta, 0.0)
    rec, target = _pair_loss("smooth_l1_loss", input, target, reduction)
    return rec.xp.nn.smooth_l1_loss(input, target, reduction=reduction, beta=float(beta))


# -- Kullback-Leibler divergence -------------------------------------------------------
def _kl_reduce(xp, loss, reduction):
    if reduction == "batchmean":
        total = xp.sum(loss)
        return total / loss.shape[0] if loss.ndim else total
    return _reduce(xp, loss, reduction)


def _kl_unreduce(xp, g, shape, reduction):
    if reduction == "batchmean":
        return _unreduce(xp, g / shape[0] if shape else g, shape, "sum")
    return _unreduce(xp, g, shape, reduction)


def _xlogy(xp, t):
    """t log t, 0 where t is 0 (torch's xlogy)."""
    pos = t > 0
    return xp.where(pos, t * xp.log(xp.where(pos, t, xp.ones_like(t))), xp.zeros_like(t))


def _kl_elements(xp, x, t, log_target):
    if log_target:
        return xp.exp(t) * (t - x)
    return _xlogy(xp, t) - t * x


def _kl_rule(xp, g, ans, x, t, *, reduction, log_target):
    ge = _kl_unreduce(xp, g, tuple(xp.broadcast_arrays(x, t)[0].shape), reduction)
    if log_target:
        et = xp.exp(t)
        return -(ge * et), ge * (et * (t - x + 1))
    pos = t > 0
    logt = xp.log(xp.where(pos, t, xp.ones_like(t)))
    # at t = 0 torch's xlogy gives the derivative log(0) + 1 = -inf: ours is -x + 1 ...
    # kept finite (the limit of t log t has no finite slope there)
    return -(ge * t), ge * (xp.where(pos, logt + 1, xp.zeros_like(t)) - x)


def _kl_jvp(xp, ts, ans, x, t, *, reduction, log_target):
    tx, tt = ts
    if log_target:
        et = xp.exp(t)
        dx, dt = -et, et * (t - x + 1)
    else:
        pos = t > 0
        dx = -t
        dt = xp.where(pos, xp.log(xp.where(pos, t, xp.ones_like(t))) + 1, xp.zeros_like(t)) - x
    d = _tangent_sum((dx, tx), (dt, tt))
    return None if d is None else _kl_reduce(xp, d, reduction)


def _tangent_sum(*pairs):
    """sum of derivative * tangent over the pairs whose tangent is not None (zero)."""
    out = None
    for d, t in pairs:
        if t is not None:
            out = d * t if out is None else out + d * t
    return out


def _kl_div_batch(c, x, y, *, reduction, log_target):
    """Reduced per example; 'batchmean' divides by one example's batch size."""
    x, y = lift_all(c, (x, y))
    loss = c.f(x, y, reduction="none", log_target=log_target)
    if reduction != "batchmean":
        return _per_example(c, loss, reduction)
    total = _per_example(c, loss, "sum")
    return total / loss.shape[1] if loss.ndim > 1 else total


defop(
    "nn.kl_div",
    vjp=_kl_rule,
    jvp=_kl_jvp,
    chapter=CH,
    impl=lambda B: (
        lambda x, t, *, reduction, log_target: _kl_reduce(
            B, _kl_elements(B, x, t, log_target), reduction
        )
    ),
    batch=_kl_div_batch,
    doc="Kullback-Leibler divergence of log-probabilities input from target",
)


def kl_div(input, target, reduction="mean", log_target=False):
    """target (log target - input) element-wise (``log_target``: target given as a log),
    reduced by 'mean' (every element), 'batchmean' (sum / batch size, the divergence),
    'sum' or 'none', as torch."""
    name = "kl_div"
    checks.choice(name, "reduction", reduction, _REDUCTIONS + ("batchmean",))
    log_target = checks.flag(name, "log_target", log_target)
    rec = recorder_of(input, target)
    target = _as_tensor(rec.xp, target)
    _same_shape(name, input, target)
    return rec.xp.nn.kl_div(input, target, reduction=reduction, log_target=log_target)


# -- binary cross-entropy of probabilities ---------------------------------------------
_BCE_EPS = 1e-12  # torch's floor of x (1 - x) in the gradient


def _clamped_logs(xp, x):
    """log x and log(1 - x), each raised to -100 as torch (finite at 0 and 1)."""
    lo = -100.0

    def clamped_log(a):  # no log(0) evaluated: no warning, no -inf
        pos = a > 0
        return xp.where(pos, xp.maximum(xp.log(xp.where(pos, a, xp.ones_like(a))), lo), lo)

    return clamped_log(x), clamped_log(1 - x)


def _bce_prob_elements(xp, x, y, weight):
    lx, l1x = _clamped_logs(xp, x)
    loss = -(y * lx + (1 - y) * l1x)
    return loss if weight is None else loss * weight


def _bce_prob_rule(xp, g, ans, x, y, weight, *, reduction):
    shape = tuple(xp.broadcast_arrays(*[a for a in (x, y, weight) if a is not None])[0].shape)
    ge = _unreduce(xp, g, shape, reduction)
    w = ge if weight is None else ge * weight
    gx = w * (x - y) / xp.maximum(x * (1 - x), _BCE_EPS)
    lx, l1x = _clamped_logs(xp, x)
    gy = w * (l1x - lx)
    gw = None if weight is None else ge * _bce_prob_elements(xp, x, y, None)
    return gx, gy, gw


def _bce_prob_jvp(xp, ts, ans, x, y, weight, *, reduction):
    tx, ty, tw = ts
    w = 1 if weight is None else weight
    lx, l1x = _clamped_logs(xp, x)
    dx = w * (x - y) / xp.maximum(x * (1 - x), _BCE_EPS) if tx is not None else None
    dy = w * (l1x - lx) if ty is not None else None
    dw = _bce_prob_elements(xp, x, y, None) if tw is not None else None
    d = _tangent_sum((dx, tx), (dy, ty), (dw, tw))
    return None if d is None else _reduce(xp, d, reduction)


def _bce_prob_batch(c, x, y, weight, *, reduction):
    x, y = lift_all(c, (x, y))
    if weight is not None and c.bd[2]:
        weight = c.pad(weight, x.ndim - 1)
    return _per_example(c, c.f(x, y, weight, reduction="none"), reduction)


defop(
    "nn.binary_cross_entropy",
    vjp=_bce_prob_rule,
    jvp=_bce_prob_jvp,
    chapter=CH,
    impl=lambda B: (
        lambda x, y, weight, *, reduction: _reduce(
            B, _bce_prob_elements(B, x, y, weight), reduction
        )
    ),
    batch=_bce_prob_batch,
    doc="binary cross-entropy of probabilities (logs clamped at -100, as torch)",
)


def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    """-weight [y log x + (1 - y) log(1 - x)] of probabilities ``input`` in [0, 1], each
    log raised to -100 (as torch), reduced by 'mean', 'sum' or 'none'."""
    name = "binary_cross_entropy"
    checks.choice(name, "reduction", reduction, _REDUCTIONS)
    rec = recorder_of(input, target, weight)
    target = _as_tensor(rec.xp, target)
    shape = tuple(input.shape)
    _same_shape(name, input, target)
    if weight is not None:
        s = getattr(weight, "shape", None)
        if s is None:
            raise TypeError(f"{name}: weight must be an array or None, got {type(weight).__name__}")
        if not _broadcasts(tuple(s), shape):
            raise ValueError(
                f"{name}: weight has shape {tuple(s)}, which doesn't broadcast to the "
                f"input's {shape}"
            )
    B, x = rec.backend, getattr(input, "data", input)
    if B.checks_on_host(x) and bool(B.any((x < 0) | (x > 1))):
        raise ValueError(f"{name}: input must be probabilities, in [0, 1]")
    return rec.xp.nn.binary_cross_entropy(input, target, weight, reduction=reduction)
