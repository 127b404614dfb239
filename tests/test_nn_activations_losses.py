"""Activations and the softmax family against PyTorch (float64) and formulas."""

import math

import numpy as np
import pytest

import autodiff as ad
from autodiff.engine.namespace import recorder_of
from autodiff.nn import functional as F
from autodiff.nn.functional.activations import _erf

from .nn_compare import compare

torch = pytest.importorskip("torch", reason="PyTorch comparisons need torch==2.13.0")
TF = torch.nn.functional
RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4)) * 3
X3 = RNG.standard_normal((2, 3, 4)) * 3
WIDE = np.concatenate([X.ravel(), [-30.0, -8.0, 0.0, 8.0, 30.0]])

CASES = {
    "relu": (F.relu, TF.relu, [X]),
    "sigmoid": (F.sigmoid, torch.sigmoid, [WIDE]),
    "silu": (F.silu, TF.silu, [WIDE]),
    "softplus": (F.softplus, TF.softplus, [WIDE]),
    "softplus beta=2 threshold=5": (
        lambda a: F.softplus(a, beta=2.0, threshold=5.0),
        lambda a: TF.softplus(a, beta=2.0, threshold=5.0),
        [WIDE],
    ),
    "gelu exact": (F.gelu, TF.gelu, [WIDE]),
    "gelu tanh": (
        lambda a: F.gelu(a, approximate="tanh"),
        lambda a: TF.gelu(a, approximate="tanh"),
        [WIDE],
    ),
}
CASES["linear"] = (F.linear, TF.linear, [X3, RNG.standard_normal((5, 4)), RNG.standard_normal(5)])
CASES["linear no bias, 1-D input"] = (F.linear, TF.linear, [X[0], RNG.standard_normal((5, 4))])
for _axis in (-1, 0, 1):
    CASES[f"softmax axis={_axis}"] = (
        lambda a, ax=_axis: F.softmax(a, axis=ax),
        lambda a, ax=_axis: TF.softmax(a, dim=ax),
        [X3],
    )
    CASES[f"log_softmax axis={_axis}"] = (
        lambda a, ax=_axis: F.log_softmax(a, axis=ax),
        lambda a, ax=_axis: TF.log_softmax(a, dim=ax),
        [X3],
    )
