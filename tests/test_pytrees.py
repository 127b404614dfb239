"""Pytrees in the transforms (JAX's rules), same kind in and out, and
nn.functional_call. Gradients are checked against hand-derived formulas."""

import collections

import numpy as np
import pytest

import autodiff as ad
import autodiff.nn as nn
import autodiff.nn.functional as F
from autodiff import pytree

xp = ad.Autodiff(np)
rng = np.random.default_rng(0)
X = rng.standard_normal((5, 3))
Y = rng.standard_normal((5, 1))


def linear_loss(p, x, y):
    return xp.mean((x @ p["w"] + p["b"] - y) ** 2)


def linear_grads(w, b):
    """d/dw, d/db of mean((X w + b - Y)^2), by hand."""
    r = X @ w + b - Y
    return 2 * X.T @ r / r.size, 2 * np.sum(r, axis=0) / r.size


# -- pytree itself --------------------------------------------------------------------------
P = collections.namedtuple("P", "a b")


@pytest.mark.parametrize(
    "tree",
    [
        {"b": 1, "a": [2, (3, None)], "c": {}},
        [1, (2, 3), {"x": 4}],
        P(1, [2, 3]),
        (),
        None,
        5,
    ],
)
def test_flatten_unflatten_round_trip(tree):
    leaves, td = pytree.flatten(tree)
    assert pytree.unflatten(td, leaves) == tree
    assert all(isinstance(v, int) for v in leaves)


def test_dict_leaves_come_in_sorted_key_order_and_none_holds_none():
    assert pytree.leaves({"b": 1, "a": 2, "c": None}) == [2, 1]
    assert pytree.tree_map(lambda u, v: u + v, {"a": 1, "b": [2]}, {"a": 10, "b": [20]}) == {
        "a": 11,
        "b": [22],
    }
    with pytest.raises(ValueError, match="different structures"):
        pytree.tree_map(lambda u, v: u, {"a": 1}, {"b": 1})


# -- grad over trees ------------------------------------------------------------------------
def test_grad_of_a_dict_of_parameters_has_its_structure():
    w, b = rng.standard_normal((3, 1)), rng.standard_normal(1)
    g = ad.grad(linear_loss)({"w": w, "b": b}, X, Y)
    gw, gb = linear_grads(w, b)
    assert set(g) == {"w", "b"}
    assert type(g["w"]) is np.ndarray and type(g["b"]) is np.ndarray  # NumPy in, NumPy out
    np.testing.assert_allclose(g["w"], gw, rtol=1e-13)
    np.testing.assert_allclose(g["b"], gb, rtol=1e-13)


def test_nested_lists_tuples_named_tuples_and_none():
    a, b, c = np.array([1.0, 2.0]), np.array([3.0, -1.0]), np.array(0.5)

    def f(tree):
        (u, [v, nothing]), q = tree
        assert nothing is None
        return xp.sum(u * v) * q.a + xp.sum(q.b**2)

    g = ad.grad(f)(((a, [b, None]), P(c, a)))
    (gu, [gv, gnone]), gq = g
    assert gnone is None and isinstance(gq, P)
    np.testing.assert_allclose(gu, b * c)
    np.testing.assert_allclose(gv, a * c)
    np.testing.assert_allclose(gq.a, np.sum(a * b))
    np.testing.assert_allclose(gq.b, 2 * a)


def test_argnums_tuple_and_value_and_grad_with_aux():
    def f(p, scale):
        loss = linear_loss(p, X, Y) * scale
        return loss, {"loss": loss, "note": "aux is returned as it is"}

    w, b = np.ones((3, 1)), np.zeros(1)
    (value, aux), (gp, gs) = ad.value_and_grad(f, argnums=(0, 1), has_aux=True)(
        {"w": w, "b": b}, 2.0
    )
    plain = float(np.mean((X @ w + b - Y) ** 2))
    assert type(value) is np.ndarray and float(value) == pytest.approx(2 * plain, rel=1e-14)
    assert aux["note"] == "aux is returned as it is" and type(aux["loss"]) is np.ndarray
    gw, gb = linear_grads(w, b)
    np.testing.assert_allclose(gp["w"], 2 * gw, rtol=1e-13)
    assert type(gs) is float and gs == pytest.approx(plain, rel=1e-14)


