"""``MultiheadAttention`` as ``torch.nn.MultiheadAttention`` (same parameters and
mask conventions), with optional rotary position embedding of queries and keys."""

from __future__ import annotations

import math

from ... import checks
from ...backends import device_of
from .. import init
from ..functional.activations import softmax
from ..functional.attention import (
    _attention_dropout,
    _rope,
    _scores,
    _sdpa_checked,
    _self_attention_packed,
    _split_heads,
)
from ..functional.linear import linear
from .linear import Linear
from .module import Module, factory, flags, parameter, sizes

__all__ = ["MultiheadAttention"]


class MultiheadAttention(Module):
    """Attention with ``num_heads`` heads: ``out, weights = mha(query, key, value)``.

    As torch: inputs are (L, N, E), or (N, L, E) with ``batch_first=True``, or
    unbatched (L, E); parameters ``in_proj_weight`` (3E, E, Xavier-uniform),
    ``in_proj_bias`` (zeros) and ``out_proj`` (Linear, zero bias). Masks follow
    torch's module, not ``F.scaled_dot_product_attention``: a boolean ``attn_mask``
    (L, S) or (N*heads, L, S) and ``key_padding_mask`` (N, S) mark with True the
    positions that may *not* be attended; float masks are added to the scores.
    ``rope=True`` turns queries and keys by their positions (``F.rope``) per head.
    With ``need_weights`` (default True, as torch) the attention weights are also
    returned, averaged over heads unless ``average_attn_weights=False``; pass
    ``need_weights=False`` for speed (one fused attention op, no weights).
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, batch_first=False, *,
                 rope=False, rope_base=10000.0, xp=None, dtype=None, device=None,
                 generator=None):  # fmt: skip
        super().__init__()
        name = "MultiheadAttention"
        sizes(name, ("embed_dim", "num_heads"), embed_dim=embed_dim, num_heads=num_heads)
        checks.number(name, "dropout", dropout, 0.0, 1.0)
        flags(name, bias=bias, batch_first=batch_first, rope=rope)
        checks.number(name, "rope_base", rope_base, low=0, open_low=True)
        if embed_dim % num_heads:
            raise ValueError(
                f"MultiheadAttention: embed_dim={embed_dim} is not divisible by "
                f"num_heads={num_heads}"
            )
        head_dim = embed_dim // num_heads
        if rope and head_dim % 2:
            raise ValueError(f"MultiheadAttention: rope needs an even head dim, got {head_dim}")
        xp, dtype, device = factory(xp, dtype, device, name, generator)
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, head_dim
        self.batch_first, self.rope, self.rope_base = batch_first, rope, float(rope_base)
        # torch's attribute: dropout on the attention weights while training
        self.dropout, self._generator = float(dropout), generator
        w = parameter(xp, (3 * embed_dim, embed_dim), dtype, device)
        self.in_proj_weight = init.xavier_uniform_(w, generator=generator)
        self.in_proj_bias = parameter(xp, (3 * embed_dim,), dtype, device) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias, xp=xp, dtype=dtype, device=device,
                               generator=generator)  # fmt: skip
        if bias:
            init.zeros_(self.out_proj.bias)

    def _project(self, xp, query, key, value):
        # One F.linear per projection, on slices of the packed weight: each is one
        # BLAS call with its own weight gradient (slicing a packed q|k|v output
        # instead costs full-size zero buffers in the backward pass).
        w, b, E = self.in_proj_weight, self.in_proj_bias, self.embed_dim
        return [
            linear(x, w[i * E : (i + 1) * E, :], None if b is None else b[i * E : (i + 1) * E])
            for i, x in enumerate((query, key, value))
        ]

    def _mask(self, xp, attn_mask, key_padding_mask, n):
        """The mask for F.scaled_dot_product_attention (True = attend, or additive)."""
        masks = []
        if attn_mask is not None:
            m = attn_mask
            if m.ndim == 3:
                m = xp.reshape(m, (n, self.num_heads) + tuple(m.shape[1:]))
            masks.append(m)
        if key_padding_mask is not None:
            m = key_padding_mask
            masks.append(xp.reshape(m, (m.shape[0], 1, 1, m.shape[-1])))
        if not masks:
            return None
        if all(m.dtype == xp.bool for m in masks):
            allowed = xp.logical_not(masks[0])
            for m in masks[1:]:
                allowed = xp.logical_and(allowed, xp.logical_not(m))
            return allowed
        total = 0.0
        for m in masks:
            if m.dtype == xp.bool:
                w = self.in_proj_weight
                m = xp.where(
                    m,
                    xp.asarray(-math.inf, dtype=w.dtype, device=device_of(w)),
                    xp.asarray(0.0, dtype=w.dtype, device=device_of(w)),
                )
            total = total + m
        return total

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):  # fmt: skip
        name = "MultiheadAttention"
        need_weights = checks.flag(name, "need_weights", need_weights)
        average_attn_weights = checks.flag(name, "average_attn_weights", average_attn_weights)
        is_causal = checks.flag(name, "is_causal", is_causal)
        xp = self.in_proj_weight.__array_namespace__()
        E, h, d = self.embed_dim, self.num_heads, self.head_dim
        if query.shape[-1] != E or key.shape[-1] != E or value.shape[-1] != E:
            raise ValueError(
                f"MultiheadAttention: query, key and value must end with embed_dim={E}, got "
                f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
            )
        unbatched = query.ndim == 2
        same = query is key and key is value
        if unbatched:
            query, key, value = (xp.expand_dims(t, axis=0) for t in (query, key, value))
        elif not self.batch_first:
            query, key, value = (xp.permute_dims(t, (1, 0, 2)) for t in (query, key, value))
        if same:
            key = value = query
        n, L, S = query.shape[0], query.shape[1], key.shape[1]
        if key_padding_mask is not None and unbatched:
            key_padding_mask = xp.expand_dims(key_padding_mask, axis=0)
        mask = self._mask(xp, attn_mask, key_padding_mask, n)
        p = self.dropout if self.training else 0.0
        if same and not self.rope and not p:
            # Self-attention: one matmul for q, k and v, and one op that splits the
            # heads, attends and merges them (its rule stacks dq, dk, dv straight into
            # the matmul's layout).
            qkv = linear(query, self.in_proj_weight, self.in_proj_bias)
            out = _self_attention_packed(qkv, h, mask, is_causal, None)
            return self._finish(xp, out, qkv, mask, is_causal, need_weights,
                                average_attn_weights, unbatched)  # fmt: skip
        if same:
            qkv = linear(query, self.in_proj_weight, self.in_proj_bias)
            q, k, v = _split_heads(xp, qkv, h)
        else:
            q, k, v = self._project(xp, query, key, value)
            q = xp.permute_dims(xp.reshape(q, (n, L, h, d)), (0, 2, 1, 3))
            k = xp.permute_dims(xp.reshape(k, (n, S, h, d)), (0, 2, 1, 3))
            v = xp.permute_dims(xp.reshape(v, (n, S, h, d)), (0, 2, 1, 3))
        if self.rope:
            q = _rope(q, None, self.rope_base, False)
            k = _rope(k, None, self.rope_base, False)
        weights = None
        if p:  # the weights dropped, as torch's (and returned after the dropout)
            seed = init.next_seed(self, "_generator")
            out, weights = _attention_dropout(q, k, v, mask, is_causal, 1 / math.sqrt(d), p,
                                              seed)  # fmt: skip
        else:
            out = _sdpa_checked(q, k, v, mask, is_causal, None)
        out = xp.reshape(xp.permute_dims(out, (0, 2, 1, 3)), (n, L, E))
        return self._finish(xp, out, (q, k), mask, is_causal, need_weights,
                            average_attn_weights, unbatched, weights)  # fmt: skip

    def _finish(self, xp, out, qk, mask, is_causal, need_weights, average, unbatched,
                weights=None):  # fmt: skip
        """The output projection, the weights if asked (``qk``: (q, k), or the packed
        q|k|v; ``weights`` when already computed), and the caller's layout."""
        out = self.out_proj(out)
        if not need_weights:
            weights = None
        else:
            if weights is None:
                q, k = qk[:2] if isinstance(qk, tuple) else _split_heads(xp, qk, self.num_heads)[:2]
                scale = 1 / math.sqrt(self.head_dim)
                weights = softmax(_scores(xp, q, k, mask, is_causal, scale), axis=-1)
            if average:
                weights = xp.mean(weights, axis=1)
            if unbatched:
                weights = weights[0, ...]
        if unbatched:
            out = out[0, ...]
        elif not self.batch_first:
            out = xp.permute_dims(out, (1, 0, 2))
        return out, weights

    def extra_repr(self):
        s = f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"
        if self.batch_first:
            s += ", batch_first=True"
        return s + (", rope=True" if self.rope else "")