for _axis, _keep in ((None, False), (1, False), (1, True), ((0, 2), False), (-1, True)):
    CASES[f"logsumexp axis={_axis} keepdims={_keep}"] = (
        lambda a, ax=_axis, k=_keep: F.logsumexp(a, axis=ax, keepdims=k),
        lambda a, ax=_axis, k=_keep: torch.logsumexp(
            a, dim=tuple(range(a.ndim)) if ax is None else ax, keepdim=k
        ),
        [X3],
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_as_torch(name):
    ours, theirs, inputs = CASES[name]
    compare(ad.Autodiff(np), ours, theirs, inputs, rtol=1e-12, atol=1e-12)


def test_erf_matches_math_erf():
    x = np.linspace(-8.0, 8.0, 200001)
    assert np.max(np.abs(_erf(np, x) - np.vectorize(math.erf)(x))) < 1e-15


@pytest.mark.parametrize("big", [800.0, -800.0])
def test_no_overflow_for_large_inputs(xp, big):
    x = xp.asarray([big, 0.0], requires_grad=True)
    for f in (F.sigmoid, F.silu, F.softplus, F.gelu):
        y = f(x)
        xp.sum(y).backward()
        assert np.all(np.isfinite(np.asarray(y.data))) and np.all(np.isfinite(x.grad.data))
        x.grad = None


def test_softmax_rows_with_minus_inf(xp):
    """Partly -inf rows are exact; a row entirely -inf gives softmax 0, log_softmax
    and logsumexp -inf, and zero gradients (never NaN)."""
    inf = math.inf
    x = xp.asarray([[0.0, -inf, math.log(3.0)], [-inf, -inf, -inf]], requires_grad=True)
    s = F.softmax(x)
    np.testing.assert_allclose(np.asarray(s.data), [[0.25, 0.0, 0.75], [0.0, 0.0, 0.0]])
    ls = F.log_softmax(x)
    np.testing.assert_allclose(np.asarray(ls.data)[0, [0, 2]], [math.log(0.25), math.log(0.75)])
    assert np.all(np.isneginf(np.asarray(ls.data)[1])) and np.isneginf(np.asarray(ls.data)[0, 1])
    lse = F.logsumexp(x, axis=1)
    np.testing.assert_allclose(np.asarray(lse.data)[0], math.log(4.0))
    assert np.isneginf(np.asarray(lse.data)[1])
    w = xp.asarray([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    xp.sum(s * w).backward()
    # d/dx_i sum_j w_j s_j = s_i (w_i - sum_j w_j s_j): row 0 with s = (1/4, 0, 3/4)
    mean = 0.25 * 1 + 0.75 * 3
    expected = [[0.25 * (1 - mean), 0.0, 0.75 * (3 - mean)], [0.0, 0.0, 0.0]]
    np.testing.assert_allclose(x.grad.data, expected)
    x.grad = None
    xp.sum(F.logsumexp(x, axis=1)).backward()
    np.testing.assert_allclose(x.grad.data, [[0.25, 0.0, 0.75], [0.0, 0.0, 0.0]])


def test_gelu_rejects_unknown_approximation(xp):
    with pytest.raises(ValueError, match="gelu"):
        F.gelu(xp.asarray([1.0]), approximate="erf")


def test_raw_arrays_are_accepted():
    out = F.softmax(np.array([0.0, math.log(3.0)]))
    np.testing.assert_allclose(np.asarray(out.data), [0.25, 0.75])


# -- losses ------------------------------------------------------------------------
Z = RNG.standard_normal((6, 5)) * 2
T = np.array([1, 4, -100, 0, 3, 3])
Z3 = RNG.standard_normal((3, 4, 2, 2)) * 2
T3 = np.array([[[0, 3], [2, -100]], [[1, 1], [0, 2]], [[-100, -100], [3, 3]]])
Y = RNG.uniform(0.0, 1.0, (6, 5))
W = RNG.uniform(0.5, 2.0, (6, 5))
PW = RNG.uniform(0.5, 3.0, (5,))

LOSSES = {}
for _red in ("mean", "sum", "none"):
    for _ls in (0.0, 0.15):
        for _label, _z, _t in (("(N, C)", Z, T), ("(N, C, d1, d2)", Z3, T3)):
            LOSSES[f"cross_entropy {_label} {_red} smoothing={_ls}"] = (
                lambda a, t, r=_red, s=_ls: F.cross_entropy(a, t, reduction=r, label_smoothing=s),
                lambda a, t, r=_red, s=_ls: TF.cross_entropy(a, t, reduction=r, label_smoothing=s),
                [_z, _t],
            )
    LOSSES[f"mse_loss {_red}"] = (
        lambda a, b, r=_red: F.mse_loss(a, b, reduction=r),
        lambda a, b, r=_red: TF.mse_loss(a, b, reduction=r),
        [Z, Y],
    )
    LOSSES[f"bce_with_logits {_red}"] = (
        lambda a, b, r=_red: F.binary_cross_entropy_with_logits(a, b, reduction=r),
        lambda a, b, r=_red: TF.binary_cross_entropy_with_logits(a, b, reduction=r),
        [Z, Y],
    )
    # torch differentiates neither weight nor pos_weight: constants here (their
    # gradients are checked against central differences by the gradcheck spec)
    LOSSES[f"bce_with_logits weight pos_weight {_red}"] = (
        lambda a, b, r=_red: F.binary_cross_entropy_with_logits(
            a,
            b,
            weight=a.__array_namespace__().asarray(W),
            pos_weight=a.__array_namespace__().asarray(PW),
            reduction=r,
        ),
        lambda a, b, r=_red: TF.binary_cross_entropy_with_logits(
            a, b, weight=torch.tensor(W), pos_weight=torch.tensor(PW), reduction=r
        ),
        [Z, Y],
    )


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_losses_same_as_torch(name):
    ours, theirs, inputs = LOSSES[name]
    compare(ad.Autodiff(np), ours, theirs, inputs, rtol=1e-12, atol=1e-12)


def test_cross_entropy_all_ignored_is_zero_not_nan(xp):
    z = xp.asarray(Z[:2], requires_grad=True)
    loss = F.cross_entropy(z, xp.asarray([-100, -100]))
    assert float(loss) == 0.0
    loss.backward()
    assert np.all(np.asarray(z.grad.data) == 0.0)


@pytest.mark.parametrize(
    "target, error, match",
    [
        ([1, 5, 0, 0, 0, 0], IndexError, "out of range"),
        ([1, -2, 0, 0, 0, 0], IndexError, "out of range"),
        ([1.0, 2.0, 0.0, 0.0, 0.0, 0.0], TypeError, "integers"),
        ([1, 2, 0], ValueError, "target shape"),
    ],
)
def test_cross_entropy_bad_targets(xp, target, error, match):
    with pytest.raises(error, match=f"cross_entropy.*{match}"):
        F.cross_entropy(xp.asarray(Z), xp.asarray(target))


def test_loss_shape_and_reduction_errors(xp):
    with pytest.raises(ValueError, match="mse_loss"):
        F.mse_loss(xp.asarray(Z), xp.asarray(Y[:2]))
    with pytest.raises(ValueError, match="binary_cross_entropy_with_logits"):
        F.binary_cross_entropy_with_logits(xp.asarray(Z), xp.asarray(Y), reduction="avg")
    with pytest.raises(ValueError, match="cross_entropy"):
        F.cross_entropy(xp.asarray(Z), xp.asarray(T), reduction="batchmean")


def test_cross_entropy_mask_free_path_equals_the_masked_one(xp):
    """Without ignored targets, F.cross_entropy skips the masks (decided on the host);
    the op with masks (what a GPU backend runs) gives the same loss and gradient."""
    rng = np.random.default_rng(3)
    z, y = rng.standard_normal((5, 4, 3)), rng.integers(0, 4, (5, 3))
    for red in ("mean", "sum", "none"):
        a = xp.asarray(z, requires_grad=True)
        b = xp.asarray(z, requires_grad=True)
        fast = F.cross_entropy(a, xp.asarray(y), reduction=red, label_smoothing=0.1)
        ops = recorder_of(a).xp
        masked = ops.nn.cross_entropy(b, xp.asarray(y), ignore_index=-100, reduction=red,
                                      label_smoothing=0.1)  # fmt: skip
        np.testing.assert_allclose(np.asarray(fast.data), np.asarray(masked.data), rtol=1e-14)
        xp.sum(fast).backward()
        xp.sum(masked).backward()
        np.testing.assert_allclose(np.asarray(a.grad.data), np.asarray(b.grad.data), rtol=1e-14)
