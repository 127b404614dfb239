"""More losses, similarity, padding and one-hot against PyTorch (float64), on NumPy and
array-api-strict: values and gradients, and bad arguments."""

import numpy as np
import pytest

import autodiff as ad
from autodiff import nn
from autodiff.nn import functional as F

from .nn_compare import compare

torch = pytest.importorskip("torch", reason="PyTorch comparisons need torch==2.13.0")
TF = torch.nn.functional
RNG = np.random.default_rng(7)
Z = RNG.standard_normal((6, 5)) * 2
T = np.array([1, 4, -100, 0, 3, 3])
T_FULL = np.array([1, 4, 2, 0, 3, 3])
Z3 = RNG.standard_normal((3, 4, 2, 2)) * 2
T3 = np.array([[[0, 3], [2, -100]], [[1, 1], [0, 2]], [[-100, -100], [3, 3]]])
W = RNG.uniform(0.5, 2.0, (5,))
W4 = RNG.uniform(0.5, 2.0, (4,))
Y = RNG.standard_normal((6, 5))
P = np.exp(RNG.standard_normal((6, 5)))
P /= P.sum(axis=1, keepdims=True)
P3 = np.exp(RNG.standard_normal((3, 4, 2, 2)))
P3 /= P3.sum(axis=1, keepdims=True)
U = RNG.uniform(0.05, 0.95, (6, 5))
V = RNG.uniform(0.0, 1.0, (6, 5))
BW = RNG.uniform(0.5, 2.0, (6, 5))
X4 = RNG.standard_normal((2, 3, 4, 5))


def _c(a, value):
    """A constant of ``a``'s namespace (torch differentiates no class weight)."""
    return a.__array_namespace__().asarray(value)


CASES = {}
for _r in ("mean", "sum", "none"):
    CASES[f"nll_loss {_r}"] = (
        lambda a, t, r=_r: F.nll_loss(a, t, reduction=r),
        lambda a, t, r=_r: TF.nll_loss(a, t, reduction=r),
        [Z, T],
    )
    CASES[f"nll_loss weight {_r}"] = (
        lambda a, t, r=_r: F.nll_loss(a, t, _c(a, W), reduction=r),
        lambda a, t, r=_r: TF.nll_loss(a, t, torch.tensor(W), reduction=r),
        [Z, T],
    )
    CASES[f"nll_loss (N, C, d1, d2) weight ignore_index=2 {_r}"] = (
        lambda a, t, r=_r: F.nll_loss(a, t, _c(a, W4), ignore_index=2, reduction=r),
        lambda a, t, r=_r: TF.nll_loss(a, t, torch.tensor(W4), ignore_index=2, reduction=r),
        [Z3, np.where(T3 < 0, 1, T3)],
    )
    for _ls in (0.0, 0.2):
        for _lab, _z, _t, _w in (("(N, C)", Z, T, W), ("(N, C, d1, d2)", Z3, T3, W4)):
            CASES[f"cross_entropy weight {_lab} {_r} smoothing={_ls}"] = (
                lambda a, t, r=_r, s=_ls, w=_w: F.cross_entropy(
                    a, t, _c(a, w), reduction=r, label_smoothing=s
                ),
                lambda a, t, r=_r, s=_ls, w=_w: TF.cross_entropy(
                    a, t, torch.tensor(w), reduction=r, label_smoothing=s
                ),
                [_z, _t],
            )
        for _lab, _z, _p, _w in (("(N, C)", Z, P, W), ("(N, C, d1, d2)", Z3, P3, W4)):
            CASES[f"cross_entropy probabilities {_lab} {_r} smoothing={_ls}"] = (
                lambda a, p, r=_r, s=_ls: F.cross_entropy(a, p, reduction=r, label_smoothing=s),
                lambda a, p, r=_r, s=_ls: TF.cross_entropy(a, p, reduction=r, label_smoothing=s),
                [_z, _p],
            )
            CASES[f"cross_entropy probabilities weight {_lab} {_r} smoothing={_ls}"] = (
                lambda a, p, r=_r, s=_ls, w=_w: F.cross_entropy(
                    a, p, _c(a, w), reduction=r, label_smoothing=s
                ),
                lambda a, p, r=_r, s=_ls, w=_w: TF.cross_entropy(
                    a, p, torch.tensor(w), reduction=r, label_smoothing=s
                ),
                [_z, _p],
            )
    CASES[f"l1_loss {_r}"] = (
        lambda a, b, r=_r: F.l1_loss(a, b, reduction=r),
        lambda a, b, r=_r: TF.l1_loss(a, b, reduction=r),
        [Z, Y],
    )
    for _d in (1.0, 0.7):
        CASES[f"huber_loss delta={_d} {_r}"] = (
            lambda a, b, r=_r, d=_d: F.huber_loss(a, b, reduction=r, delta=d),
            lambda a, b, r=_r, d=_d: TF.huber_loss(a, b, reduction=r, delta=d),
            [Z, Y],
        )
    for _b in (1.0, 0.7, 0.0):
        CASES[f"smooth_l1_loss beta={_b} {_r}"] = (
            lambda a, b, r=_r, be=_b: F.smooth_l1_loss(a, b, reduction=r, beta=be),
            lambda a, b, r=_r, be=_b: TF.smooth_l1_loss(a, b, reduction=r, beta=be),
            [Z, Y],
        )
    CASES[f"binary_cross_entropy {_r}"] = (
        lambda a, b, r=_r: F.binary_cross_entropy(a, b, reduction=r),
        lambda a, b, r=_r: TF.binary_cross_entropy(a, b, reduction=r),
        [U, V],
    )
    CASES[f"binary_cross_entropy weight {_r}"] = (
        lambda a, b, r=_r: F.binary_cross_entropy(a, b, _c(a, BW), reduction=r),
        lambda a, b, r=_r: TF.binary_cross_entropy(a, b, torch.tensor(BW), reduction=r),
        [U, V],
    )
