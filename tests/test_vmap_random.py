"""Dropout inside ``vmap``: each example draws its own mask (torch.func's
``randomness="different"``), batched input or not, through nested vmaps, and
per-example gradients are the masks that the forward used; a seed the user gives
fixes each example's mask, as in a loop."""

import numpy as np
import pytest

import autodiff as ad
import autodiff.nn as nn
import autodiff.nn.functional as F


def _np(a):
    return np.asarray(a.data if hasattr(a, "data") and not isinstance(a, np.ndarray) else a)


def _check_masks(out, x, p):
    """Each entry is 0 or x / (1 - p); each example keeps about 1 - p of its entries
    (4,000 draws: 6 standard deviations is 0.05); no two examples share a mask."""
    out, x = _np(out), _np(x)
    kept = out != 0
    np.testing.assert_allclose(out[kept], (x / (1 - p))[kept], rtol=1e-15)
    frac = kept.reshape(kept.shape[0], -1).mean(axis=1)
    assert np.all(np.abs(frac - (1 - p)) < 0.05), frac
    flat = kept.reshape(kept.shape[0], -1)
    for i in range(len(flat)):
        for j in range(i):
            assert (flat[i] != flat[j]).mean() > 0.3  # independent masks differ in ~1/2


def test_each_example_draws_its_own_mask(xp):
    x = xp.asarray(np.random.default_rng(0).uniform(1, 2, (5, 4000)))
    _check_masks(ad.vmap(lambda r: F.dropout(r, 0.5))(x), x, 0.5)


def test_an_unbatched_input_inside_vmap_gets_a_mask_per_example(xp):
    w = xp.ones(4000, dtype=xp.float64)
    out = ad.vmap(lambda r: r * F.dropout(w, 0.25))(xp.ones((4, 4000), dtype=xp.float64))
    _check_masks(out, xp.ones((4, 4000), dtype=xp.float64), 0.25)


def test_nested_vmaps_draw_a_mask_per_example_of_each(xp):
    x = xp.ones((3, 2, 4000), dtype=xp.float64)
    out = _np(ad.vmap(ad.vmap(lambda r: F.dropout(r, 0.5)))(x))
    _check_masks(out.reshape(6, 4000), np.ones((6, 4000)), 0.5)


def test_per_example_gradients_are_the_forward_masks(xp):
    """The gradient of sum(dropout(x)) is the mask scale, out / x (dropout is linear),
    the output taken from the same call (has_aux)."""
    x = xp.asarray(np.random.default_rng(1).uniform(1, 2, (4, 3000)))

    def loss(r):
        y = F.dropout(r, 0.5)
        return xp.sum(y), y

    g, out = ad.vmap(ad.grad(loss, has_aux=True))(x)
    np.testing.assert_allclose(_np(g), _np(out) / _np(x), rtol=1e-15)
    _check_masks(g, np.ones((4, 3000)), 0.5)


def test_a_given_seed_fixes_each_examples_mask_as_in_a_loop(xp):
    x = xp.asarray(np.random.default_rng(4).uniform(1, 2, (3, 200)))
    out = _np(ad.vmap(lambda r: F.dropout(r, 0.5, seed=11))(x))
    loop = np.stack([_np(F.dropout(x[i, ...], 0.5, seed=11)) for i in range(3)])
    np.testing.assert_array_equal(out, loop)


def test_dropout_module_and_attention_dropout_inside_vmap(xp):
    layer = nn.Dropout(0.5)
    x = xp.asarray(np.random.default_rng(2).uniform(1, 2, (4, 4000)))
    _check_masks(ad.vmap(layer)(x), x, 0.5)
    # per example: 500 queries over two equal keys (heads, seq, dim), so each weight is
    # 1/2 and an output row is the sum of its two kept weights times 1, scaled by 2: 0, 1
    # or 2 (probabilities 1/4, 1/2, 1/4); two examples' rows differ with probability 5/8,
    # so 500 rows each (1,000 draws) tell apart masks drawn per example from one shared
    q = xp.ones((4, 1, 500, 2), dtype=xp.float64)
    kv = xp.ones((4, 1, 2, 2), dtype=xp.float64)
    out = ad.vmap(lambda a, b: F.scaled_dot_product_attention(a, b, b, dropout_p=0.5))(q, kv)
    vals = _np(out)
    assert set(np.unique(vals)) <= {0.0, 1.0, 2.0}
    rows = vals[..., 0].reshape(4, 500)
    for i in range(4):
        assert abs((rows[i] == 1.0).mean() - 0.5) < 0.15  # 6.7 standard deviations
        for j in range(i):
            assert (rows[i] != rows[j]).mean() > 0.4  # 5/8 expected, std 0.022


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_edge_probabilities_inside_vmap(xp, p):
    x = xp.asarray(np.random.default_rng(3).uniform(1, 2, (3, 50)))
    out = _np(ad.vmap(lambda r: F.dropout(r, p))(x))
    np.testing.assert_array_equal(out, _np(x) if p == 0.0 else np.zeros((3, 50)))
