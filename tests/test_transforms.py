"""Function transforms with JAX's conventions (grad, value_and_grad, vjp, jvp,
jacobian, hessian, custom_vjp), on Tensors and on raw backend arrays, and
second derivatives through ``backward(create_graph=True)``; every value is
compared with a hand-derived formula or float64 central differences."""

import array_api_compat
import array_api_strict
import numpy as np
import pytest

import autodiff as ad

X = np.array([0.5, -1.0, 2.0])
Y = np.array([1.5, 0.25, -0.75])
M = np.array([[2.0, -1.0, 0.5], [0.0, 1.0, 3.0], [1.0, 0.5, -2.0]])


def to_numpy(t):
    a = t.data if isinstance(t, ad.Tensor) else t
    return np.from_dlpack(a) if hasattr(a, "__dlpack__") else np.asarray(a)


def close(got, expected, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(to_numpy(got), expected, rtol=rtol, atol=atol)


def numeric_grad(f, x, eps=1e-6):
    """Central differences in float64 of a numpy scalar function."""
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[idx] = eps
        g[idx] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


# -- grad and value_and_grad ------------------------------------------------------------
def test_grad_argnums(xp):
    def f(x, y):
        return xp.sum(x**2 * y + xp.sin(y))

    x, y = xp.asarray(X), xp.asarray(Y)
    close(ad.grad(f)(x, y), 2 * X * Y)
    close(ad.grad(f, argnums=1)(x, y), X**2 + np.cos(Y))
    close(ad.grad(f, argnums=-1)(x, y), X**2 + np.cos(Y))
    both = ad.grad(f, argnums=(0, 1))(x, y)
    assert isinstance(both, tuple) and len(both) == 2
    close(both[0], 2 * X * Y)
    close(both[1], X**2 + np.cos(Y))
    one = ad.grad(f, argnums=(1,))(x, y)
    assert isinstance(one, tuple) and len(one) == 1
    close(one[0], X**2 + np.cos(Y))
    assert x.grad is None and y.grad is None  # transforms don't accumulate into .grad


def test_grad_has_aux(xp):
    def f(x):
        y = xp.exp(x)
        return xp.sum(y), {"y": y, "n": 3}

    g, aux = ad.grad(f, has_aux=True)(xp.asarray(X))
    close(g, np.exp(X))
    assert aux["n"] == 3
    close(aux["y"], np.exp(X))


def test_value_and_grad(xp):
    def f(x):
        return xp.sum(x * xp.tanh(x))

    value, g = ad.value_and_grad(f)(xp.asarray(X))
    assert float(value) == pytest.approx(np.sum(X * np.tanh(X)), rel=1e-14)
    close(g, np.tanh(X) + X * (1 - np.tanh(X) ** 2))
    close(g, numeric_grad(lambda v: np.sum(v * np.tanh(v)), X), rtol=1e-7)
    (value, aux), g = ad.value_and_grad(lambda x: (f(x), "aux"), has_aux=True)(xp.asarray(X))
    assert aux == "aux" and float(value) == pytest.approx(np.sum(X * np.tanh(X)))
    close(g, np.tanh(X) + X * (1 - np.tanh(X) ** 2))
    values, grads = ad.value_and_grad(lambda a, b: xp.sum(a * b), argnums=(0, 1))(
        xp.asarray(X), xp.asarray(Y)
    )
    assert float(values) == pytest.approx(X @ Y)
    close(grads[0], Y)
    close(grads[1], X)


def test_grad_of_grad(xp):
    def f(x):
        return xp.sum(xp.sin(x) * x)

    df = ad.grad(f)
    d2 = ad.grad(lambda x: xp.sum(df(x)))
    close(d2(xp.asarray(X)), 2 * np.cos(X) - X * np.sin(X))


def test_grad_needs_a_scalar(xp):
    with pytest.raises(ValueError, match="scalar"):
        ad.grad(lambda x: x * 2.0)(xp.asarray(X))


# -- vjp and jvp --------------------------------------------------------------------------
def test_vjp_returns_one_cotangent_per_primal(xp):
    def f(x, y):
        return x * y + xp.sin(x)

    out, vjp_fn = ad.vjp(f, xp.asarray(X), xp.asarray(Y))
    close(out, X * Y + np.sin(X))
    ct = np.array([1.0, -2.0, 0.5])
    cts = vjp_fn(xp.asarray(ct))
    assert isinstance(cts, tuple) and len(cts) == 2
    close(cts[0], ct * (Y + np.cos(X)))
    close(cts[1], ct * X)
    again = vjp_fn(xp.asarray(2 * ct))  # the function can be pulled back more than once
    close(again[0], 2 * ct * (Y + np.cos(X)))
    (only,) = ad.vjp(lambda x: xp.sum(x**2), xp.asarray(X))[1](xp.asarray(3.0))
    close(only, 6 * X)


def test_vjp_matrix_function(xp):
    out, vjp_fn = ad.vjp(lambda a, x: a @ x, xp.asarray(M), xp.asarray(X))
    close(out, M @ X)
    ga, gx = vjp_fn(xp.asarray(Y))
    close(ga, np.outer(Y, X))
    close(gx, M.T @ Y)


def test_jvp(xp):
    t = np.array([1.0, 0.5, -2.0])
    out, tangent = ad.jvp(lambda x: xp.sin(x) * x, (xp.asarray(X),), (xp.asarray(t),))
    close(out, np.sin(X) * X)
    close(tangent, (np.cos(X) * X + np.sin(X)) * t)
    tx, ty = np.array([1.0, 0.0, 2.0]), np.array([0.5, 1.0, -1.0])
    out, tangent = ad.jvp(
        lambda x, y: xp.exp(x) * y, (xp.asarray(X), xp.asarray(Y)), (xp.asarray(tx), xp.asarray(ty))
    )
    close(out, np.exp(X) * Y)
    close(tangent, np.exp(X) * Y * tx + np.exp(X) * ty)
    _, tangent = ad.jvp(lambda x: xp.sum(x**3), (xp.asarray(X),), (xp.asarray(t),))
    assert tangent.shape == ()
    close(tangent, np.sum(3 * X**2 * t))
    _, tangent = ad.jvp(lambda x: xp.asarray(M) @ x, (xp.asarray(X),), (xp.asarray(t),))
    close(tangent, M @ t)


def test_jvp_nests_in_grad(xp):
    t = xp.asarray(Y)

    def tangent_sum(x, t):
        return xp.sum(ad.jvp(lambda v: xp.sin(v) * v, (x,), (t,))[1])

    # d/dx sum((cos(x) x + sin(x)) t) and d/dt of the same
    close(ad.grad(tangent_sum)(xp.asarray(X), t), (2 * np.cos(X) - X * np.sin(X)) * Y)
    close(ad.grad(tangent_sum, argnums=1)(xp.asarray(X), t), np.cos(X) * X + np.sin(X))


# -- jacobian and hessian ------------------------------------------------------------------
def test_jacobian(xp):
    jac = ad.jacobian(lambda x: xp.sin(x) * x[0])(xp.asarray(X))
    assert jac.shape == (3, 3)
    expected = np.diag(np.cos(X) * X[0])
    expected[:, 0] += np.sin(X)
    close(jac, expected)
    jac = ad.jacobian(lambda x: xp.asarray(M[:2]) @ x)(xp.asarray(X))
    assert jac.shape == (2, 3)
    close(jac, M[:2])
    # A matrix function: d(AA)_ij / dA_kl = delta_ik A_lj + A_ik delta_jl.
    a = M[:2, :2]
    jac = ad.jacobian(lambda m: m @ m)(xp.asarray(a))
    assert jac.shape == (2, 2, 2, 2)
    eye = np.eye(2)
    expected = np.einsum("ik,lj->ijkl", eye, a) + np.einsum("ik,jl->ijkl", a, eye)
    close(jac, expected)
    scalar = ad.jacobian(lambda x: xp.sum(x * x))(xp.asarray(X))
    assert scalar.shape == (3,)
    close(scalar, 2 * X)


def test_jacobian_argnums(xp):
    ja, jb = ad.jacobian(lambda a, b: a * b, argnums=(0, 1))(xp.asarray(X), xp.asarray(Y))
    close(ja, np.diag(Y))
    close(jb, np.diag(X))


def test_hessian(xp):
    h = ad.hessian(lambda x: xp.sum(x**3))(xp.asarray(X))
    assert h.shape == (3, 3)
    close(h, np.diag(6 * X))
    # quadratic form x^T A x: A + A^T
    h = ad.hessian(lambda x: x @ (xp.asarray(M) @ x))(xp.asarray(X))
    close(h, M + M.T)
    x2 = X.reshape(1, 3) * np.array([[1.0], [2.0]])
    h = ad.hessian(lambda x: xp.sum(x**3))(xp.asarray(x2))
    assert h.shape == (2, 3, 2, 3)
    close(h, np.diag((6 * x2).ravel()).reshape(2, 3, 2, 3))
    # mixed terms: f = sum(exp(x) * y) w.r.t. x
    h = ad.hessian(lambda x: xp.sum(xp.exp(x[:2]) * x[1:]))(xp.asarray(X))
    e = np.exp(X)
    expected = np.array([[e[0] * X[1], e[0], 0.0], [e[0], e[1] * X[2], e[1]], [0.0, e[1], 0.0]])
    close(h, expected)


# -- custom_vjp -------------------------------------------------------------------------------
def test_custom_vjp_uses_the_user_rule(xp):
    calls = []

    @ad.custom_vjp
    def square(x):
        return x * x

    def fwd(x):
        return square(x), x

    def bwd(x, g):
        calls.append(1)
        return (g * 2.0 * x * 10.0,)  # deliberately 10 times the true gradient

    square.defvjp(fwd, bwd)
    x = xp.asarray(X, requires_grad=True)
    y = square(x)
    close(y, X * X)
    xp.sum(y * 3.0).backward()
    close(x.grad, 3.0 * 20.0 * X)
    assert calls == [1]
    close(ad.grad(lambda t: xp.sum(square(t)))(xp.asarray(X)), 20.0 * X)
    close(square(xp.asarray(X)), X * X)  # no grad needed: just the function
    assert calls == [1, 1]


def test_custom_vjp_two_arguments(xp):
    @ad.custom_vjp
    def scaled(x, y):
        return x * y

    scaled.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (g * res[1] * -1.0, None))
    x = xp.asarray(X, requires_grad=True)
    y = xp.asarray(Y, requires_grad=True)
    xp.sum(scaled(xp.exp(x), y)).backward()
    close(x.grad, -np.exp(X) * Y)  # the user rule, chained through exp
    assert y.grad is None or np.all(to_numpy(y.grad) == 0)