for _r in ("mean", "sum", "none", "batchmean"):
    for _lt in (False, True):
        CASES[f"kl_div {_r} log_target={_lt}"] = (
            lambda a, b, r=_r, lt=_lt: F.kl_div(a, b, reduction=r, log_target=lt),
            lambda a, b, r=_r, lt=_lt: TF.kl_div(a, b, reduction=r, log_target=lt),
            [np.log(P[::-1].copy()), np.log(P) if _lt else P],
        )
for _ax in (1, -1, 0):
    CASES[f"cosine_similarity axis={_ax}"] = (
        lambda a, b, ax=_ax: F.cosine_similarity(a, b, axis=ax),
        lambda a, b, ax=_ax: TF.cosine_similarity(a, b, dim=ax),
        [Z3, Z3[::-1].copy() + 0.3],
    )
for _r in ("mean", "none"):
    CASES[f"cross_entropy one example (C,) {_r}"] = (
        lambda a, t, r=_r: F.cross_entropy(a, t, reduction=r, label_smoothing=0.1),
        lambda a, t, r=_r: TF.cross_entropy(a, t, reduction=r, label_smoothing=0.1),
        [Z[0], np.array(2)],
    )
    CASES[f"cross_entropy one example (C,) probabilities {_r}"] = (
        lambda a, p, r=_r: F.cross_entropy(a, p, reduction=r),
        lambda a, p, r=_r: TF.cross_entropy(a, p, reduction=r),
        [Z[0], P[0]],
    )
    CASES[f"nll_loss one example (C,) weight {_r}"] = (
        lambda a, t, r=_r: F.nll_loss(a, t, _c(a, W), reduction=r),
        lambda a, t, r=_r: TF.nll_loss(a, t, torch.tensor(W), reduction=r),
        [Z[0], np.array(3)],
    )
CASES["cosine_similarity broadcast"] = (
    lambda a, b: F.cosine_similarity(a, b, axis=-1),
    lambda a, b: TF.cosine_similarity(a, b, dim=-1),
    [Z3, Z3[0, 0, 0] + 0.5],
)
for _p in (1.0, 2.0, 3.0):
    for _ax in (1, -1):
        CASES[f"normalize p={_p} axis={_ax}"] = (
            lambda a, p=_p, ax=_ax: F.normalize(a, p=p, axis=ax),
            lambda a, p=_p, ax=_ax: TF.normalize(a, p=p, dim=ax),
            [Z3],
        )
