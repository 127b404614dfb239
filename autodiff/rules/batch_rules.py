"""``vmap``'s generic batching rules (makers) and the helpers rules share.

An op declares its batching rule where it is registered, in its rules module
(``autodiff/rules/<chapter>.py``): ``defop(..., batch=rule)``. The rule is written beside
the op as ``_<op>_batch`` (``_matmul_batch``), or is one of the generic rules here, marked
``@derived`` (``gradcheck --batching`` and ``Op.batch_kind`` count them as "derived", the
others as "written"): ``passthrough``, ``leading``, ``axis(...)``, ``axes_with_shape()``,
and ``elementwise``, which an element-wise (``diagonal``) op gets from its metadata
without declaring it. :func:`autodiff.engine.batching.rule_of` resolves an op's rule;
an op without one runs in the fallback loop.

A rule is ``rule(c, *args, **kwargs)``. ``c`` is a :class:`~autodiff.engine.batching.Call`:
``c.f``, the op's function (taking the recorded layout of arguments); ``c.xp``, the
recording namespace; ``c.n``, the batch size; ``c.bd``, per positional argument whether
it is batched (a tuple of flags for a list of arrays); ``c.kd``, the same per keyword
argument; and helpers: ``c.rank(i, a)`` (one example's number of axes), ``c.lift(a, b)``
(an unbatched argument broadcast along a new first axis), ``c.pad(a, rank)`` (size-1
axes after the batch axis) and ``c.composite(fn, *args)`` (a formula for one example,
each of its ops batched by its own rule). ``args`` and ``kwargs`` are the op's
arguments, plain Tensors (or Batched values of outer vmaps), the batch axis first where
batched. The rule returns the output(s) with the batch axis first (a Tensor, or a tuple
or list of them; a result that is no array as it is), or ``NotImplemented`` to ask for
the fallback loop for this call (an argument combination it doesn't cover). It computes
with ``c.f`` and ``c.xp``, so what it does is recorded, and differentiable, as usual.

TEMPORARY: the rules of the ``nn.functional`` ops (and of the kernels nn registers) are
still here, at the end, in the name-keyed table ``batching.NN_RULES``, until they move
beside their ops in ``autodiff/nn``. ``gradcheck --batching --op NAME`` checks a rule
against a loop of the op (values and per-example gradients); ``tests/test_vmap.py`` runs
that check for every op with a spec.
"""

from __future__ import annotations

import math

from ..backends import device_of
from ..engine.batching import (
    NN_RULES,
    derived,
    elementwise,
    is_bool,
    key_parts,
    mask_error,
)

__all__ = [
    "elementwise", "passthrough", "leading", "axis", "axes_with_shape", "ALL", "KEEP",
    "FLAT", "REQUIRED", "derived", "flags", "shift", "broadcast_shape", "example_shape",
    "lift_all", "is_index_array", "key_parts", "is_bool", "mask_error", "fold", "unfold",
]  # fmt: skip


# -- generic rules (makers), derived from metadata ------------------------------------------
# ``elementwise`` (imported above) lives in the engine, which derives it from an op's
# metadata and imports no rule module.
@derived
def passthrough(c, *args, **kwargs):
    """The op itself: its result has the batch axis first already (``zeros_like``), or is
    no array (``result_type``)."""
    return c.f(*args, **kwargs)


@derived
def leading(c, *args, **kwargs):
    """Ops on the trailing axes of their first argument (matrices, the last axis) that
    batch over its leading axes: the op itself, when only that argument is batched."""
    if not c.bd[0] or any(c.bd[1:]) or any(flags(c.kd)):
        return NotImplemented
    return c.f(*args, **kwargs)


def flags(kd):
    """Every keyword argument's batched flag (those of a tuple's items one by one)."""
    for v in kd.values():
        if isinstance(v, tuple):
            yield from v
        else:
            yield v


REQUIRED = object()  # a default that marks an argument the op requires
ALL, KEEP, FLAT = "all", "keep", "flat"


def shift(a, r):
    """One example's axis ``a`` (of ``r`` axes) in the batched array: non-negative ones
    move up by one, negative ones count from the end as they did."""
    if isinstance(a, (tuple, list)):
        return type(a)(shift(i, r) for i in a)
    return a + 1 if a >= 0 else a