# -- raw backend arrays ---------------------------------------------------------------------
def standard_loss(w, x):
    """Written against the standard only: no autodiff import."""
    xp = array_api_compat.array_namespace(w, x)
    h = xp.tanh(x @ w)
    return xp.sum(h * h) + xp.sum(w * w) / 2


def standard_loss_np(w, x):
    h = np.tanh(x @ w)
    return np.sum(h * h) + np.sum(w * w) / 2


@pytest.mark.parametrize("backend", [np, array_api_strict], ids=["numpy", "strict"])
def test_transforms_accept_raw_arrays(backend):
    w0 = np.array([0.3, -0.2, 0.5])
    x0 = np.array([[1.0, 2.0, -1.0], [0.5, -0.5, 1.5]])
    w, x = backend.asarray(w0), backend.asarray(x0)
    expected = numeric_grad(lambda v: standard_loss_np(v, x0), w0)
    g = ad.grad(standard_loss)(w, x)
    close(g, expected, rtol=1e-7, atol=1e-9)
    value, g = ad.value_and_grad(standard_loss)(w, x)
    assert float(value) == pytest.approx(standard_loss_np(w0, x0), rel=1e-14)
    close(g, expected, rtol=1e-7, atol=1e-9)
    gx = ad.grad(standard_loss, argnums=1)(w, x)
    close(gx, numeric_grad(lambda v: standard_loss_np(w0, v), x0), rtol=1e-7, atol=1e-9)

    def quartic(v):
        ns = array_api_compat.array_namespace(v)
        return ns.sum(v**4)

    close(ad.grad(quartic)(w), 4 * w0**3)
    close(ad.hessian(quartic)(w), np.diag(12 * w0**2))
    jac = ad.jacobian(lambda v: array_api_compat.array_namespace(v).exp(v))(w)
    close(jac, np.diag(np.exp(w0)))
    out, vjp_fn = ad.vjp(lambda v: v * v, w)
    (ct,) = vjp_fn(backend.asarray(np.ones(3)))
    close(ct, 2 * w0)
    _, tangent = ad.jvp(lambda v: v * v, (w,), (backend.asarray(np.ones(3)),))
    close(tangent, 2 * w0)