for _mode in ("constant", "reflect", "replicate", "circular"):
    for _pad in ((1, 2), (2, 1, 1, 3), (1, 1, 2, 0, 1, 2)):
        _x = X4 if len(_pad) > 2 else X4[0]
        if _mode == "circular" and len(_pad) == 6:
            _pad = (1, 1, 2, 0, 1, 0)
        CASES[f"pad {_mode} {_pad}"] = (
            lambda a, p=_pad, m=_mode: F.pad(a, p, mode=m),
            lambda a, p=_pad, m=_mode: TF.pad(a, p, mode=m),
            [_x],
        )
CASES["pad constant value, negative pads"] = (
    lambda a: F.pad(a, (-1, 2, 0, 1, 1, 1, 2, 0), value=1.5),
    lambda a: TF.pad(a, (-1, 2, 0, 1, 1, 1, 2, 0), value=1.5),
    [X4],
)


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")  # torch's kl_div
@pytest.mark.parametrize("name", sorted(CASES))
def test_same_as_torch(xp, name):
    ours, theirs, inputs = CASES[name]
    compare(xp, ours, theirs, inputs, rtol=1e-11, atol=1e-11)


def test_kl_div_mean_warning_free_and_zero_targets(xp):
    """A zero target contributes 0 (t log t -> 0), and its gradient is finite."""
    t = np.array([[0.0, 0.5, 0.5]])
    x = xp.asarray(np.log([[0.2, 0.3, 0.5]]), requires_grad=True)
    tt = xp.asarray(t, requires_grad=True)
    loss = F.kl_div(x, tt, reduction="sum")
    ref = TF.kl_div(torch.tensor(np.log([[0.2, 0.3, 0.5]])), torch.tensor(t), reduction="sum")
    np.testing.assert_allclose(float(loss), float(ref), rtol=1e-12)
    loss.backward()
    assert np.all(np.isfinite(np.asarray(tt.grad.data)))


def test_bce_clamps_logs_at_minus_100(xp):
    x = xp.asarray([0.0, 1.0, 0.5], requires_grad=True)
    y = xp.asarray([1.0, 0.0, 1.0])
    loss = F.binary_cross_entropy(x, y, reduction="none")
    ref = TF.binary_cross_entropy(torch.tensor([0.0, 1.0, 0.5], dtype=torch.float64),
                                  torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64),
                                  reduction="none")  # fmt: skip
    np.testing.assert_allclose(np.asarray(loss.data), ref.numpy(), rtol=1e-12)
    xp.sum(loss).backward()
    assert np.all(np.isfinite(np.asarray(x.grad.data)))


def test_one_hot(xp):
    t = np.array([[0, 2], [1, 3]])
    for n in (-1, 5):
        out = F.one_hot(xp.asarray(t), num_classes=n)
        ref = TF.one_hot(torch.tensor(t), num_classes=n)
        assert not out.requires_grad
        assert out.dtype == xp.int64
        np.testing.assert_array_equal(np.asarray(out.data), ref.numpy())


def test_nll_all_ignored_is_zero(xp):
    z = xp.asarray(Z[:2], requires_grad=True)
    loss = F.nll_loss(z, xp.asarray([-100, -100]), xp.asarray(W))
    assert float(loss) == 0.0
    loss.backward()
    assert np.all(np.asarray(z.grad.data) == 0.0)


def test_composed_gradient_through_pad_and_normalize(xp):
    def f(a, Fn, dim, total):
        return total(Fn.normalize(Fn.pad(a, (1, 1, 1, 0), mode="reflect"), **{dim: -1}) ** 3)

    g = ad.grad(lambda a: f(a, F, "axis", xp.sum))(xp.asarray(X4[0]))
    xt = torch.tensor(X4[0], requires_grad=True)
    f(xt, TF, "dim", torch.sum).backward()
    np.testing.assert_allclose(np.asarray(g.data), xt.grad.numpy(), rtol=1e-11, atol=1e-12)


