"""Rotary position embedding and scaled dot-product attention, one registered op
each with a fused rule."""

from __future__ import annotations

import math

from ... import checks
from ...backends import device_of
from ...engine.namespace import recorder_of
from ...engine.registry import defop
from ...rules.batch_rules import elementwise, fold, unfold
from .activations import _softmax, _softmax_raw
from .activations import softmax as _softmax_op
from .dropout import _dropout

__all__ = ["rope", "scaled_dot_product_attention", "self_attention_packed"]

CH = "nn.attention"


# -- rotary position embedding ----------------------------------------------------------
def _angles(xp, x, positions, base):
    """cos and sin of positions * base**(-2i/dim), shape (..., seq, dim/2)."""
    half = x.shape[-1] // 2
    seq = x.shape[-2]
    if positions is None:
        positions = xp.arange(seq, device=device_of(x))
    pos = xp.astype(xp.stop_gradient(positions), x.dtype)
    inv = base ** (-2.0 * xp.astype(xp.arange(half, device=device_of(x)), x.dtype) / x.shape[-1])
    theta = xp.expand_dims(pos, axis=-1) * inv
    return xp.cos(theta), xp.sin(theta)


def _rotate(xp, x, cos, sin, interleaved):
    """Turn each feature pair by the angle whose cos and sin are given."""
    half = x.shape[-1] // 2
    if interleaved:
        pairs = xp.reshape(x, tuple(x.shape[:-1]) + (half, 2))
        a, b = pairs[..., 0], pairs[..., 1]
        out = xp.stack([a * cos - b * sin, a * sin + b * cos], axis=-1)
        return xp.reshape(out, x.shape)
    a, b = x[..., :half], x[..., half:]
    return xp.concat([a * cos - b * sin, a * sin + b * cos], axis=-1)


def _rope_rule(xp, g, ans, x, positions, *, base, interleaved):
    cos, sin = _angles(xp, x, positions, base)
    return _rotate(xp, g, cos, -sin, interleaved)  # the inverse rotation


def _rope_batch(c, x, positions, **kwargs):
    """The batch axis is one more leading axis of x; batched positions broadcast
    against one example's (..., seq)."""
    bx, bp = c.bd
    x = c.lift(x, bx)
    if bp:
        positions = c.pad(positions, x.ndim - 2)
    return c.f(x, positions, **kwargs)


defop(
    "nn.rope",
    _rope_rule,
    None,
    chapter=CH,
    impl=lambda B: (
        lambda x, positions, *, base, interleaved: _rotate(
            B, x, *_angles(B, x, positions, base), interleaved
        )
    ),
    saves=(1,),
    linear=True,  # a rotation of x: the tangent turns alike
    batch=_rope_batch,
    doc="rotary position embedding; its VJP is the inverse rotation",
)


def rope(x, positions=None, base=10000.0, interleaved=False):
    """Rotary position embedding over the last axis of ``x`` (..., seq, dim), dim even.

    Pair i turns by ``positions * base**(-2i/dim)`` (positions default to
    ``arange(seq)``; any integers, broadcast against (..., seq)). Split-half pairs
    feature i with i + dim/2 (rotate-half); ``interleaved=True`` pairs 2i with 2i+1.
    ``base`` > 0.
    """
    checks.number("rope", "base", base, low=0, open_low=True)
    checks.flag("rope", "interleaved", interleaved)
    return _rope(x, positions, float(base), bool(interleaved))


def _rope(x, positions, base, interleaved):
    """``rope`` of checked arguments (a float, a bool): the shapes are checked here."""
    recorder_of(x, positions)  # a non-array named first
    if x.ndim < 2 or x.shape[-1] % 2:
        raise ValueError(f"rope: x must be (..., seq, dim) with an even dim, got {tuple(x.shape)}")
    rec = recorder_of(x)
    if positions is not None:
        positions = rec.namespace.asarray(positions)
        if positions.shape[-1] != x.shape[-2]:
            raise ValueError(
                f"rope: {positions.shape[-1]} positions for a sequence of {x.shape[-2]}"
            )
    return rec.xp.nn.rope(x, positions, base=base, interleaved=interleaved)


# -- scaled dot-product attention ------------------------------------------------------------
def _scores(xp, q, k, mask, is_causal, scale):
    s = q @ xp.matrix_transpose(k)
    s *= scale  # s is ours alone
    if is_causal:
        L, S = s.shape[-2], s.shape[-1]
        causal = xp.tril(xp.ones((L, S), dtype=xp.bool, device=device_of(s)))
        s = xp.where(causal, s, xp.full_like(s, -math.inf))
    if mask is not None:
        if mask.dtype == xp.bool:
            s = xp.where(mask, s, xp.full_like(s, -math.inf))
        else:
            s = s + mask
    return s


