"""Recurrent cells, rope and attention against PyTorch (float64), NumPy formulas
and their conventions."""

import numpy as np
import pytest

import autodiff as ad
from autodiff.nn import functional as F

from .nn_compare import compare

torch = pytest.importorskip("torch", reason="PyTorch comparisons need torch==2.13.0")
TF = torch.nn.functional
RNG = np.random.default_rng(2)
N, IN, H = 3, 4, 5


def _r(*shape):
    return RNG.standard_normal(shape)


CASES = {
    "gru_cell batched": (F.gru_cell, torch.gru_cell,
                         [_r(N, IN), _r(N, H), _r(3 * H, IN), _r(3 * H, H), _r(3 * H), _r(3 * H)]),
    "gru_cell no biases": (lambda x, h, a, b: F.gru_cell(x, h, a, b),
                           lambda x, h, a, b: torch.gru_cell(x, h, a, b),
                           [_r(N, IN), _r(N, H), _r(3 * H, IN), _r(3 * H, H)]),
    "lstm_cell batched": (lambda x, h, c, *w: F.lstm_cell(x, (h, c), *w),
                          lambda x, h, c, *w: torch.lstm_cell(x, (h, c), *w),
                          [_r(N, IN), _r(N, H), _r(N, H), _r(4 * H, IN), _r(4 * H, H), _r(4 * H),
                           _r(4 * H)]),
    "lstm_cell no biases": (lambda x, h, c, a, b: F.lstm_cell(x, (h, c), a, b),
                            lambda x, h, c, a, b: torch.lstm_cell(x, (h, c), a, b),
                            [_r(N, IN), _r(N, H), _r(N, H), _r(4 * H, IN), _r(4 * H, H)]),
}  # fmt: skip
_Q, _K, _V = _r(2, 3, 4), _r(2, 5, 4), _r(2, 5, 6)
_Q4, _K4, _V4 = _r(2, 2, 3, 4), _r(2, 2, 5, 4), _r(2, 2, 5, 6)
_BOOL = RNG.random((3, 5)) > 0.3
_FLOAT = _r(3, 5)


def _ours_sdpa(mask, causal, scale):
    def f(a, b, c):
        m = None if mask is None else a.__array_namespace__().asarray(mask)
        return F.scaled_dot_product_attention(a, b, c, attn_mask=m, is_causal=causal, scale=scale)

    return f


def _torch_sdpa(mask, causal, scale):
    def f(a, b, c):
        m = None if mask is None else torch.tensor(mask)
        return TF.scaled_dot_product_attention(a, b, c, attn_mask=m, is_causal=causal, scale=scale)

    return f


# torch refuses a mask together with is_causal; autodiff applies both (not compared).
for _label, _mask, _causal in (
    ("no mask", None, False),
    ("causal", None, True),
    ("bool mask", _BOOL, False),
    ("float mask", _FLOAT, False),
):
    for _scale in (None, 0.3):
        for _d, _qkv in (("3-D", (_Q, _K, _V)), ("4-D", (_Q4, _K4, _V4))):
            CASES[f"sdpa {_d} {_label} scale={_scale}"] = (
                _ours_sdpa(_mask, _causal, _scale), _torch_sdpa(_mask, _causal, _scale), list(_qkv)
            )  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_as_torch(name):
    ours, theirs, inputs = CASES[name]
    compare(ad.Autodiff(np), ours, theirs, inputs, rtol=1e-11, atol=1e-12)


