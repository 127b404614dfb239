"""Dropout on the attention weights: ``F.scaled_dot_product_attention(dropout_p=)`` and
``nn.MultiheadAttention(dropout=)`` while training, as torch's (the weights dropped
after the softmax, the kept ones scaled by 1 / (1 - p), the returned weights those
dropped ones). Masks are drawn from a known generator, so outputs are compared with
the formula by hand and gradients with central differences (float64); eval mode
matches torch."""

import math

import numpy as np
import pytest

import autodiff as ad
import autodiff.nn.functional as F
from autodiff import nn
from autodiff.nn.functional.dropout import masks as dropout_masks

RNG = np.random.default_rng(3)


@pytest.fixture
def masks():
    """Every dropout mask from one seeded generator per shape (the same mask at every
    call, so central differences see a fixed function); the masks drawn are kept."""
    drawn = []

    def draw(B, shape, keep, seed):
        m = (np.random.default_rng(17).random(shape) < keep).astype(np.float64)
        drawn.append(m)
        return m

    prev, dropout_masks.draw = dropout_masks.draw, draw
    yield drawn
    dropout_masks.draw = prev


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _np(t):
    return np.asarray(t.data if hasattr(t, "data") else t)


@pytest.mark.parametrize("is_causal", [False, True])
def test_sdpa_dropout_is_the_formula_and_its_gradient_is_central_differences(xp, masks, is_causal):
    q, k = RNG.standard_normal((2, 3, 4, 5)), RNG.standard_normal((2, 3, 4, 5))
    v = RNG.standard_normal((2, 3, 4, 6))
    p = 0.4
    out = F.scaled_dot_product_attention(xp.asarray(q), xp.asarray(k), xp.asarray(v),
                                         dropout_p=p, is_causal=is_causal)  # fmt: skip
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(5)
    if is_causal:
        s = np.where(np.tril(np.ones((4, 4), bool)), s, -np.inf)
    keep = masks[0]
    assert keep.shape == (2, 3, 4, 4) and 0 < keep.mean() < 1
    np.testing.assert_allclose(_np(out), _softmax(s) * keep / (1 - p) @ v, rtol=1e-12, atol=1e-13)

    u = RNG.standard_normal(out.shape)

    def f(q, k, v):
        o = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=is_causal)
        return xp.sum(o * xp.asarray(u))

    grads = ad.grad(f, argnums=(0, 1, 2))(xp.asarray(q), xp.asarray(k), xp.asarray(v))
    for i, g in enumerate(grads):
        args = [q, k, v]
        num = np.zeros_like(args[i])
        for idx in np.ndindex(args[i].shape):
            hi, lo = [a.copy() for a in args], [a.copy() for a in args]
            hi[i][idx] += 1e-6
            lo[i][idx] -= 1e-6
            fh = float(f(*(xp.asarray(a) for a in hi)))
            fl = float(f(*(xp.asarray(a) for a in lo)))
            num[idx] = (fh - fl) / 2e-6
        np.testing.assert_allclose(_np(g), num, rtol=1e-6, atol=1e-8, err_msg=f"d arg {i}")


def test_sdpa_dropout_one_drops_everything(xp):
    q = xp.asarray(RNG.standard_normal((2, 4, 3)))
    out = F.scaled_dot_product_attention(q, q, q, dropout_p=1.0)
    np.testing.assert_array_equal(_np(out), 0.0)


def _mha_by_hand(m, x, keep, p):
    """torch's MultiheadAttention (batch_first, self-attention) by hand with ``keep``."""
    E, h = m.embed_dim, m.num_heads
    d = E // h
    w, b = _np(m.in_proj_weight), _np(m.in_proj_bias)
    qkv = x @ w.T + b
    n, L = x.shape[:2]
    q, k, v = (np.transpose(qkv[..., i * E : (i + 1) * E].reshape(n, L, h, d), (0, 2, 1, 3))
               for i in range(3))  # fmt: skip
    a = _softmax(q @ np.swapaxes(k, -1, -2) / math.sqrt(d)) * keep / (1 - p)
    o = np.transpose(a @ v, (0, 2, 1, 3)).reshape(n, L, E)
    return o @ _np(m.out_proj.weight).T + _np(m.out_proj.bias), a


@pytest.mark.parametrize("average", [True, False])
def test_multihead_dropout_while_training_is_torchs_formula(xp, masks, average):
    p = 0.3
    m = nn.MultiheadAttention(8, 2, dropout=p, batch_first=True, xp=xp, dtype=xp.float64)
    assert m.dropout == p
    x = RNG.standard_normal((3, 5, 8))
    out, weights = m(xp.asarray(x), xp.asarray(x), xp.asarray(x),
                     average_attn_weights=average)  # fmt: skip
    ref, a = _mha_by_hand(m, x, masks[0], p)
    np.testing.assert_allclose(_np(out), ref, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(_np(weights), a.mean(axis=1) if average else a, rtol=1e-12,
                               atol=1e-14)  # fmt: skip
    # need_weights=False takes the same (dropped) path
    out2, none = m(xp.asarray(x), xp.asarray(x), xp.asarray(x), need_weights=False)
    assert none is None
    np.testing.assert_allclose(_np(out2), ref, rtol=1e-12, atol=1e-13)


def test_multihead_dropout_eval_is_torchs(xp):
    torch = pytest.importorskip("torch", reason="the torch comparison needs torch==2.13.0")
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(8, 2, dropout=0.3, batch_first=True).double().eval()
    ours = nn.MultiheadAttention(8, 2, dropout=0.3, batch_first=True, xp=xp, dtype=xp.float64)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    ours.eval()
    x = RNG.standard_normal((3, 5, 8))
    ref, ref_w = theirs(*[torch.tensor(x)] * 3)
    out, w = ours(*[xp.asarray(x)] * 3)
    np.testing.assert_allclose(_np(out), ref.detach().numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(_np(w), ref_w.detach().numpy(), rtol=1e-12, atol=1e-13)


def test_multihead_dropout_draws_from_its_generator(xp):
    """The module's generator makes the masks reproducible; eval draws none."""
    x = xp.asarray(RNG.standard_normal((2, 4, 8)))

    def run(seed):
        m = nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True, xp=xp, dtype=xp.float64,
                                  generator=np.random.default_rng(seed))  # fmt: skip
        return _np(m(x, x, x)[0])

    np.testing.assert_array_equal(run(1), run(1))
    assert not np.allclose(run(1), run(2))
