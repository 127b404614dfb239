"""leaky_relu, elu, mish, hardswish, glu, softmin (functions and modules) and Unflatten
against torch in float64: values, gradients and second derivatives."""

import array_api_strict
import numpy as np
import pytest

import autodiff as ad
from autodiff import nn
from autodiff.nn import functional as F

torch = pytest.importorskip("torch", reason="compared with torch.nn.functional")
TF = torch.nn.functional

X = np.array([[-4.0, -3.0, -1.2, -0.4, 0.3, 1.1], [2.5, 3.0, 3.7, -2.2, 0.9, -0.05]])
CASES = [
    ("leaky_relu", lambda f, x: f.leaky_relu(x, 0.2), lambda x: TF.leaky_relu(x, 0.2)),
    ("elu", lambda f, x: f.elu(x, alpha=0.7), lambda x: TF.elu(x, alpha=0.7)),
    ("mish", lambda f, x: f.mish(x), TF.mish),
    ("hardswish", lambda f, x: f.hardswish(x), TF.hardswish),
    ("glu", lambda f, x: f.glu(x, axis=-1), lambda x: TF.glu(x, dim=-1)),
    ("glu0", lambda f, x: f.glu(x, axis=0), lambda x: TF.glu(x, dim=0)),
    ("softmin", lambda f, x: f.softmin(x, axis=1), lambda x: TF.softmin(x, dim=1)),
    ("LeakyReLU", lambda f, x: nn.LeakyReLU(0.3)(x), torch.nn.LeakyReLU(0.3)),
    ("ELU", lambda f, x: nn.ELU(1.5)(x), torch.nn.ELU(1.5)),
    ("Mish", lambda f, x: nn.Mish()(x), torch.nn.Mish()),
    ("Hardswish", lambda f, x: nn.Hardswish()(x), torch.nn.Hardswish()),
    ("GLU", lambda f, x: nn.GLU()(x), torch.nn.GLU()),
    ("Softmin", lambda f, x: nn.Softmin(axis=0)(x), torch.nn.Softmin(dim=0)),
]


@pytest.fixture(params=["numpy", "strict"])
def xp(request):
    return ad.Autodiff(np if request.param == "numpy" else array_api_strict)


@pytest.mark.parametrize("name, ours, theirs", CASES, ids=[c[0] for c in CASES])
def test_values_gradients_and_second_derivatives_equal_torch(xp, name, ours, theirs):
    w = np.random.default_rng(1).standard_normal(X.shape)
    x = xp.asarray(X)
    y = ours(F, x)
    t = torch.tensor(X, requires_grad=True)
    ty = theirs(t)
    np.testing.assert_allclose(np.asarray(y.detach()), ty.detach().numpy(), rtol=1e-14, atol=1e-15)
    v = np.random.default_rng(2).standard_normal(y.shape)

    def first(a):
        return ad.grad(lambda b: xp.sum(ours(F, b) * xp.asarray(v)))(a)

    g = first(x)
    (tg,) = torch.autograd.grad((ty * torch.tensor(v)).sum(), t, create_graph=True)
    np.testing.assert_allclose(np.asarray(g.detach()), tg.detach().numpy(), rtol=1e-13, atol=1e-15)
    h = ad.grad(lambda a: xp.sum(first(a) * xp.asarray(w)))(x)
    (th,) = torch.autograd.grad((tg * torch.tensor(w)).sum(), t)
    np.testing.assert_allclose(np.asarray(h.detach()), th.numpy(), rtol=1e-12, atol=1e-14)


def test_unflatten_and_bad_arguments():
    xp = ad.Autodiff(np)
    x = xp.asarray(np.arange(24.0).reshape(2, 12))
    y = nn.Unflatten(1, (3, -1))(x)
    ty = torch.nn.Unflatten(1, (3, -1))(torch.arange(24.0).reshape(2, 12))
    assert y.shape == tuple(ty.shape) == (2, 3, 4)
    np.testing.assert_array_equal(np.asarray(y), ty.numpy())
    with pytest.raises(
        ValueError, match=r"Unflatten: axis 1 of size 12 can't be split as \(5, -1\)"
    ):
        nn.Unflatten(1, (5, -1))(x)
    with pytest.raises(ValueError, match="at most one -1"):
        nn.Unflatten(1, (-1, -1))
    with pytest.raises(ValueError, match="glu: axis -1 must have an even length, got 3"):
        F.glu(xp.ones((2, 3)))
    with pytest.raises(TypeError, match="LeakyReLU: negative_slope must be a number"):
        nn.LeakyReLU("0.1")
    with pytest.raises(TypeError, match="elu: alpha must be a number"):
        F.elu(x, alpha=None)