def _sdpa(xp, q, k, v, mask, is_causal, scale):
    """The output and, as the residual for the rule, the attention weights."""
    a = _softmax_raw(xp, _scores(xp, q, k, mask, is_causal, scale), -1, overwrite=True)
    return a @ v, a


def _sdpa_weights(xp, q, k, v, mask, *, is_causal, scale):
    """The attention weights, recomputed from the inputs (the residual, under create_graph)."""
    return _softmax(xp, _scores(xp, q, k, mask, is_causal, scale), -1)


def _scores_grad(xp, g, a, v, mask, scale):
    """The gradient of ``q k^T`` (the scores before scale and mask), from the output's
    cotangent ``g`` and the weights ``a``, and the float mask's (None for a boolean
    mask or none)."""
    ds = g @ xp.matrix_transpose(v)  # d a, then d scores in place (ours alone)
    ds -= xp.sum(ds * a, axis=-1, keepdims=True)
    ds *= a
    dmask = None if mask is None or mask.dtype == xp.bool else xp.asarray(ds, copy=True)
    ds *= scale
    return ds, dmask


def _sdpa_rule(xp, g, a, q, k, v, mask, *, is_causal, scale):
    ds, dmask = _scores_grad(xp, g, a, v, mask, scale)
    dq = ds @ k
    dk = xp.matrix_transpose(ds) @ q
    dv = xp.matrix_transpose(a) @ g
    return dq, dk, dv, dmask


defop(
    "nn.scaled_dot_product_attention",
    vjp=_sdpa_rule,
    chapter=CH,
    residuals=_sdpa_weights,
    impl=lambda B: (
        lambda q, k, v, mask, *, is_causal, scale: _sdpa(B, q, k, v, mask, is_causal, scale)
    ),
    batch=elementwise,  # the op broadcasts its leading axes: the batch axis is one more
    doc="softmax(q k^T * scale + mask) v",
)


# -- self-attention on packed q|k|v -----------------------------------------------------------
def _split_heads(xp, qkv, heads):
    """q, k, v (N, heads, L, d) as views of the packed (N, L, 3 * heads * d) projection."""
    n, length = qkv.shape[0], qkv.shape[1]
    d = qkv.shape[-1] // (3 * heads)
    packed = xp.reshape(qkv, (n, length, 3, heads, d))
    return [xp.permute_dims(packed[:, :, i, ...], (0, 2, 1, 3)) for i in range(3)]


def _sdpa_packed(B, qkv, mask, *, heads, is_causal, scale):
    """The heads' outputs merged back to (N, L, heads * d), and the attention weights."""
    out, a = _sdpa(B, *_split_heads(B, qkv, heads), mask, is_causal, scale)
    return B.reshape(B.permute_dims(out, (0, 2, 1, 3)), tuple(qkv.shape[:2]) + (-1,)), a


def _sdpa_packed_weights(xp, qkv, mask, *, heads, is_causal, scale):
    q, k, v = _split_heads(xp, qkv, heads)
    return _sdpa_weights(xp, q, k, v, mask, is_causal=is_causal, scale=scale)


def _sdpa_packed_rule(xp, g, a, qkv, mask, *, heads, is_causal, scale):
    q, k, v = _split_heads(xp, qkv, heads)
    n, length, d = g.shape[0], g.shape[1], q.shape[-1]
    go = xp.permute_dims(xp.reshape(g, (n, length, heads, d)), (0, 2, 1, 3))
    ds, dmask = _scores_grad(xp, go, a, v, mask, scale)
    # dq, dk, dv (N, heads, L, d) laid out as the packed (N, L, 3, heads, d): on NumPy and
    # CuPy each product is computed straight into its place
    pairs = [(ds, k), (xp.matrix_transpose(ds), q), (xp.matrix_transpose(a), go)]
    dqkv = xp.matmul_stack(pairs, axis=2, perm=(0, 2, 1, 3))
    return xp.reshape(dqkv, tuple(qkv.shape)), dmask


def _self_attention_packed_batch(c, qkv, mask, **kwargs):
    """The batch folded into N; a batched mask, or a 4-D one (per N), broadcast to
    (n * N, heads, L, L)."""
    xp, n = c.xp, c.n
    bq, bm = c.bd
    qkv = c.lift(qkv, bq)
    if mask is not None and (bm or mask.ndim >= 4):
        big_n, length = qkv.shape[1], qkv.shape[2]
        full = (n, big_n, kwargs["heads"], length, length)
        m = c.pad(mask, 4) if bm else xp.expand_dims(mask, axis=0)
        mask = xp.reshape(xp.broadcast_to(m, full), (n * big_n,) + full[2:])
    return unfold(c, c.f(fold(c, qkv), mask, **kwargs))


defop(
    "nn.self_attention_packed",
    vjp=_sdpa_packed_rule,
    chapter=CH,
    residuals=_sdpa_packed_weights,
    impl=lambda B: (
        lambda qkv, mask, *, heads, is_causal, scale: _sdpa_packed(
            B, qkv, mask, heads=heads, is_causal=is_causal, scale=scale
        )
    ),
    batch=_self_attention_packed_batch,
    doc="scaled dot-product self-attention of a packed (N, L, 3E) q|k|v projection, "
    "heads merged: one node where split, attend and merge are ten",
)


