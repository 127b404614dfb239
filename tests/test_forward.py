"""Forward mode (autodiff/forward.py): ``jvp`` as one forward pass through the ops' JVP
rules, ``jacfwd``, ``hvp``, ``hessian = jacfwd(jacrev(f))``, ``custom_jvp``, the
per-node double-VJP fallback, nesting and complex values. Values are asserted in
float64 against hand-derived formulas or central differences; every op's JVP rule is
checked from gradcheck's specs (against central differences and its VJP rule)."""

import numpy as np
import pytest

import autodiff as ad
from autodiff.engine import registry
from autodiff.transforms import forward
from gradcheck.cli import _unsupported
from gradcheck.core import check_jvp, check_jvp_second
from gradcheck.specs import SPECS

X = np.array([0.5, -1.0, 2.0])
T = np.array([1.0, 0.5, -2.0])
M = np.array([[2.0, -1.0, 0.5], [0.0, 1.0, 3.0], [1.0, 0.5, -2.0]])


def val(t):
    return np.asarray((t.detach() if isinstance(t, ad.Tensor) else t).data)


def close(got, expected, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(val(got), expected, rtol=rtol, atol=atol)


def directional(f, x, v, eps=1e-6):
    """Central difference of a NumPy function along v."""
    return (f(x + eps * v) - f(x - eps * v)) / (2 * eps)


# -- jvp ------------------------------------------------------------------------------
def test_jvp_of_element_wise_chain_against_formula_and_differences(xp):
    def f(x):
        return xp.sin(x) * xp.exp(x) + xp.tanh(x) ** 2 / (1 + x * x)

    def f_np(x):
        return np.sin(x) * np.exp(x) + np.tanh(x) ** 2 / (1 + x * x)

    out, tangent = ad.jvp(f, (xp.asarray(X),), (xp.asarray(T),))
    close(out, f_np(X))
    th = np.tanh(X)
    d = (np.cos(X) + np.sin(X)) * np.exp(X) + (
        2 * th * (1 - th**2) * (1 + X * X) - th**2 * 2 * X
    ) / (1 + X * X) ** 2
    close(tangent, d * T)
    close(tangent, directional(f_np, X, T), rtol=1e-7)
    assert not out.requires_grad and not tangent.requires_grad


def test_jvp_of_linear_algebra_against_formulas(xp):
    a, b = xp.asarray(M), xp.asarray(X)
    ta, tb = xp.asarray(M[::-1] * 0.3), xp.asarray(T)
    tan_a = M[::-1] * 0.3
    inv = np.linalg.inv(M)
    _, t = ad.jvp(lambda m: xp.linalg.inv(m), (a,), (ta,))
    close(t, -inv @ tan_a @ inv)
    _, t = ad.jvp(lambda m, v: xp.linalg.solve(m, v), (a, b), (ta, tb))
    close(t, inv @ (T - tan_a @ inv @ X))
    _, t = ad.jvp(lambda m: xp.linalg.det(m), (a,), (ta,))
    close(t, np.linalg.det(M) * np.trace(inv @ tan_a))
    _, t = ad.jvp(lambda m, v: m @ v, (a, b), (ta, tb))
    close(t, tan_a @ X + M @ T)
    spd = M @ M.T + 3 * np.eye(3)
    dspd = tan_a + tan_a.T
    _, t = ad.jvp(lambda m: xp.linalg.cholesky(m), (xp.asarray(spd),), (xp.asarray(dspd),))
    L = np.linalg.cholesky(spd)
    Li = np.linalg.inv(L)
    P = Li @ dspd @ Li.T
    close(t, L @ (np.tril(P) - np.diag(np.diag(P)) / 2))


def test_jvp_of_softmax_family(xp):
    from autodiff.nn import functional as F

    x = np.array([[0.3, -1.2, 0.7], [1.1, 0.4, -0.6]])
    t = np.array([[1.0, 0.0, -1.0], [0.5, 2.0, 0.1]])
    s = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    _, tan = ad.jvp(lambda a: F.softmax(a, axis=1), (xp.asarray(x),), (xp.asarray(t),))
    close(tan, s * (t - (s * t).sum(axis=1, keepdims=True)))
    _, tan = ad.jvp(lambda a: F.log_softmax(a, axis=1), (xp.asarray(x),), (xp.asarray(t),))
    close(tan, t - (s * t).sum(axis=1, keepdims=True))
    _, tan = ad.jvp(lambda a: F.logsumexp(a, axis=1), (xp.asarray(x),), (xp.asarray(t),))
    close(tan, (s * t).sum(axis=1))


def test_jvp_several_outputs_and_pytrees(xp):
    def f(p):
        return {"y": xp.sin(p["a"]) * p["b"], "z": (xp.sum(p["a"] ** 2),)}

    primal = {"a": xp.asarray(X), "b": xp.asarray(M[0])}
    tangent = {"a": xp.asarray(T), "b": xp.asarray(np.ones(3))}
    out, tan = ad.jvp(f, (primal,), (tangent,))
    assert set(tan) == {"y", "z"} and isinstance(tan["z"], tuple)
    close(tan["y"], np.cos(X) * T * M[0] + np.sin(X))
    close(tan["z"][0], np.sum(2 * X * T))
    close(out["y"], np.sin(X) * M[0])


def test_jvp_of_a_constant_output_is_zero(xp):
    c = xp.asarray(M)
    _, t = ad.jvp(lambda x: c * 2.0, (xp.asarray(X),), (xp.asarray(T),))
    close(t, np.zeros((3, 3)))


def test_jvp_is_one_forward_pass_without_a_backward(xp, monkeypatch):
    # the backward pass is never entered on an op with a rule
    def no_backward(*a, **k):
        raise AssertionError("a backward pass ran")

    monkeypatch.setattr(ad.engine.backward.Pass, "run", no_backward)
    _, t = ad.jvp(lambda x: xp.sum(xp.exp(x) @ xp.asarray(M)), (xp.asarray(X),), (xp.asarray(T),))
    close(t, np.sum((np.exp(X) * T) @ M))


def test_jvp_errors(xp):
    with pytest.raises(TypeError, match="complex"):
        ad.jvp(xp.sin, (xp.asarray(X),), (xp.asarray(T + 1j),))
    with pytest.raises(ValueError, match="structure"):
        ad.jvp(lambda a: a, ({"a": xp.asarray(X)},), ({"b": xp.asarray(X)},))
    with pytest.raises(TypeError, match="must return Tensors"):
        ad.jvp(lambda a: "nope", (xp.asarray(X),), (xp.asarray(T),))


# -- complex --------------------------------------------------------------------------------
Z = np.array([0.5 + 1.0j, -1.0 + 0.25j, 2.0 - 0.5j])
V = np.array([0.3 + 0.1j, -1.0, 1.0j])


def test_complex_jvp_holomorphic_and_not():
    xp = ad.Autodiff(np)
    _, t = ad.jvp(lambda z: xp.exp(z) * z, (xp.asarray(Z),), (xp.asarray(V),))
    close(t, np.exp(Z) * (1 + Z) * V)
    _, t = ad.jvp(lambda z: xp.abs(z) ** 2, (xp.asarray(Z),), (xp.asarray(V),))
    close(t, 2 * np.real(np.conj(Z) * V))
    _, t = ad.jvp(xp.conj, (xp.asarray(Z),), (xp.asarray(V),))
    close(t, np.conj(V))
    s = Z / np.abs(Z)
    _, t = ad.jvp(lambda z: xp.sign(z), (xp.asarray(Z),), (xp.asarray(V),))
    close(t, (V - s * s * np.conj(V)) / (2 * np.abs(Z)))
    _, t = ad.jvp(lambda z: xp.imag(z * z), (xp.asarray(Z),), (xp.asarray(V),))
    close(t, np.imag(2 * Z * V))
    # a real input through complex intermediates: d|rfft(x)|^2
    x, v = np.array([0.3, -1.0, 2.0, 0.5]), np.array([1.0, 0.0, -0.5, 2.0])
    _, t = ad.jvp(lambda a: xp.sum(xp.abs(xp.fft.rfft(a)) ** 2), (xp.asarray(x),),
                  (xp.asarray(v),))  # fmt: skip
    close(t, directional(lambda a: np.sum(np.abs(np.fft.rfft(a)) ** 2), x, v), rtol=1e-7)


def test_jacfwd_refuses_complex_inputs_but_takes_complex_outputs():
    xp = ad.Autodiff(np)
    with pytest.raises(TypeError, match="complex"):
        ad.jacfwd(lambda z: z * 2)(xp.asarray(Z))
    jac = ad.jacfwd(lambda x: xp.exp(1j * x))(xp.asarray(X))
    close(jac, np.diag(1j * np.exp(1j * X)))


# -- jacfwd, jacrev, hessian, hvp ----------------------------------------------------------
def test_jacfwd_equals_jacrev(xp):
    fs = [
        lambda x: xp.sin(x) * x[0],
        lambda x: xp.linalg.solve(xp.asarray(M) + xp.eye(3) * x[1], x),
        lambda x: xp.reshape(xp.cumulative_sum(x**2), (3, 1)) @ xp.reshape(x, (1, 3)),
    ]
    for f in fs:
        fwd, rev = ad.jacfwd(f)(xp.asarray(X)), ad.jacrev(f)(xp.asarray(X))
        assert fwd.shape == rev.shape
        close(fwd, val(rev))
    ja, jb = ad.jacfwd(lambda a, b: a * b, argnums=(0, 1))(xp.asarray(X), xp.asarray(T))
    close(ja, np.diag(T))
    close(jb, np.diag(X))
    assert ad.jacobian is ad.jacrev


def test_jacfwd_of_r1_to_rn_is_one_forward_pass(xp, monkeypatch):
    n = 1000
    grid = xp.asarray(np.linspace(0.0, 1.0, n))
    pushes = []
    push = forward.Forward.push
    monkeypatch.setattr(forward.Forward, "push", lambda self, *a, **k: pushes.append(1)
                        or push(self, *a, **k))  # fmt: skip
    jac = ad.jacfwd(lambda s: xp.sin(grid * s) * s)(xp.asarray(np.asarray(0.7)))
    assert pushes == [1] and jac.shape == (n,)
    g = np.linspace(0.0, 1.0, n)
    close(jac, np.cos(g * 0.7) * g * 0.7 + np.sin(g * 0.7))


def test_hessian_is_jacfwd_of_jacrev(xp):
    def f(x):
        return xp.sum(xp.exp(x[:2]) * x[1:]) + x @ (xp.asarray(M) @ x)

    h = ad.hessian(f)(xp.asarray(X))
    e = np.exp(X)
    expected = np.array([[e[0] * X[1], e[0], 0.0], [e[0], e[1] * X[2], e[1]], [0.0, e[1], 0.0]])
    close(h, expected + M + M.T)
    close(h, val(ad.jacfwd(ad.jacrev(f))(xp.asarray(X))))


def test_hvp_equals_hessian_times_v(xp):
    def f(x):
        return xp.sum(xp.tanh(x) ** 3) + xp.linalg.det(xp.reshape(x, (1, 3)).mT @ xp.reshape(
            x, (1, 3)) + xp.eye(3))  # fmt: skip

    g, hv = ad.hvp(f, (xp.asarray(X),), (xp.asarray(T),))
    h = val(ad.hessian(f)(xp.asarray(X)))
    close(hv, h @ T, rtol=1e-9)
    close(g, val(ad.grad(f)(xp.asarray(X))))
    # several primals: JAX's jvp(grad(f, argnums=all)) convention, a tuple each
    gs, hvs = ad.hvp(lambda a, b: xp.sum(a * a * b), (xp.asarray(X), xp.asarray(T)),
                     (xp.asarray(np.ones(3)), xp.asarray(np.zeros(3))))  # fmt: skip
    assert isinstance(gs, tuple) and isinstance(hvs, tuple)
    close(hvs[0], 2 * T)  # d2/da2 = 2b, d2/dadb = 2a (times 0)
    close(hvs[1], 2 * X)


# -- nesting ----------------------------------------------------------------------------------
def test_grad_of_jvp(xp):
    def tangent_sum(x, t):
        return xp.sum(ad.jvp(lambda v: xp.sin(v) * v, (x,), (t,))[1])

    x, t = xp.asarray(X), xp.asarray(T)
    close(ad.grad(tangent_sum)(x, t), (2 * np.cos(X) - X * np.sin(X)) * T)
    close(ad.grad(tangent_sum, argnums=1)(x, t), np.cos(X) * X + np.sin(X))


def test_jvp_records_when_it_closes_over_a_tensor_that_requires_grad(xp):
    w = xp.asarray(M, requires_grad=True)
    _, t = ad.jvp(lambda x: xp.sum(xp.tanh(w @ x)), (xp.asarray(X),), (xp.asarray(T),))
    assert t.requires_grad
    t.backward()
    # d/dW sum((1 - tanh(Wx)^2) W t)
    y = np.tanh(M @ X)
    expected = np.outer(-2 * y * (1 - y**2) * (M @ T), X) + np.outer(1 - y**2, T)
    close(w.grad, expected)


def test_jacfwd_of_jacfwd(xp):
    h = ad.jacfwd(ad.jacfwd(lambda x: xp.sum(x**3) * x[0]))(xp.asarray(X))
    close(h, val(ad.hessian(lambda x: xp.sum(x**3) * x[0])(xp.asarray(X))))


# -- the fallback ----------------------------------------------------------------------------
def test_an_op_without_a_jvp_rule_falls_back_to_its_vjp(xp):
    assert registry.get("cumulative_prod").jvp_kind == "fallback"
    assert registry.get("linalg.qr").jvp_kind == "fallback"
    x = np.array([0.5, -1.5, 2.0, 0.25])
    _, t = ad.jvp(lambda a: xp.cumulative_prod(a), (xp.asarray(x),), (xp.asarray(T[[0, 1, 2, 0]]),))
    close(t, directional(np.cumprod, x, T[[0, 1, 2, 0]]), rtol=1e-7)

    # and nested: its recorded fallback differentiates again
    def h(a):
        return xp.sum(ad.jvp(lambda b: xp.linalg.qr(b).R, (a,), (xp.asarray(M.T),))[1])

    def h_np(a):
        eps = 1e-6
        return np.sum(np.linalg.qr(a + eps * M.T)[1] - np.linalg.qr(a - eps * M.T)[1]) / (2 * eps)

    g = ad.grad(h)(xp.asarray(M + 3 * np.eye(3)))
    num = np.zeros((3, 3))
    for idx in np.ndindex(3, 3):
        d = np.zeros((3, 3))
        d[idx] = 1e-4
        num[idx] = (h_np(M + 3 * np.eye(3) + d) - h_np(M + 3 * np.eye(3) - d)) / 2e-4
    close(g, num, rtol=1e-4, atol=1e-6)


def test_custom_vjp_functions_fall_back_in_forward_mode(xp):
    @ad.custom_vjp
    def sine(x):
        return xp.sin(x)

    sine.defvjp(lambda x: (xp.sin(x), xp.cos(x)), lambda cos, g: (g * cos * 2.0,))  # twice
    _, t = ad.jvp(lambda x: sine(x), (xp.asarray(X),), (xp.asarray(T),))
    close(t, 2 * np.cos(X) * T)  # forward mode transposes the user's rule


# -- custom_jvp ---------------------------------------------------------------------------------
def test_custom_jvp_forward_and_reverse(xp):
    calls = []

    @ad.custom_jvp
    def f(x, y):
        return xp.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        calls.append(1)
        x, y = primals
        tx, ty = tangents
        # deliberately 10 times the true x-derivative: proves the rule is the user's
        return f(x, y), 10.0 * xp.cos(x) * y * tx + xp.sin(x) * ty

    x, y = xp.asarray(X), xp.asarray(T)
    close(f(x, y), np.sin(X) * T)
    _, t = ad.jvp(f, (x, y), (xp.asarray(np.ones(3)), xp.asarray(np.zeros(3))))
    close(t, 10.0 * np.cos(X) * T)
    assert calls == [1]
    # reverse mode transposes it
    close(ad.grad(lambda a: xp.sum(f(a, y)))(x), 10.0 * np.cos(X) * T)
    close(ad.grad(lambda b: xp.sum(f(x, b)))(y), np.sin(X))
    # second order, forward over reverse: d/dx of 10 cos(x) y
    close(ad.hessian(lambda a: xp.sum(f(a, y)))(x), np.diag(-10.0 * np.sin(X) * T))


# -- every op's JVP rule, from gradcheck's specs ---------------------------------------------
CASES = [
    pytest.param(name, i, id=f"{name}[{s.label}]")
    for name, spec in sorted(SPECS.items())
    for i, s in enumerate(spec.samples())
]
SECOND = [p for p in CASES if SPECS[p.values[0]].second_order]
COMPLEX = [p for p in CASES if registry.get(p.values[0]).complex]


@pytest.mark.parametrize("name, i", CASES)
def test_jvp_rule(xp, name, i):
    spec = SPECS[name]
    sample = spec.samples()[i]
    check_jvp(lambda *t: sample.call(xp, *t), *sample.inputs, xp=xp, atol=max(spec.atol, 1e-6),
              rtol=max(spec.rtol, 1e-5))  # fmt: skip


@pytest.mark.parametrize("name, i", SECOND)
def test_jvp_rule_second_order(name, i):
    xp = ad.Autodiff(np)
    sample = SPECS[name].samples()[i]
    check_jvp_second(lambda *t: sample.call(xp, *t), *sample.inputs, xp=xp)


@pytest.mark.parametrize("name, i", COMPLEX)
def test_jvp_rule_complex(name, i):
    xp = ad.Autodiff(np)
    spec = SPECS[name]
    sample = spec.samples()[i]
    if _unsupported(xp, sample, "complex128") is not None:
        return
    check_jvp(lambda *t: sample.call(xp, *t), *sample.inputs, xp=xp, atol=max(spec.atol, 1e-6),
              rtol=max(spec.rtol, 1e-5), dtype="complex128")  # fmt: skip


def test_every_differentiable_op_says_where_its_jvp_comes_from():
    kinds = {op.jvp_kind for op in registry.ops().values() if op.kind == registry.DIFF}
    assert kinds <= set(registry.JVP_KINDS)
    derived = [n for n, op in registry.ops().items() if op.jvp_kind == "derived"]
    # derived only where sound: diagonal, and holomorphic or real-only
    assert all(registry.get(n).diagonal for n in derived)
    for name in ("abs", "sign", "conj", "real", "imag"):
        assert registry.get(name).jvp_kind != "derived", name