def axis(name="axis", default=None, none=ALL, pos=None):
    """The rule of an op of one array with an axis argument (``name``, positional at
    ``pos`` if it may be): its axes shifted past the batch axis; ``axis=None`` (and the
    ``default``) means every axis of one example (``none=ALL``: reductions, ``flip``), or
    is kept (``KEEP``), or the example flattened (``FLAT``: ``argmax``)."""

    @derived
    def rule(c, x, *args, **kwargs):
        if not c.bd[0] or any(c.bd[1:]) or any(flags(c.kd)):
            return NotImplemented
        args = list(args)
        if pos is not None and len(args) >= pos:
            value = args[pos - 1]
        else:
            value = kwargs.get(name, default)
            if value is REQUIRED:
                return NotImplemented
        r = x.ndim - 1
        if value is None:
            if none == FLAT:
                return _flat_call(c, x, args, kwargs, name, pos)
            if none == ALL:
                value = tuple(range(1, r + 1))
        else:
            value = shift(value, r)
        if pos is not None and len(args) >= pos:
            args[pos - 1] = value
        else:
            kwargs[name] = value
        return c.f(x, *args, **kwargs)

    return rule


def _flat_call(c, x, args, kwargs, name, pos):
    """An op that flattens its input for ``axis=None`` (``argmax``, ``softmax``), on each
    example flattened: ``axis=1`` of (n, -1), keepdims giving size-1 axes per example."""
    xp, r = c.xp, x.ndim - 1
    keep = kwargs.get("keepdims", False)
    kwargs = dict(kwargs, **{name: 1})
    kwargs.pop("keepdims", None)
    out = c.f(xp.reshape(x, (c.n, -1)), *args, **kwargs)
    if out.ndim == 2:  # an op that keeps the shape (softmax): back to the example's
        return xp.reshape(out, tuple(x.shape))
    return xp.reshape(out, (c.n,) + (1,) * r) if keep else out


def axes_with_shape(default_none=ALL):
    """``fftn``-like ops: ``axes=None`` means the last ``len(s)`` axes (all if ``s`` is
    None) of one example."""

    @derived
    def rule(c, x, **kwargs):
        if not c.bd[0] or any(flags(c.kd)):
            return NotImplemented
        r = x.ndim - 1
        axes, s = kwargs.get("axes"), kwargs.get("s")
        if axes is None:
            axes = tuple(range(r - len(s), r)) if s is not None else tuple(range(r))
        kwargs["axes"] = shift(tuple(axes), r)
        return c.f(x, **kwargs)

    return rule


# -- helpers shared by the rules ----------------------------------------------------------------
def broadcast_shape(*shapes):
    """The broadcast of ``shapes`` (tuples), as the standard broadcasts."""
    r = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-r, 0):
        sizes = {s[i] for s in shapes if len(s) >= -i and s[i] != 1}
        if len(sizes) > 1:
            raise ValueError(f"shapes {shapes} can't be broadcast together")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def example_shape(c, i, a):
    """One example's shape of positional argument ``i`` (value ``a``; () for a scalar)."""
    return tuple(a.shape[1:]) if c.bd[i] else tuple(getattr(a, "shape", ()))


def lift_all(c, arrays):
    """Every one of ``arrays`` (the positional arguments, in order) batched: ``c.lift``."""
    return [c.lift(a, b) for a, b in zip(arrays, c.bd)]


def is_index_array(k):
    """Whether the part ``k`` of an index key is an array (not None, ..., an int, a slice)."""
    return not (k is None or k is Ellipsis or isinstance(k, (int, slice)))


def fold(c, a, lead=1):
    """A batched ``a`` with the batch axis merged into the next one (an op's own batch
    axis N): (n, N, ...) -> (n * N, ...)."""
    return c.xp.reshape(a, (c.n * a.shape[1],) + tuple(a.shape[2:]))