def self_attention_packed(qkv, heads, attn_mask=None, is_causal=False, scale=None):
    """Self-attention of ``qkv`` (N, L, 3 * heads * d), q | k | v packed along the last
    axis as ``nn.MultiheadAttention``'s in-projection makes them: the heads' outputs
    merged to (N, L, heads * d). ``attn_mask`` as in ``scaled_dot_product_attention``
    (True = attend, or added), broadcast against (N, heads, L, L)."""
    recorder_of(qkv)  # a non-array named first
    name = "self_attention_packed"
    checks.integer(name, "heads", heads, low=1)
    checks.flag(name, "is_causal", is_causal)
    if scale is not None:
        checks.number(name, "scale", scale)
    return _self_attention_packed(qkv, int(heads), attn_mask, bool(is_causal), scale)


def _self_attention_packed(qkv, heads, attn_mask, is_causal, scale):
    """``self_attention_packed`` of checked arguments: the shapes are checked here."""
    if qkv.ndim != 3 or qkv.shape[-1] % (3 * heads):
        raise ValueError(
            f"self_attention_packed: qkv must be (N, L, 3 * heads * d) with heads={heads}, "
            f"got shape {tuple(qkv.shape)}"
        )
    d = qkv.shape[-1] // (3 * heads)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    rec = recorder_of(qkv)
    _check_mask("self_attention_packed", attn_mask, rec)
    nn = rec.xp.nn
    return nn.self_attention_packed(qkv, attn_mask, heads=heads, is_causal=is_causal,
                                    scale=scale)  # fmt: skip


def _check_mask(name, mask, rec):
    """A mask is boolean (True = attend) or floating (added), as torch takes: an integer
    0/1 mask would be added to the scores, silently."""
    if mask is not None and not rec.backend.isdtype(mask.dtype, ("bool", "real floating")):
        raise TypeError(
            f"{name}: attn_mask must be boolean (True = attend) or floating (added to the "
            f"scores), got dtype {mask.dtype}"
        )


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):  # fmt: skip
    """softmax(q k^T * scale + mask) v, as torch: ``attn_mask`` boolean (True = attend)
    or float (added); ``is_causal`` masks j > i; ``scale`` defaults to 1/sqrt(E).
    A query row that may attend to nothing gives zeros (torch gives NaN)."""
    name = "scaled_dot_product_attention"
    checks.number(name, "dropout_p", dropout_p, 0.0, 1.0)
    checks.flag(name, "is_causal", is_causal)
    if scale is not None:
        checks.number(name, "scale", scale)
    return _sdpa_checked(query, key, value, attn_mask, bool(is_causal), scale, float(dropout_p))


def _sdpa_checked(query, key, value, attn_mask, is_causal, scale, dropout_p=0.0, seed=None):
    """``scaled_dot_product_attention`` of checked arguments: the shapes are checked here.
    With ``dropout_p`` the weights are dropped (``_attention_dropout``)."""
    recorder_of(query, key, value, attn_mask)  # a non-array named first
    if query.ndim < 2 or key.ndim != query.ndim or value.ndim != query.ndim:
        raise ValueError(
            "scaled_dot_product_attention: query, key and value must have the same number "
            f"of axes (..., L, E), got {tuple(query.shape)}, {tuple(key.shape)}, "
            f"{tuple(value.shape)}"
        )
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ValueError(
            "scaled_dot_product_attention: query (..., L, E), key (..., S, E) and value "
            f"(..., S, Ev) don't fit: {tuple(query.shape)}, {tuple(key.shape)}, "
            f"{tuple(value.shape)}"
        )
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    rec = recorder_of(query, key, value)
    _check_mask("scaled_dot_product_attention", attn_mask, rec)
    if dropout_p:
        return _attention_dropout(query, key, value, attn_mask, is_causal, scale, dropout_p,
                                  seed)[0]  # fmt: skip
    nn = rec.xp.nn
    return nn.scaled_dot_product_attention(query, key, value, attn_mask, is_causal=is_causal,
                                           scale=scale)  # fmt: skip


def _attention_dropout(query, key, value, mask, is_causal, scale, p, seed=None):
    """(out, weights): softmax(q k^T * scale + mask) with dropout ``p`` on the weights
    (as torch: after the softmax, the kept ones scaled by 1 / (1 - p)), then @ v.

    Recorded op by op: the fused attention op keeps no mask. ``seed`` as ``F.dropout``'s."""
    xp = recorder_of(query, key, value).xp
    a = _softmax_op(_scores(xp, query, key, mask, is_causal, scale), axis=-1)
    a = _dropout(a, p, seed)
    return a @ value, a