# -- same kind in, same kind out -------------------------------------------------------------
def test_a_python_number_in_gives_a_python_number_out():
    assert ad.grad(lambda x: x**3)(2.0) == 12.0
    assert type(ad.grad(lambda x: x**3)(2.0)) is float
    assert ad.grad(lambda x, y: x * y, argnums=(0, 1))(2.0, 5.0) == (5.0, 2.0)


def test_tensors_in_give_tensors_out_and_nesting_still_works():
    x = xp.asarray(np.array([0.3, -1.2]))
    g = ad.grad(lambda v: xp.sum(xp.sin(v)))(x)
    assert isinstance(g, ad.Tensor)
    np.testing.assert_allclose(np.asarray(g), np.cos([0.3, -1.2]))
    # grad of grad: the inner transform sees Tensors, so the outer one can differentiate it
    g2 = ad.grad(lambda v: xp.sum(ad.grad(lambda u: xp.sum(xp.sin(u) * u))(v)))(np.array([0.3]))
    # d/dv (cos v * v + sin v) = -sin v * v + 2 cos v
    np.testing.assert_allclose(g2, -np.sin(0.3) * 0.3 + 2 * np.cos(0.3), rtol=1e-14)
    assert type(g2) is np.ndarray


def test_a_raw_value_among_tensor_leaves_is_given_as_a_tensor():
    # one Tensor among the leaves: the result is in Tensors (what nesting needs)
    g = ad.grad(lambda p: xp.sum(p[0] * p[1]))([xp.asarray([2.0]), np.array([3.0])])
    assert all(isinstance(v, ad.Tensor) for v in g)
    np.testing.assert_allclose([float(g[0][0]), float(g[1][0])], [3.0, 2.0])


def test_vjp_of_a_tree_valued_function():
    a = np.array([0.2, 0.7])
    out, vjp_fn = ad.vjp(lambda t: {"s": xp.sin(t["x"]), "p": (t["x"] * t["y"],)},
                         {"x": a, "y": 2.0})  # fmt: skip
    assert type(out["s"]) is np.ndarray
    np.testing.assert_allclose(out["p"][0], 2 * a)
    u, v = np.array([1.0, -1.0]), np.array([0.5, 2.0])
    (g,) = vjp_fn({"s": u, "p": (v,)})
    np.testing.assert_allclose(g["x"], np.cos(a) * u + 2.0 * v)
    assert type(g["y"]) is float and g["y"] == pytest.approx(float(np.sum(a * v)))
    with pytest.raises(ValueError, match="vjp: the cotangent's structure"):
        vjp_fn({"s": u})


def test_errors_name_the_transform():
    with pytest.raises(TypeError, match="grad: expected an array or a Tensor, got str"):
        ad.grad(lambda s: s)("text")
    with pytest.raises(TypeError, match="grad: the function must return a Tensor"):
        ad.grad(lambda x: 1.0)(np.ones(2))
    with pytest.raises(TypeError, match="only floating-point"):
        ad.grad(lambda x: x)(3)


# -- functional_call -----------------------------------------------------------------------
def _mlp():
    return nn.Sequential(
        nn.Linear(3, 4, xp=xp, dtype=xp.float64),
        nn.Tanh(),
        nn.Linear(4, 1, xp=xp, dtype=xp.float64),
    )