def unfold(c, y):
    """The inverse of ``fold`` on an op's output (n * N, ...) -> (n, N, ...)."""
    return c.xp.reshape(y, (c.n, y.shape[0] // c.n) + tuple(y.shape[1:]))


# -- TEMPORARY, the nn part: rules of the nn.functional ops -------------------------------------
# (they move beside their ops in autodiff/nn in a later step; no op of the standard is here)
def _pool(c, x, **kwargs):
    """Ops of one (N, C, H, W) input: the batch folded into N."""
    if not c.bd[0]:
        return NotImplemented
    return unfold(c, c.f(fold(c, x), **kwargs))


def _linear(c, x, w, b):
    xp, n = c.xp, c.n
    bx, bw, bb = c.bd
    if not bw and not bb:
        return c.f(x, w, b)  # x (n, ..., in): the op batches over leading axes
    x = c.lift(x, bx)
    rows = xp.reshape(x, (n, -1, x.shape[-1]))
    y = rows @ xp.matrix_transpose(w)  # (n, rows, out), per-example weights or not
    if b is not None:
        y = y + (xp.expand_dims(b, axis=1) if bb else b)
    return xp.reshape(y, tuple(x.shape[:-1]) + (y.shape[-1],))


def _conv(c, x, w, b, **kwargs):
    """conv2d / conv_transpose2d: the batch folded into N; per-example weights as one
    grouped convolution (groups * n: example j's channels meet only its own weights)."""
    xp, n = c.xp, c.n
    bx, bw, bb = c.bd
    if not bw and not bb:
        return unfold(c, c.f(fold(c, x), w, b, **kwargs))
    x, w = c.lift(x, bx), c.lift(w, bw)
    b = c.lift(b, bb)
    big_n = x.shape[1]
    xg = xp.reshape(xp.moveaxis(x, 0, 1), (big_n, n * x.shape[2]) + tuple(x.shape[3:]))
    wg = xp.reshape(w, (n * w.shape[1],) + tuple(w.shape[2:]))
    bg = None if b is None else xp.reshape(b, (-1,))
    kwargs["groups"] = kwargs["groups"] * n
    y = c.f(xg, wg, bg, **kwargs)
    y = xp.reshape(y, (big_n, n, y.shape[1] // n) + tuple(y.shape[2:]))
    return xp.moveaxis(y, 1, 0)


def _layer_norm(c, x, w, b, *, k, eps):
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


def _per_channel_flat(c, a, batched):
    """A per-channel (C,) argument, or (n, C) per example, as (n * C,)."""
    if a is None:
        return None
    if not batched:
        a = c.xp.broadcast_to(a, (c.n,) + tuple(a.shape))
    return c.xp.reshape(a, (-1,))


def _batch_norm(c, x, w, b, m, v, *, training, eps):
    """The batch moved into the channels: (n, N, C, *) -> (N, n * C, *), so each
    example's channels get their own statistics (and running stats, weights)."""
    xp, n = c.xp, c.n
    x = c.lift(x, c.bd[0])
    shape = tuple(x.shape)
    xc = xp.reshape(xp.moveaxis(x, 0, 1), (shape[1], n * shape[2]) + shape[3:])
    args = [_per_channel_flat(c, a, bd) for a, bd in zip((w, b, m, v), c.bd[1:])]
    y = c.f(xc, *args, training=training, eps=eps)
    return xp.moveaxis(xp.reshape(y, (shape[1], n) + shape[2:]), 1, 0)


def _group_norm(c, x, w, b, *, groups, eps):
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


def _rms_norm(c, x, w, *, k, eps):
    bx, bw = c.bd
    x = c.lift(x, bx)
    if not bw:
        return c.f(x, w, k=k, eps=eps)
    y = c.f(x, None, k=k, eps=eps)
    return y if w is None else y * c.pad(w, x.ndim - 1)


def _embedding(c, weight, indices, *, padding_idx):
    xp, n = c.xp, c.n
    bw, bi = c.bd
    if not bw:
        return c.f(weight, indices, padding_idx=padding_idx)
    indices = c.lift(indices, bi)
    rows = weight.shape[1]
    table = xp.reshape(weight, (n * rows, weight.shape[2]))
    offsets = xp.arange(n, dtype=indices.dtype, device=device_of(indices)) * rows
    offsets = xp.reshape(offsets, (n,) + (1,) * (indices.ndim - 1))
    out = c.f(table, indices + offsets, padding_idx=None)
    if padding_idx is None:
        return out
    # the padding row's values, but no gradient to it (as the op's rule masks it)
    pad = xp.expand_dims(indices == padding_idx, axis=-1)
    return xp.where(pad, xp.stop_gradient(out), out)


def _per_example(c, loss, reduction, count=None):
    """A loss computed with reduction 'none' on every example, reduced per example."""
    if reduction == "none":
        return loss
    xp = c.xp
    total = xp.sum(loss, axis=tuple(range(1, loss.ndim)))
    if reduction == "sum":
        return total
    return total / (math.prod(loss.shape[1:]) if count is None else count)


def _cross_entropy(c, z, t, *, ignore_index, reduction, label_smoothing):
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


def _mse_loss(c, x, y, *, reduction):
    x, y = lift_all(c, (x, y))
    return _per_example(c, c.f(x, y, reduction="none"), reduction)


def _bce(c, x, y, weight, pos_weight, *, reduction):
    x, y = lift_all(c, (x, y))
    r = x.ndim - 1
    weight, pos_weight = (
        c.pad(a, r) if b and a is not None else a for a, b in zip((weight, pos_weight), c.bd[2:])
    )
    return _per_example(c, c.f(x, y, weight, pos_weight, reduction="none"), reduction)


def _pair_loss(c, x, y, *, reduction, **kwargs):
    """Element-wise losses of two same-shaped arrays (l1, huber, smooth l1)."""
    x, y = lift_all(c, (x, y))
    return _per_example(c, c.f(x, y, reduction="none", **kwargs), reduction)


def _kl_div(c, x, y, *, reduction, log_target):
    x, y = lift_all(c, (x, y))
    loss = c.f(x, y, reduction="none", log_target=log_target)
    if reduction != "batchmean":
        return _per_example(c, loss, reduction)
    total = _per_example(c, loss, "sum")
    return total / loss.shape[1] if loss.ndim > 1 else total


def _bce_probs(c, x, y, weight, *, reduction):
    x, y = lift_all(c, (x, y))
    if weight is not None and c.bd[2]:
        weight = c.pad(weight, x.ndim - 1)
    return _per_example(c, c.f(x, y, weight, reduction="none"), reduction)


def _class_weights(c, w, batched, ndim):
    """Class weights (C,), or (n, C) batched, as (n, 1, C, 1, ...) against (n, N, C, ...)."""
    w = c.lift(w, batched)
    return c.xp.reshape(w, (c.n, 1, w.shape[1]) + (1,) * (ndim - 3))


def _nll_loss(c, z, t, w, *, ignore_index, reduction):
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


def _cross_entropy_probs(c, z, y, w, *, reduction, label_smoothing):
    """The (smoothed) targets times the class weights: the op with no weight."""
    z, y = lift_all(c, (z, y))
    if w is not None:
        if label_smoothing:
            y = (1 - label_smoothing) * y + label_smoothing / z.shape[2]
            label_smoothing = 0.0
        y = y * _class_weights(c, w, c.bd[2], z.ndim)
    loss = c.f(fold(c, z), fold(c, y), None, reduction="none", label_smoothing=label_smoothing)
    return _per_example(c, unfold(c, loss), reduction)


def _cosine_similarity(c, x1, x2, *, axis, eps):
    x1, x2 = lift_all(c, (x1, x2))
    return c.f(x1, x2, axis=axis + 1, eps=eps)


def _normalize(c, x, *, p, axis, eps):
    return c.f(x, p=p, axis=axis + 1, eps=eps)


def _rope(c, x, positions, **kwargs):
    bx, bp = c.bd
    x = c.lift(x, bx)
    if bp:  # broadcast against one example's (..., seq)
        positions = c.pad(positions, x.ndim - 2)
    return c.f(x, positions, **kwargs)


def _attention_packed(c, qkv, mask, **kwargs):
    xp, n = c.xp, c.n
    bq, bm = c.bd
    qkv = c.lift(qkv, bq)
    if mask is not None and (bm or mask.ndim >= 4):
        big_n, length = qkv.shape[1], qkv.shape[2]
        full = (n, big_n, kwargs["heads"], length, length)
        m = c.pad(mask, 4) if bm else xp.expand_dims(mask, axis=0)
        mask = xp.reshape(xp.broadcast_to(m, full), (n * big_n,) + full[2:])
    return unfold(c, c.f(fold(c, qkv), mask, **kwargs))


def _affine(xp, x, w, b):
    y = x @ xp.matrix_transpose(w)
    return y if b is None else y + b


def _gru_formula(x, h, w_ih, w_hh, b_ih, b_hh):
    """One GRU step, torch's formula, with the namespace's functions."""
    xp = x.__array_namespace__()
    gi = xp.unstack(xp.reshape(_affine(xp, x, w_ih, b_ih), x.shape[:-1] + (3, -1)), axis=-2)
    gh = xp.unstack(xp.reshape(_affine(xp, h, w_hh, b_hh), h.shape[:-1] + (3, -1)), axis=-2)
    r = _sig(xp, gi[0] + gh[0])
    z = _sig(xp, gi[1] + gh[1])
    n = xp.tanh(gi[2] + r * gh[2])
    return (1 - z) * n + z * h


def _lstm_formula(x, h, cs, w_ih, w_hh, b_ih, b_hh):
    """One LSTM step (gates i, f, g, o), torch's formula."""
    xp = x.__array_namespace__()
    g = _affine(xp, x, w_ih, b_ih) + _affine(xp, h, w_hh, b_hh)
    i, f, gg, o = xp.unstack(xp.reshape(g, g.shape[:-1] + (4, -1)), axis=-2)
    c2 = _sig(xp, f) * cs + _sig(xp, i) * xp.tanh(gg)
    return _sig(xp, o) * xp.tanh(c2), c2


def _gmc_formula(m, x, w_z, w_c, b_z, b_c):
    """m_next = (1 - z) m + z c, z = sigmoid(u W_z + b_z), c = tanh(u W_c + b_c)."""
    xp = m.__array_namespace__()
    u = xp.concat([m, x], axis=-1)
    z = _sig(xp, u @ w_z if b_z is None else u @ w_z + b_z)
    cc = xp.tanh(u @ w_c if b_c is None else u @ w_c + b_c)
    return (1 - z) * m + z * cc


def _sig(xp, a):
    return 1 / (1 + xp.exp(-a))


def _cell(c, *args, states=2, weights_from=2, formula=None):
    """Recurrent cells: the batch folded into the cells' own batch axis N (a 1-D input
    of one example is a row of N = n), when the weights are shared by the examples;
    per-example weights (``vmap(grad)`` of a cell): the cell's formula, op by op."""
    if any(c.bd[weights_from:]):
        return c.composite(formula, *args)
    head = [c.lift(a, b) for a, b in zip(args[:states], c.bd)]
    two = any(a is not None and a.ndim == 3 for a in head)
    folded = [None if a is None else (fold(c, a) if two else a) for a in head]
    out = c.f(*folded, *args[states:])
    if not two:
        return out
    if isinstance(out, (tuple, list)):
        return type(out)(unfold(c, o) for o in out)
    return unfold(c, out)


def _gru_sequence(c, x, h0, *weights):
    """x (T, N, in) of each example: the batch folded into N, behind T."""
    if any(c.bd[2:]):
        return c.composite(_gru_steps, x, h0, *weights)
    xp, n = c.xp, c.n
    x, h0 = c.lift(x, c.bd[0]), c.lift(h0, c.bd[1])
    t, big_n = x.shape[1], x.shape[2]
    xs = xp.reshape(xp.moveaxis(x, 0, 1), (t, n * big_n) + tuple(x.shape[3:]))
    out = c.f(xs, fold(c, h0), *weights)
    out = xp.reshape(out, (t, n, big_n) + tuple(out.shape[2:]))
    return xp.moveaxis(out, 1, 0)


def _gru_steps(x, h, *weights):
    xp = x.__array_namespace__()
    states = []
    for t in range(x.shape[0]):
        h = _gru_formula(x[t, ...], h, *weights)
        states.append(h)
    return xp.stack(states, axis=0)


NN_RULES.update({
    # kernels of autodiff/backends that nn registers (their ops act on the trailing axes)
    "pad2d": leading,
    "windows2d": leading,
    "col2im2d": leading,
    # nn.functional (the element-wise nn activations are marked diagonal: their rule is
    # derived from that)
    **{f"nn.{name}": elementwise for name in ("dropout", "scaled_dot_product_attention")},
    "nn.softmax": axis(default=-1, none=FLAT),
    "nn.log_softmax": axis(default=-1, none=FLAT),
    "nn.logsumexp": axis(),
    "nn.linear": _linear,
    "nn.conv2d": _conv,
    "nn.conv_transpose2d": _conv,
    "nn.max_pool2d": _pool,
    "nn.avg_pool2d": _pool,
    "nn.layer_norm": _layer_norm,
    "nn.batch_norm": _batch_norm,
    "nn.group_norm": _group_norm,
    "nn.rms_norm": _rms_norm,
    "nn.embedding": _embedding,
    "nn.cross_entropy": _cross_entropy,
    "nn.mse_loss": _mse_loss,
    "nn.binary_cross_entropy_with_logits": _bce,
    "nn.nll_loss": _nll_loss,
    "nn.cross_entropy_probs": _cross_entropy_probs,
    "nn.l1_loss": _pair_loss,
    "nn.huber_loss": _pair_loss,
    "nn.smooth_l1_loss": _pair_loss,
    "nn.kl_div": _kl_div,
    "nn.binary_cross_entropy": _bce_probs,
    "nn.cosine_similarity": _cosine_similarity,
    "nn.normalize": _normalize,
    "nn.pad": leading,
    "nn.rope": _rope,
    "nn.self_attention_packed": _attention_packed,
    "nn.gru_cell": lambda c, *a: _cell(c, *a, formula=_gru_formula),
    "nn.lstm_cell": lambda c, *a: _cell(c, *a, states=3, weights_from=3, formula=_lstm_formula),
    "nn.gated_memory_cell": lambda c, *a: _cell(c, *a, formula=_gmc_formula),
    "nn.gru_sequence": _gru_sequence,
})  # fmt: skip
