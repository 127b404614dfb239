"""Specs of the extension ops: recurrent and attention."""

from __future__ import annotations

from autodiff.nn import functional as F

from .common import Sample, _in, spec

N, IN, H = 2, 3, 2


def _gru(rng):
    w = [_in(rng, s) for s in ((N, IN), (N, H), (3 * H, IN), (3 * H, H), (3 * H,), (3 * H,))]
    return [
        Sample(
            tuple(w), lambda xp, x, h, a, b, c, d: F.gru_cell(x, h, a, b, c, d), "batched, biases"
        ),
        Sample(tuple(w[:4]), lambda xp, x, h, a, b: F.gru_cell(x, h, a, b), "no biases"),
        Sample(
            (w[0][0], w[1][0], w[2], w[3]),
            lambda xp, x, h, a, b: F.gru_cell(x, h, a, b),
            "unbatched",
        ),
    ]


def _lstm(rng):
    w = [
        _in(rng, s) for s in ((N, IN), (N, H), (N, H), (4 * H, IN), (4 * H, H), (4 * H,), (4 * H,))
    ]
    return [
        Sample(
            tuple(w),
            lambda xp, x, h, c, a, b, d, e: F.lstm_cell(x, (h, c), a, b, d, e),
            "batched, biases",
        ),
        Sample(
            tuple(w[:5]),
            lambda xp, x, h, c, a, b: F.lstm_cell(x, (h, c), a, b)[0],
            "h only, no biases",
        ),
        Sample(
            (w[0][0], w[1][0], w[2][0], w[3], w[4]),
            lambda xp, x, h, c, a, b: F.lstm_cell(x, (h, c), a, b),
            "unbatched",
        ),
    ]


def _gmc(rng):
    M, X = 2, 3
    w = [_in(rng, s) for s in ((N, M), (N, X), (M + X, M), (M + X, M), (M,), (M,))]
    return [
        Sample(
            tuple(w),
            lambda xp, m, x, a, b, c, d: F.gated_memory_cell(m, x, a, b, c, d),
            "batched, biases",
        ),
        Sample(tuple(w[:4]), lambda xp, m, x, a, b: F.gated_memory_cell(m, x, a, b), "no biases"),
        Sample(
            (w[0][0], w[1][0], w[2], w[3]),
            lambda xp, m, x, a, b: F.gated_memory_cell(m, x, a, b),
            "unbatched",
        ),
    ]


spec("nn.gru_cell", _gru)


def _gru_seq(rng):
    w = [_in(rng, s) for s in ((3, N, IN), (N, H), (3 * H, IN), (3 * H, H), (3 * H,), (3 * H,))]
    return [
        Sample(tuple(w), lambda xp, x, h, a, b, c, d: F.gru_sequence(x, h, a, b, c, d),
               "3 steps, biases"),
        Sample(tuple(w[:4]), lambda xp, x, h, a, b: F.gru_sequence(x, h, a, b), "no biases"),
    ]  # fmt: skip


spec("nn.gru_sequence", _gru_seq)
spec("nn.lstm_cell", _lstm)
spec("nn.gated_memory_cell", _gmc)
spec("nn.rope", lambda rng: [
    Sample((_in(rng, (2, 3, 4)),), lambda xp, x: F.rope(x), "3-D, split-half"),
    Sample((_in(rng, (1, 2, 3, 4)),), lambda xp, x: F.rope(x, interleaved=True, base=100.0), "4-D, interleaved"),
    Sample((_in(rng, (3, 4)),), lambda xp, x: F.rope(x, positions=xp.asarray([5, 0, 17])), "given positions"),
])  # fmt: skip


def _sdpa(rng):
    q, k, v = _in(rng, (2, 3, 2)), _in(rng, (2, 4, 2)), _in(rng, (2, 4, 3))
    mask = [[True, False, True, True], [False, True, True, False], [True, True, True, True]]
    return [
        Sample((q, k, v), lambda xp, a, b, c: F.scaled_dot_product_attention(a, b, c), "plain"),
        Sample(
            (q, k, v),
            lambda xp, a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True, scale=0.7),
            "causal, scale",
        ),
        Sample(
            (q, k, v),
            lambda xp, a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=xp.asarray(mask)),
            "boolean mask",
        ),
        Sample(
            (q, k, v, _in(rng, (3, 4))),
            lambda xp, a, b, c, m: F.scaled_dot_product_attention(a, b, c, attn_mask=m),
            "float mask (differentiated)",
        ),
    ]


spec("nn.scaled_dot_product_attention", _sdpa)


def _packed(rng):
    qkv = _in(rng, (2, 3, 12))  # 2 heads of 2 features
    mask = [[True, False, True], [False, True, True], [True, True, True]]
    return [
        Sample((qkv,), lambda xp, a: F.self_attention_packed(a, 2), "2 heads"),
        Sample(
            (qkv,),
            lambda xp, a: F.self_attention_packed(a, 1, is_causal=True, scale=0.7),
            "1 head, causal, scale",
        ),  # fmt: skip
        Sample(
            (qkv,),
            lambda xp, a: F.self_attention_packed(a, 2, attn_mask=xp.asarray(mask)),
            "boolean mask",
        ),  # fmt: skip
        Sample(
            (qkv, _in(rng, (2, 1, 3, 3))),
            lambda xp, a, m: F.self_attention_packed(a, 2, attn_mask=m),
            "float mask per batch (differentiated)",
        ),  # fmt: skip
    ]


spec("nn.self_attention_packed", _packed)
