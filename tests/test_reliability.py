"""Valid but unusual input (issue 17): empty axes, infinities, rules that must not read
the cotangent of a structural zero. Each case against torch.autograd."""

import warnings

import numpy as np
import pytest

from autodiff.nn import functional as F

torch = pytest.importorskip("torch", reason="the comparisons need torch")


def _np(t):
    return np.asarray(t.detach()) if hasattr(t, "detach") else np.asarray(t)


@pytest.mark.parametrize(
    "ours, theirs",
    [
        (lambda x: F.logsumexp(x, axis=1), lambda t: torch.logsumexp(t, dim=1)),
        (lambda x: F.softmax(x, axis=1), lambda t: torch.softmax(t, dim=1)),
        (lambda x: F.log_softmax(x, axis=1), lambda t: torch.log_softmax(t, dim=1)),
    ],
    ids=["logsumexp", "softmax", "log_softmax"],
)
def test_softmax_family_over_a_length_0_axis(xp, ours, theirs):
    x = xp.asarray(np.zeros((2, 0)), requires_grad=True)
    t = torch.zeros((2, 0), dtype=torch.float64, requires_grad=True)
    y, ty = ours(x), theirs(t)
    np.testing.assert_array_equal(_np(y), ty.detach().numpy())  # logsumexp: -inf, as torch
    xp.sum(y).backward()
    ty.sum().backward()
    assert x.grad.shape == (2, 0) and t.grad.shape == (2, 0)


def test_prod_whose_kept_axes_have_size_0(xp):
    x = xp.asarray(np.zeros((0, 3)), requires_grad=True)
    y = xp.prod(x, axis=1)
    assert y.shape == (0,)
    xp.sum(y).backward()
    assert x.grad.shape == (0, 3)


def test_var_of_nothing_is_nan_with_an_empty_gradient(xp):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's mean of empty
        x = xp.asarray(np.zeros((0,)), requires_grad=True)
        v = xp.var(x)
        v.backward()
        assert np.isnan(float(v)) and x.grad.shape == (0,)
        # one element with correction=1: NaN, and a NaN gradient, as torch
        x = xp.asarray(np.array([1.0]), requires_grad=True)
        xp.var(x, correction=1).backward()
    t = torch.tensor([1.0], dtype=torch.float64, requires_grad=True)
    t.var(correction=1).backward()
    np.testing.assert_array_equal(_np(x.grad), t.grad.numpy())


def test_logsumexp_of_a_row_holding_inf(xp):
    a = np.array([[np.inf, 0.0, 1.0], [-np.inf, -np.inf, -np.inf], [0.5, 1.0, -2.0]])
    x = xp.asarray(a, requires_grad=True)
    y = F.logsumexp(x, axis=1)
    t = torch.tensor(a, requires_grad=True)
    ty = torch.logsumexp(t, dim=1)
    np.testing.assert_allclose(_np(y), ty.detach().numpy())  # inf, -inf, finite
    xp.sum(y * xp.asarray(np.array([1.0, 1.0, 2.0]))).backward()
    (ty * torch.tensor([1.0, 1.0, 2.0], dtype=torch.float64)).sum().backward()
    # [nan, 0, 0] (not NaN everywhere) and the softmax otherwise, as torch; the row of
    # -inf gets zeros (our convention, DESIGN.md; torch gives NaN there)
    g = _np(x.grad)
    np.testing.assert_allclose(g[[0, 2]], t.grad.numpy()[[0, 2]])
    np.testing.assert_array_equal(g[1], 0.0)


def _atan2_of_zeros(m, a):
    """A loss whose cotangent is NaN where ``a`` is 0: atan2 has no derivative at (0, 0)."""
    return m.sum(m.atan2(a * 0.0, a))


@pytest.mark.parametrize(
    "ours, theirs",
    [
        (lambda xp, a: xp.linalg.cholesky(a), lambda t: torch.linalg.cholesky(t)),
        (lambda xp, a: xp.linalg.cholesky(a, upper=True),
         lambda t: torch.linalg.cholesky(t, upper=True)),
        (lambda xp, a: xp.linalg.qr(a)[1], lambda t: torch.linalg.qr(t)[1]),
        (lambda xp, a: xp.tril(a), lambda t: torch.tril(t)),
    ],
    ids=["cholesky", "cholesky-upper", "qr-R", "tril"],
)  # fmt: skip
def test_structural_zeros_do_not_read_their_cotangent(xp, ours, theirs):
    a0 = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
    a = xp.asarray(a0, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _atan2_of_zeros(xp, ours(xp, a)).backward()
    t = torch.tensor(a0, requires_grad=True)
    _atan2_of_zeros(torch, theirs(t)).backward()
    np.testing.assert_allclose(_np(a.grad), t.grad.numpy(), atol=1e-12)
    assert np.all(np.isfinite(_np(a.grad)))