def _rope_reference(x, positions, base, interleaved):
    dim = x.shape[-1]
    half = dim // 2
    theta = positions[:, None] * base ** (-2.0 * np.arange(half) / dim)
    cos, sin = np.cos(theta), np.sin(theta)
    out = x.copy()
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
        out[..., 0::2], out[..., 1::2] = a * cos - b * sin, a * sin + b * cos
    else:
        a, b = x[..., :half], x[..., half:]
        out[..., :half], out[..., half:] = a * cos - b * sin, a * sin + b * cos
    return out


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("shape", [(4, 6), (2, 4, 6), (2, 3, 4, 6)])
def test_rope_formula_inverse_and_norm(xp, shape, interleaved):
    x = _r(*shape)
    pos = np.array([3, 0, 7, 11])
    t = xp.asarray(x, requires_grad=True)
    out = F.rope(t, positions=xp.asarray(pos), base=500.0, interleaved=interleaved)
    np.testing.assert_allclose(np.asarray(out.data), _rope_reference(x, pos, 500.0, interleaved),
                               rtol=1e-12, atol=1e-12)  # fmt: skip
    np.testing.assert_allclose(np.linalg.norm(np.asarray(out.data), axis=-1),
                               np.linalg.norm(x, axis=-1))  # fmt: skip
    # The VJP is the inverse rotation: pulling back the output itself gives x.
    xp.sum(out * out.detach()).backward()
    np.testing.assert_allclose(np.asarray(t.grad.data), x, rtol=1e-12, atol=1e-12)


def test_rope_default_positions_and_errors(xp):
    x = _r(5, 4)
    out = F.rope(xp.asarray(x))
    np.testing.assert_allclose(np.asarray(out.data), _rope_reference(x, np.arange(5.0), 1e4, False))
    with pytest.raises(ValueError, match="rope.*even"):
        F.rope(xp.asarray(_r(5, 3)))
    with pytest.raises(ValueError, match="rope.*positions"):
        F.rope(xp.asarray(x), positions=xp.asarray([0, 1]))


def test_gated_memory_cell_formula_and_bounded_rollout(xp):
    M, X = 4, 3
    m, x = np.tanh(_r(2, M)), _r(2, X)
    wz, wc, bz, bc = _r(M + X, M) * 3, _r(M + X, M) * 3, _r(M), _r(M)
    out = F.gated_memory_cell(*(xp.asarray(a) for a in (m, x, wz, wc, bz, bc)))
    u = np.concatenate([m, x], axis=-1)
    z = 1 / (1 + np.exp(-(u @ wz + bz)))
    expected = (1 - z) * m + z * np.tanh(u @ wc + bc)
    np.testing.assert_allclose(np.asarray(out.data), expected, rtol=1e-12)
    # 500-step free rollout (its own output fed back), no clamp: stays in [-1, 1].
    state = xp.asarray(m)
    ws = [xp.asarray(a) for a in (wz, wc, bz, bc)]
    for _ in range(500):
        state = F.gated_memory_cell(state, xp.asarray(x), *ws)
        x = np.tanh(_r(2, X) * 5)
    assert np.max(np.abs(np.asarray(state.data))) <= 1.0


def test_bad_shapes_name_the_op(xp):
    x, h = xp.asarray(_r(N, IN)), xp.asarray(_r(N, H))
    with pytest.raises(ValueError, match=r"gru_cell: w_ih has shape \(5, 4\), expected \(15, 4\)"):
        F.gru_cell(x, h, xp.asarray(_r(H, IN)), xp.asarray(_r(3 * H, H)))
    with pytest.raises(ValueError, match="lstm_cell: w_hh"):
        F.lstm_cell(x, (h, h), xp.asarray(_r(4 * H, IN)), xp.asarray(_r(4 * H, IN)))
    with pytest.raises(ValueError, match="gated_memory_cell: w_z"):
        F.gated_memory_cell(h, x, xp.asarray(_r(H, H)), xp.asarray(_r(H + IN, H)))
    with pytest.raises(ValueError, match="scaled_dot_product_attention"):
        F.scaled_dot_product_attention(xp.asarray(_Q), xp.asarray(_r(2, 5, 3)), xp.asarray(_V))


def test_attention_row_that_attends_to_nothing_gives_zeros(xp):
    mask = np.ones((3, 5), dtype=bool)
    mask[1] = False
    q, k, v = (xp.asarray(a, requires_grad=True) for a in (_Q, _K, _V))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=xp.asarray(mask))
    assert np.all(np.asarray(out.data)[:, 1] == 0.0)
    xp.sum(out).backward()
    assert all(np.all(np.isfinite(np.asarray(t.grad.data))) for t in (q, k, v))