def test_functional_call_gradients_equal_backward_and_leave_the_module_alone():
    model = _mlp()
    own = {k: np.asarray(v.detach()).copy() for k, v in model.named_parameters()}
    params = {k: v.detach() * 1.0 for k, v in model.named_parameters()}
    x, y = xp.asarray(X), xp.asarray(Y)
    g = ad.grad(lambda p: F.mse_loss(nn.functional_call(model, p, (x,)), y))(params)
    assert all(v.grad is None for v in model.parameters())  # nothing accumulated
    F.mse_loss(model(x), y).backward()
    for k, v in model.named_parameters():
        np.testing.assert_array_equal(np.asarray(g[k]), np.asarray(v.grad))
        np.testing.assert_array_equal(np.asarray(v.detach()), own[k])
    # and the functional call used the given values, not the module's
    zero = {k: xp.zeros_like(v) for k, v in params.items()}
    np.testing.assert_array_equal(np.asarray(nn.functional_call(model, zero, x)), np.zeros((5, 1)))
    assert model[0].weight is list(model.parameters())[0]


def test_functional_call_with_a_dict_of_numpy_arrays_and_the_torch_example_form():
    model = _mlp()
    params = {k: np.asarray(v.detach()) for k, v in model.named_parameters()}
    g = ad.grad(
        lambda p: F.mse_loss(nn.functional_call(model, p, (xp.asarray(X),)), xp.asarray(Y))
    )(params)
    F.mse_loss(model(xp.asarray(X)), xp.asarray(Y)).backward()
    for k, v in model.named_parameters():
        assert type(g[k]) is np.ndarray
        np.testing.assert_allclose(g[k], np.asarray(v.grad), rtol=1e-14)
    # torch's example: the module's own named_parameters() as the dict
    g2 = ad.grad(
        lambda p: F.mse_loss(nn.functional_call(model, p, (xp.asarray(X),)), xp.asarray(Y))
    )(dict(model.named_parameters()))
    for k, v in model.named_parameters():
        np.testing.assert_allclose(np.asarray(g2[k].detach()), np.asarray(v.grad), rtol=1e-14)


def test_functional_call_errors_and_restores_on_failure():
    model = _mlp()
    w = model[0].weight
    with pytest.raises(ValueError, match="functional_call: Sequential has no parameter or buffer"):
        nn.functional_call(model, {"0.wieght": np.ones((4, 3))}, (X,))
    with pytest.raises(ValueError, match="strict=True and no value is given"):
        nn.functional_call(model, {"0.weight": np.ones((4, 3))}, (X,), strict=True)
    with pytest.raises(ValueError, match=r"'0.weight' has shape \(3, 4\)"):
        nn.functional_call(model, {"0.weight": np.ones((3, 4))}, (X,))
    with pytest.raises(ValueError):  # the forward fails: the module is put back all the same
        nn.functional_call(model, {"0.weight": np.ones((4, 3))}, (np.ones((2, 7)),))
    assert model[0].weight is w and model[0]._parameters["weight"] is w


def test_functional_call_ties_shared_weights_and_replaces_buffers():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 2, bias=False, xp=xp, dtype=xp.float64)
            self.b = nn.Linear(2, 2, bias=False, xp=xp, dtype=xp.float64)
            self.b.weight = self.a.weight  # tied
            self.register_buffer("shift", xp.zeros(2, dtype=xp.float64))

        def forward(self, x):
            return self.b(self.a(x)) + self.shift

    m = Tied()
    eye = np.eye(2)
    x = xp.asarray(np.array([[1.0, 2.0]]))
    out = nn.functional_call(m, {"a.weight": 2 * eye, "shift": np.array([1.0, 0.0])}, (x,))
    np.testing.assert_allclose(np.asarray(out.detach()), [[5.0, 8.0]])  # both uses took 2 I
    out = nn.functional_call(m, {"a.weight": 2 * eye}, (x,), tie_weights=False)
    w = np.asarray(m.a.weight.detach())
    np.testing.assert_allclose(np.asarray(out.detach()), ([[1.0, 2.0]] @ (2 * eye).T) @ w.T)


