"""Complex numbers: PyTorch's convention (grad = dL/dx + i dL/dy) at every entry and
exit of the engine (leaves, backward(grad), transforms, custom_vjp), real inputs of
complex intermediates, and the refusals. Every value is compared with torch.autograd
or with a formula derived by hand."""

import numpy as np
import pytest

import autodiff as ad

torch = pytest.importorskip("torch", reason="the comparisons need torch")

X = np.array([0.5, -2.0])
Z = np.array([1.0 + 2.0j, -0.5 + 0.3j, 0.2 - 0.7j])


def _torch_grad(f, *arrays):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    gs = torch.autograd.grad(f(*ts), ts)
    return [g.detach().resolve_conj().numpy() for g in gs]


def test_real_times_complex_scalar_is_not_recorded_as_real(xp):
    # the reproducers: x * 1j and x * (1 + 1j) were recorded as real
    x = xp.asarray(X, requires_grad=True)
    xp.sum(xp.abs(x * 1j)).backward()
    np.testing.assert_allclose(np.asarray(x.grad), [1.0, -1.0])
    x.grad = None
    xp.sum(xp.abs(x * (1 + 1j))).backward()
    np.testing.assert_allclose(np.asarray(x.grad), [2**0.5, -(2**0.5)])
    assert x.grad.dtype == xp.float64


def test_real_times_complex_array(xp):
    c = np.array([1.0 - 1.0j, 0.5 + 2.0j])
    x = xp.asarray(X, requires_grad=True)
    y = x * xp.asarray(c)
    xp.sum(xp.real(y) * 3.0 + xp.imag(y) ** 2).backward()
    (expected,) = _torch_grad(
        lambda t: ((t * torch.tensor(c)).real * 3 + (t * torch.tensor(c)).imag ** 2).sum(), X
    )
    np.testing.assert_allclose(np.asarray(x.grad), expected)
    # by hand: d/dx [3 Re(c) x + (Im(c) x)^2] = 3 Re(c) + 2 Im(c)^2 x
    np.testing.assert_allclose(expected, 3 * c.real + 2 * c.imag**2 * X)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_leaves_require_grad(xp, dtype):
    z = xp.asarray(Z.astype(dtype), requires_grad=True)
    assert z.requires_grad and z.dtype == getattr(xp, dtype)
    xp.sum(xp.abs(z) ** 2).backward()
    # |z|^2 = x^2 + y^2: dL/dx + i dL/dy = 2z (PyTorch's convention)
    np.testing.assert_allclose(np.asarray(z.grad), 2 * Z.astype(dtype), rtol=1e-6)
    assert z.grad.dtype == z.dtype


def test_astype_to_complex_and_back(xp):
    x = xp.asarray(X, requires_grad=True)
    z = xp.astype(x, xp.complex128)
    assert z.requires_grad
    w = z * xp.asarray(np.array([2.0 + 1.0j, 1.0 - 3.0j]))
    xp.sum(xp.real(w * w)).backward()
    c = np.array([2.0 + 1.0j, 1.0 - 3.0j])
    (expected,) = _torch_grad(
        lambda t: (t.to(torch.complex128) * torch.tensor(c)).square().real.sum(), X
    )
    np.testing.assert_allclose(np.asarray(x.grad), expected)


def test_a_real_loss_of_complex_values_matches_torch(xp):
    def f(m, z):
        w = m.exp(z) * z + m.conj(z) * m.sin(z) / (1.5 + z * z)
        return m.sum(m.abs(w) ** 2) + m.sum(m.real(m.sqrt(z)) * m.imag(z * z))

    z = xp.asarray(Z, requires_grad=True)
    f(xp, z).backward()
    (expected,) = _torch_grad(lambda t: f(torch, t), Z)
    np.testing.assert_allclose(np.asarray(z.grad), expected, rtol=1e-10)