BAD = [
    (lambda x: F.nll_loss(x(Z), x(T + 5)), IndexError, "nll_loss.*out of range"),
    (lambda x: F.nll_loss(x(Z), x(Y)), TypeError, "nll_loss.*integers"),
    (lambda x: F.nll_loss(x(Z), x(T), x(W4)), ValueError, "nll_loss.*weight"),
    (lambda x: F.nll_loss(x(Z), x(T), reduction="avg"), ValueError, "nll_loss.*reduction"),
    (lambda x: F.nll_loss(x(Z[0, 0]), x(T[0])), ValueError, "nll_loss.*input"),
    (lambda x: F.nll_loss(x(Z[0]), x(T[:2])), ValueError, "nll_loss.*0-d"),
    (lambda x: F.cross_entropy(x(Z), x(P[:3])), TypeError, "cross_entropy.*probabilities"),
    (lambda x: F.cross_entropy(x(Z), x(T), [1.0] * 5), TypeError, "cross_entropy.*weight"),
    (lambda x: F.l1_loss(x(Z), x(Y[:2])), ValueError, "l1_loss.*shape"),
    (lambda x: F.huber_loss(x(Z), x(Y), delta=0.0), ValueError, "huber_loss.*delta"),
    (lambda x: F.smooth_l1_loss(x(Z), x(Y), beta=-1.0), ValueError, "smooth_l1_loss.*beta"),
    (lambda x: F.kl_div(x(Z), x(P), reduction="batch"), ValueError, "kl_div.*reduction"),
    (lambda x: F.kl_div(x(Z), x(P), log_target=1), TypeError, "kl_div.*log_target"),
    (lambda x: F.binary_cross_entropy(x(Z), x(V)), ValueError, "cross_entropy.*probabilities"),
    (lambda x: F.binary_cross_entropy(x(U), x(V), x(W4)), ValueError, "cross_entropy.*weight"),
    (lambda x: F.cosine_similarity(x(Z), x(Z3)), ValueError, "cosine_similarity.*broadcast"),
    (lambda x: F.cosine_similarity(x(Z), x(Z), axis=2), IndexError, "cosine_similarity.*axis"),
    (lambda x: F.cosine_similarity(x(Z), x(Z), eps=-1.0), ValueError, "cosine_similarity.*eps"),
    (lambda x: F.normalize(x(Z), p=0.5), ValueError, "normalize.*p"),
    (lambda x: F.normalize(x(Z), axis=1.0), TypeError, "normalize.*axis"),
    (lambda x: F.pad(x(X4), (1,)), ValueError, "pad.*even"),
    (lambda x: F.pad(x(X4), (1, 1), mode="wrap"), ValueError, "pad.*mode"),
    (lambda x: F.pad(x(X4), (1, 1.5)), TypeError, "pad.*pad"),
    (lambda x: F.pad(x(X4), (1, 1), mode="reflect"), ValueError, "pad.*reflect"),
    (lambda x: F.pad(x(X4), (5, 0), mode="reflect"), ValueError, "pad.*reflect"),
    (lambda x: F.pad(x(X4), (0, 0, 6, 0), mode="circular"), ValueError, "pad.*circular"),
    (lambda x: F.pad(x(X4), (1, 1) * 5), ValueError, "pad.*axes"),
    (lambda x: F.pad(x(X4), (-3, -3)), ValueError, "pad.*crops"),
    (lambda x: F.one_hot(x(Y)), TypeError, "one_hot.*integer"),
    (lambda x: F.one_hot(x(T_FULL), num_classes=3), ValueError, "one_hot.*num_classes"),
    (lambda x: F.one_hot(x(T)), ValueError, "one_hot.*>= 0"),
]  # fmt: skip


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_arguments(xp, i):
    call, error, match = BAD[i]
    with pytest.raises(error, match=match):
        call(xp.asarray)