def test_grad_of_a_raw_0d_array():
    g = ad.grad(lambda v: v**3)(np.asarray(2.0))
    assert g.shape == () and float(g) == 12.0
    assert type(g) is np.ndarray  # same kind in, same kind out


# -- backward(create_graph=True) ----------------------------------------------------------
def test_backward_create_graph_gives_second_derivatives(xp):
    x = xp.asarray(X, requires_grad=True)
    xp.sum(x**3).backward(create_graph=True)
    g = x.grad
    assert g.requires_grad
    close(g, 3 * X**2)
    x.grad = None
    xp.sum(g).backward()
    close(x.grad, 6 * X)

    x = xp.asarray(X, requires_grad=True)
    xp.sum(xp.exp(x) * x).backward(create_graph=True)
    g = x.grad
    close(g, (X + 1) * np.exp(X))
    x.grad = None
    xp.sum(g * xp.asarray(Y)).backward()
    close(x.grad, (X + 2) * np.exp(X) * Y)


def test_hessian_vector_product_through_create_graph(xp):
    a = xp.asarray(M)
    x = xp.asarray(X, requires_grad=True)
    (x @ (a @ x)).backward(create_graph=True)
    g = x.grad
    close(g, (M + M.T) @ X)
    x.grad = None
    xp.sum(g * xp.asarray(Y)).backward()
    close(x.grad, (M + M.T) @ Y)


def test_create_graph_through_a_two_input_function(xp):
    x = xp.asarray(X, requires_grad=True)
    y = xp.asarray(Y, requires_grad=True)
    xp.sum(xp.sin(x) * y * y).backward(create_graph=True)
    gx, gy = x.grad, y.grad
    close(gx, np.cos(X) * Y * Y)
    close(gy, 2 * np.sin(X) * Y)
    x.grad = y.grad = None
    xp.sum(gx + gy).backward()
    close(x.grad, -np.sin(X) * Y * Y + 2 * np.cos(X) * Y)
    close(y.grad, 2 * np.cos(X) * Y + 2 * np.sin(X))