def test_gradient_descent_on_a_complex_leaf_descends(xp):
    target = np.array([0.3 - 0.2j, -1.0 + 0.5j, 2.0j])
    z = xp.asarray(np.zeros(3, dtype=complex), requires_grad=True)
    losses = []
    for _ in range(50):
        loss = xp.sum(xp.abs(z - xp.asarray(target)) ** 2)
        losses.append(float(loss))
        z.grad = None
        loss.backward()
        with ad.no_grad():
            z -= 0.1 * z.grad
    assert losses[-1] < 1e-8 * losses[0]
    np.testing.assert_allclose(np.asarray(z.detach()), target, atol=1e-4)


def test_matmul_and_reductions_of_complex_matrices(xp):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    b = rng.standard_normal((4, 2)) + 1j * rng.standard_normal((4, 2))

    def f(m, p, q):
        y = p @ q
        return m.sum(m.abs(m.mean(y, axis=0)) ** 3) + m.sum(m.real(m.prod(y, axis=1)))

    ta, tb = xp.asarray(a, requires_grad=True), xp.asarray(b, requires_grad=True)
    f(xp, ta, tb).backward()
    ea, eb = _torch_grad(lambda p, q: f(torch, p, q), a, b)
    np.testing.assert_allclose(np.asarray(ta.grad), ea, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(tb.grad), eb, rtol=1e-10)


def test_backward_with_a_complex_cotangent_matches_torch(xp):
    u = np.array([1.0 + 2.0j, -1.0j, 0.5])
    z = xp.asarray(Z, requires_grad=True)
    y = xp.exp(z) * xp.conj(z)
    y.backward(xp.asarray(u))
    t = torch.tensor(Z, requires_grad=True)
    (torch.exp(t) * t.conj()).backward(torch.tensor(u))
    np.testing.assert_allclose(np.asarray(z.grad), t.grad.resolve_conj().numpy(), rtol=1e-12)


def test_backward_of_a_complex_scalar_needs_grad(xp):
    z = xp.asarray(Z, requires_grad=True)
    with pytest.raises(RuntimeError, match="real scalar"):
        xp.sum(z).backward()


def test_second_order_through_complex_values(xp):
    z = xp.asarray(Z, requires_grad=True)
    loss = xp.sum(xp.abs(xp.exp(z) * z) ** 2)
    loss.backward(create_graph=True)
    g = z.grad
    z.grad = None
    xp.sum(xp.real(g * xp.asarray(np.conj(Z)))).backward()
    t = torch.tensor(Z, requires_grad=True)
    (tg,) = torch.autograd.grad((torch.abs(torch.exp(t) * t) ** 2).sum(), t, create_graph=True)
    (expected,) = torch.autograd.grad((tg * torch.tensor(np.conj(Z))).real.sum(), t)
    np.testing.assert_allclose(np.asarray(z.grad), expected.numpy(), rtol=1e-10)


def test_transforms_follow_the_same_convention():
    def f(z):
        xp = z.__array_namespace__()
        return xp.sum(xp.abs(xp.sin(z)) ** 2)

    g = ad.grad(f)(Z)
    (expected,) = _torch_grad(lambda t: (torch.abs(torch.sin(t)) ** 2).sum(), Z)
    np.testing.assert_allclose(np.asarray(g), expected, rtol=1e-12)
    # JAX's grad is the conjugate of this: dL/dx - i dL/dy
    xp = ad.Autodiff(np)

    def h(z):
        return xp.exp(z) * z

    u = np.array([1.0 - 1.0j, 2.0j, 0.5 + 0.5j])
    out, vjp_fn = ad.vjp(h, xp.asarray(Z))
    (ct,) = vjp_fn(xp.asarray(u))
    t = torch.tensor(Z, requires_grad=True)
    (tct,) = torch.autograd.grad(torch.exp(t) * t, t, torch.tensor(u))
    np.testing.assert_allclose(np.asarray(ct), tct.resolve_conj().numpy(), rtol=1e-12)
    # jvp of a holomorphic function: f'(z) v
    v = np.array([0.3 + 0.1j, -1.0, 1.0j])
    _, tangent = ad.jvp(h, (xp.asarray(Z),), (xp.asarray(v),))
    np.testing.assert_allclose(np.asarray(tangent), np.exp(Z) * (1 + Z) * v, rtol=1e-12)
    # and of a non-holomorphic one: d|z|^2 = 2 Re(conj(z) dz)
    _, tangent = ad.jvp(lambda z: xp.abs(z) ** 2, (xp.asarray(Z),), (xp.asarray(v),))
    np.testing.assert_allclose(np.asarray(tangent), 2 * np.real(np.conj(Z) * v), rtol=1e-12)