# -- loss modules ---------------------------------------------------------------------
MODULES = {
    "CrossEntropyLoss": (lambda m: m.CrossEntropyLoss(label_smoothing=0.1), [Z, T]),
    "CrossEntropyLoss weight": (lambda m, w=None: m.CrossEntropyLoss(weight=w), [Z, T]),
    "CrossEntropyLoss probabilities": (lambda m: m.CrossEntropyLoss(reduction="sum"), [Z, P]),
    "NLLLoss weight": (lambda m, w=None: m.NLLLoss(weight=w, reduction="sum"), [Z, T]),
    "NLLLoss legacy reduce=False": (lambda m: m.NLLLoss(reduce=False), [Z, T]),
    "MSELoss": (lambda m: m.MSELoss(), [Z, Y]),
    "MSELoss legacy size_average=False": (lambda m: m.MSELoss(size_average=False), [Z, Y]),
    "L1Loss": (lambda m: m.L1Loss(reduction="none"), [Z, Y]),
    "HuberLoss": (lambda m: m.HuberLoss(delta=0.5), [Z, Y]),
    "SmoothL1Loss": (lambda m: m.SmoothL1Loss(beta=0.5), [Z, Y]),
    "KLDivLoss": (
        lambda m: m.KLDivLoss(reduction="batchmean", log_target=True),
        [np.log(P[::-1].copy()), np.log(P)],
    ),
    "BCELoss weight": (lambda m, w=None: m.BCELoss(weight=w), [U, V]),
    "BCEWithLogitsLoss": (lambda m: m.BCEWithLogitsLoss(), [Z, V]),
    "CosineSimilarity": (lambda m: m.CosineSimilarity(dim=0), [Z, Y]),
}
_WEIGHTS = {"CrossEntropyLoss weight": W, "NLLLoss weight": W, "BCELoss weight": BW}


@pytest.mark.filterwarnings("ignore:size_average and reduce args")  # torch's legacy args
@pytest.mark.parametrize("name", sorted(MODULES))
def test_loss_modules_same_as_torch(xp, name):
    make, inputs = MODULES[name]
    w = _WEIGHTS.get(name)
    ours = make(nn, xp.asarray(w)) if w is not None else make(nn)
    theirs = make(torch.nn, torch.tensor(w)) if w is not None else make(torch.nn)
    assert type(ours).__name__ == type(theirs).__name__
    compare(xp, ours, theirs, inputs, rtol=1e-11, atol=1e-11)
    if w is not None:
        assert "weight" in dict(ours.named_buffers())


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: nn.CrossEntropyLoss(reduction="avg"), ValueError, "CrossEntropyLoss.*reduction"),
        (lambda: nn.CrossEntropyLoss(label_smoothing=1.5), ValueError, "CrossEntropyLoss"),
        (lambda: nn.NLLLoss(ignore_index=0.5), TypeError, "NLLLoss.*ignore_index"),
        (lambda: nn.MSELoss(reduce=1), TypeError, "MSELoss.*reduce"),
        (lambda: nn.HuberLoss(delta=0), ValueError, "HuberLoss.*delta"),
        (lambda: nn.SmoothL1Loss(beta=-1), ValueError, "SmoothL1Loss.*beta"),
        (lambda: nn.KLDivLoss(log_target="yes"), TypeError, "KLDivLoss.*log_target"),
        (lambda: nn.BCELoss(weight=[1.0, 2.0]), TypeError, "BCELoss.*weight"),
        (lambda: nn.CosineSimilarity(dim=None), TypeError, "CosineSimilarity.*dim"),
    ],
)
def test_loss_module_bad_arguments(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_raw_weights_and_inputs_are_accepted():
    xp = ad.Autodiff(np)
    z = xp.asarray(Z, requires_grad=True)
    loss = F.nll_loss(z, xp.asarray(T), W)
    ref = TF.nll_loss(torch.tensor(Z), torch.tensor(T), torch.tensor(W))
    np.testing.assert_allclose(float(loss), float(ref), rtol=1e-13)
    out = F.pad(np.ones((2, 2)), (1, 1), value=2.0)
    np.testing.assert_array_equal(np.asarray(out.data), [[2.0, 1, 1, 2], [2.0, 1, 1, 2]])


def test_vmap_of_weighted_losses_equals_a_loop():
    xp = ad.Autodiff(np)
    zs = xp.asarray(np.stack([Z, Z[::-1]]))
    ws = xp.asarray(np.stack([W, W[::-1]]))

    def f(z, w):
        return F.cross_entropy(z, xp.asarray(T), w, label_smoothing=0.1)

    got = ad.vmap(f)(zs, ws)
    want = [float(f(zs[i], ws[i])) for i in range(2)]
    np.testing.assert_allclose(np.asarray(got.data), want, rtol=1e-13)