def test_forward_mode_and_jacobians_give_the_callers_kind():
    x = np.array([0.3, 1.2])
    f = lambda v: xp.sum(xp.sin(v) * v)  # noqa: E731
    out, tangent = ad.jvp(xp.sin, (x,), (np.ones(2),))
    assert type(out) is np.ndarray and type(tangent) is np.ndarray
    np.testing.assert_allclose(tangent, np.cos(x))
    g, hv = ad.hvp(f, (x,), (np.ones(2),))
    assert type(g) is np.ndarray and type(hv) is np.ndarray
    d2 = 2 * np.cos(x) - x * np.sin(x)  # d^2/dx^2 of sin(x) x
    np.testing.assert_allclose(hv, d2)
    for jac in (ad.jacfwd, ad.jacrev, ad.jacobian):
        J = jac(xp.sin)(x)
        assert type(J) is np.ndarray
        np.testing.assert_allclose(J, np.diag(np.cos(x)))
    H = ad.hessian(f)(x)
    assert type(H) is np.ndarray
    np.testing.assert_allclose(H, np.diag(d2))
    assert isinstance(ad.hessian(f)(xp.asarray(x)), ad.Tensor)  # Tensors in, Tensors out


def test_a_closure_over_an_enclosing_variable_keeps_its_gradient():
    # grad of a function that takes grad of raw data, closing over the outer variable:
    # d/dw sum_i d/dx_i sin(x_i w_i) = cos(x w) - x w sin(x w)
    w, x = np.array([0.5, 1.0, -2.0]), np.array([0.3, 0.7, 1.1])
    g = ad.grad(lambda w: xp.sum(ad.grad(lambda v: xp.sum(xp.sin(v * w)))(x)))(w)
    np.testing.assert_allclose(g, np.cos(x * w) - x * w * np.sin(x * w), rtol=1e-14)
    # vmap of raw data inside grad, closing over w: the examples' sum reaches w
    X = rng.standard_normal((4, 3))
    g = ad.grad(lambda w: xp.sum(ad.vmap(lambda r: r * w)(X)))(w)
    np.testing.assert_allclose(g, X.sum(axis=0), rtol=1e-14)
    # a closure over a model's parameters alone is a constant there: raw out, no record
    model = _mlp()
    s = ad.grad(lambda v: xp.sum(model(v)))(X[:1])
    assert type(s) is np.ndarray and s.shape == (1, 3)


@pytest.mark.parametrize("jac", [ad.jacfwd, ad.jacrev])
def test_jacobians_of_trees_have_the_output_tree_of_argument_trees(jac):
    x, y = np.array([0.3, 1.2]), np.array([2.0])
    J = jac(lambda p: {"s": xp.sin(p["x"]) * p["y"], "c": xp.sum(p["x"] ** 2)})({"x": x, "y": y})
    np.testing.assert_allclose(J["s"]["x"], np.diag(np.cos(x) * 2.0))
    np.testing.assert_allclose(J["s"]["y"], np.sin(x)[:, None])
    np.testing.assert_allclose(J["c"]["x"], 2 * x)
    np.testing.assert_allclose(J["c"]["y"], [0.0])


def test_hessian_of_a_tuple_argument():
    x, y = np.array([0.3, 1.2]), np.array([2.0])
    (hxx, hxy), (hyx, hyy) = ad.hessian(lambda p: xp.sum(p[0] ** 2 * p[1]))((x, y))
    # f = y sum(x^2): H_xx = 2y I, H_xy = 2x, H_yy = 0
    np.testing.assert_allclose(hxx, 4.0 * np.eye(2))
    np.testing.assert_allclose(hxy, 2 * x[:, None])
    np.testing.assert_allclose(hyx, 2 * x[None, :])
    np.testing.assert_allclose(hyy, [[0.0]])
