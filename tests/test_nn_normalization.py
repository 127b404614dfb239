"""layer_norm, embedding and dropout against PyTorch (float64) and their conventions."""

import numpy as np
import pytest

import autodiff as ad
from autodiff.nn import functional as F

from .nn_compare import compare

torch = pytest.importorskip("torch", reason="PyTorch comparisons need torch==2.13.0")
TF = torch.nn.functional
RNG = np.random.default_rng(1)

CASES = {}
for _shape, _norm in (((4, 6), (6,)), ((2, 3, 4), (4,)), ((2, 3, 4), (3, 4))):
    _x = RNG.standard_normal(_shape) * 2 + 0.5
    _w, _b = RNG.standard_normal(_norm), RNG.standard_normal(_norm)
    CASES[f"layer_norm {_shape} over {_norm}"] = (
        lambda a, w, b, n=_norm: F.layer_norm(a, n, w, b),
        lambda a, w, b, n=_norm: TF.layer_norm(a, n, w, b),
        [_x, _w, _b],
    )
    CASES[f"layer_norm {_shape} over {_norm}, no affine, eps=0.1"] = (
        lambda a, n=_norm: F.layer_norm(a, n, eps=0.1),
        lambda a, n=_norm: TF.layer_norm(a, n, eps=0.1),
        [_x],
    )
_W = RNG.standard_normal((6, 3))
for _idx, _pad in ((np.array([[1, 1, 5], [0, 1, 2]]), None), (np.array([3, 0, 3, 3, 5]), 3),
                   (np.array([4, 5, 5]), -1)):  # fmt: skip
    CASES[f"embedding {_idx.tolist()} padding_idx={_pad}"] = (
        lambda w, i=_idx, p=_pad: F.embedding(w.__array_namespace__().asarray(i), w, padding_idx=p),
        lambda w, i=_idx, p=_pad: TF.embedding(torch.tensor(i), w, padding_idx=p),
        [_W],
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_as_torch(name):
    ours, theirs, inputs = CASES[name]
    compare(ad.Autodiff(np), ours, theirs, inputs, rtol=1e-12, atol=1e-12)


def test_embedding_errors(xp):
    w = xp.asarray(_W)
    with pytest.raises(IndexError, match="embedding.*out of range"):
        F.embedding(xp.asarray([0, 6]), w)
    with pytest.raises(TypeError, match="embedding.*integers"):
        F.embedding(xp.asarray([0.0, 1.0]), w)
    with pytest.raises(ValueError, match="embedding.*2-D"):
        F.embedding(xp.asarray([0]), xp.asarray(np.ones(3)))


def test_layer_norm_errors(xp):
    x = xp.asarray(np.ones((2, 3)))
    with pytest.raises(ValueError, match="layer_norm.*normalized_shape"):
        F.layer_norm(x, (2,))
    with pytest.raises(ValueError, match="layer_norm.*weight"):
        F.layer_norm(x, (3,), xp.asarray(np.ones(2)))


def test_dropout_statistics_and_gradient(xp):
    x = xp.asarray(np.ones((200, 250)), requires_grad=True)
    y = F.dropout(x, p=0.3, seed=11)
    vals = np.asarray(y.data)
    assert set(np.unique(vals)) <= {0.0, 1 / 0.7}
    assert abs(np.mean(vals == 0.0) - 0.3) < 0.01  # 50,000 draws: 5 standard deviations
    assert abs(vals.mean() - 1.0) < 0.02  # inverted scaling keeps the mean
    xp.sum(y * 2.0).backward()
    np.testing.assert_array_equal(np.asarray(x.grad.data), 2.0 * vals)
    again = F.dropout(x.detach(), p=0.3, seed=11)
    np.testing.assert_array_equal(np.asarray(again.data), vals)  # same seed, same mask
    other = F.dropout(x.detach(), p=0.3, seed=12)
    assert not np.array_equal(np.asarray(other.data), vals)


def test_dropout_edge_cases(xp):
    x = xp.asarray(np.arange(6.0), requires_grad=True)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    np.testing.assert_array_equal(np.asarray(F.dropout(x, 1.0).data), np.zeros(6))
    for p in (-0.1, 1.5):
        with pytest.raises(ValueError, match="dropout"):
            F.dropout(x, p)