def test_custom_vjp_gets_and_returns_torch_convention():
    xp = ad.Autodiff(np)

    @ad.custom_vjp
    def square(z):
        return z * z

    seen = {}

    def fwd(z):
        return z * z, z

    def bwd(z, g):
        seen["g"] = np.asarray(g)
        return (g * xp.conj(2 * z),)  # PyTorch's VJP of a holomorphic f: g * conj(f'(z))

    square.defvjp(fwd, bwd)
    z = xp.asarray(Z, requires_grad=True)
    xp.sum(xp.abs(square(z)) ** 2).backward()
    # L = |z^2|^2 = |z|^4: dL/dx + i dL/dy = 4 |z|^2 z
    np.testing.assert_allclose(np.asarray(z.grad), 4 * np.abs(Z) ** 2 * Z, rtol=1e-12)
    # the cotangent bwd saw is PyTorch's too: 2 w for |w|^2
    np.testing.assert_allclose(seen["g"], 2 * Z * Z, rtol=1e-12)


def RELU(xp, z):
    return ad.nn.functional.relu(z)


@pytest.mark.parametrize(
    "f",
    [
        lambda xp, z: xp.maximum(z, z * 2),
        lambda xp, z: xp.max(z),
        lambda xp, z: xp.sort(z),
        lambda xp, z: xp.minimum(z, 1.0),
        RELU,
    ],
    ids=["maximum", "max", "sort", "minimum-scalar", "relu"],
)
def test_real_only_functions_refuse_complex_inputs_that_require_grad(f):
    xp = ad.Autodiff(np)
    z = xp.asarray(Z, requires_grad=True)
    with pytest.raises(TypeError, match="real values only"):
        f(xp, z)
    with ad.no_grad():
        if f is RELU:  # an op of ours, real-valued: refused with or without grad
            with pytest.raises(TypeError, match="nn.relu: complex input"):
                f(xp, z)
        else:  # a function of the standard: the backend's own behaviour
            f(xp, z)


def test_jacobian_of_complex_outputs_says_what_to_use():
    xp = ad.Autodiff(np)
    with pytest.raises(TypeError, match="vjp / jvp"):
        ad.jacobian(lambda z: xp.exp(z))(xp.asarray(Z))
    # a real function of complex inputs: rows are PyTorch-convention gradients
    jac = ad.jacobian(lambda z: xp.abs(z) ** 2)(xp.asarray(Z))
    np.testing.assert_allclose(np.asarray(jac), np.diag(2 * Z), rtol=1e-12)


@pytest.mark.parametrize(
    "name, kw",
    [
        ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
        ("Adam", {"lr": 0.1}),
        ("Adam", {"lr": 0.05, "amsgrad": True}),
        ("AdamW", {"lr": 0.1, "weight_decay": 0.1}),
    ],
)
def test_optimizers_on_complex_parameters_follow_torch(xp, name, kw):
    # torch updates a complex parameter as (real, imaginary) pairs: Adam's second
    # moment is per part, not |g|^2 and not g^2
    from autodiff import optim

    target = np.array([0.3 - 1.0j, 2.0 + 0.0j, -1.0j])
    z = xp.asarray(Z, requires_grad=True)
    opt = getattr(optim, name)([z], **kw)
    t = torch.tensor(Z, requires_grad=True)
    topt = getattr(torch.optim, name)([t], **kw)
    for _ in range(20):
        opt.zero_grad()
        xp.sum(xp.abs(z - xp.asarray(target)) ** 3).backward()
        opt.step()
        topt.zero_grad()
        ((t - torch.tensor(target)).abs() ** 3).sum().backward()
        topt.step()
    np.testing.assert_allclose(np.asarray(z.detach()), t.detach().numpy(), rtol=1e-12, atol=1e-14)
    assert z.dtype == xp.complex128
