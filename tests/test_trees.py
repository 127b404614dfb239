"""Every transform takes and returns pytrees (issue 29 item 9): Jacobians and Hessians
of tree-valued functions of trees in JAX's structure, hvp of trees, registered classes
and dataclasses as nodes, Python numbers and constant outputs in the Jacobians, vmap
of hvp, hooks and per-example gradients inside vmap, same kind in and out. Values are
asserted in float64 against JAX (the same functions in ``jax.numpy``, the same classes
registered with ``jax.tree_util``) or hand-derived formulas."""

import collections
import dataclasses
import doctest
import warnings

import numpy as np
import pytest

import autodiff as ad
from autodiff import pytree

rng = np.random.default_rng(29)
X = np.array([0.5, -1.0, 2.0])
V = np.array([1.0, 0.25, -0.5])
NT = collections.namedtuple("NT", "u v")


@dataclasses.dataclass
class Params:
    w: object
    b: object


class Pair:
    """A class registered below (and with JAX in the comparisons)."""

    def __init__(self, first, second):
        self.first, self.second = first, second


pytree.register_pytree_node(Pair, lambda p: ((p.first, p.second), None), lambda _, c: Pair(*c))


def val(t):
    return np.asarray(t.detach().data if isinstance(t, ad.Tensor) else t)


def close(got, expected, rtol=1e-12, atol=1e-12):
    np.testing.assert_allclose(val(got), np.asarray(expected), rtol=rtol, atol=atol)


def close_trees(got, expected, rtol=1e-12):
    """Two trees of the same structure (types and keys), leaf by leaf."""
    g_leaves, g_td = pytree.flatten(got)
    e_leaves, e_td = pytree.flatten(expected)
    assert g_td == e_td, (pytree.describe(g_td), pytree.describe(e_td))
    for g, e in zip(g_leaves, e_leaves):
        close(g, e, rtol=rtol)


class Backend:
    """A namespace under test: ``xp`` (recording), ``arr`` (a NumPy array as its raw
    array) and ``raw`` (the type of its raw arrays)."""

    def __init__(self, module, arr):
        self.xp = ad.Autodiff(module)
        self.arr = arr
        self.raw = type(arr(np.zeros(1)))


@pytest.fixture(params=["numpy", "strict", "torch"])
def be(request):
    if request.param == "numpy":
        return Backend(np, np.asarray)
    if request.param == "strict":
        strict = pytest.importorskip("array_api_strict")
        return Backend(strict, strict.asarray)
    torch = pytest.importorskip("torch", reason="the torch cases need torch")
    compat = pytest.importorskip("array_api_compat.torch")
    return Backend(compat, lambda a: torch.asarray(np.asarray(a)))


@pytest.fixture(scope="module")
def jax():
    jax = pytest.importorskip("jax", reason="the JAX comparisons need jax==0.10.2")
    jax.config.update("jax_enable_x64", True)
    for cls, flat, unflat in _JAX_NODES:
        if cls not in _jax_registered:
            jax.tree_util.register_pytree_node(cls, flat, unflat)
            _jax_registered.add(cls)
    return jax


_JAX_NODES = [
    (Params, lambda p: ((p.w, p.b), None), lambda _, c: Params(*c)),
    (Pair, lambda p: ((p.first, p.second), None), lambda _, c: Pair(*c)),
]
_jax_registered: set = set()


def to_np(tree):
    """A JAX result as NumPy arrays, the structure kept."""
    return pytree.tree_map(np.asarray, tree)


def tree_out(xp, x):
    """A function of an array to a tree: a dict holding an array, a list and a scalar."""
    return {"a": xp.sin(x) * x[0], "b": [xp.sum(x**2), x[:2] * 3.0]}


def loss(xp, p):
    """A scalar function of a dict of parameters."""
    return xp.sum(xp.tanh(p["w"]) * p["w"]) * p["b"] + p["b"] ** 3


P0 = {"w": np.array([0.3, -0.7, 1.1]), "b": np.array(0.8)}
PV = {"w": np.array([1.0, -1.0, 0.5]), "b": np.array(2.0)}


# -- Jacobians of trees ------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["jacrev", "jacfwd", "jacobian"])
def test_jacobian_of_a_function_returning_a_dict_and_a_list(be, jax, name):
    import jax.numpy as jnp

    got = getattr(ad, name)(lambda x: tree_out(be.xp, x))(be.arr(X))
    expected = to_np(jax.jacrev(lambda x: tree_out(jnp, x))(jnp.asarray(X)))
    assert set(got) == {"a", "b"} and type(got["b"]) is list
    assert type(got["a"]) is be.raw  # raw arrays in, raw arrays out
    close_trees(got, expected)


@pytest.mark.parametrize("name", ["jacrev", "jacfwd"])
def test_jacobian_of_trees_in_and_out_with_argnums_tuple_as_jax(jax, name):
    import jax.numpy as jnp

    def f(xp, p, x):
        return NT(u=xp.sin(p["w"]) * x, v={"s": xp.sum(x * p["w"]) + p["b"]})

    xp = ad.Autodiff(np)
    got = getattr(ad, name)(lambda p, x: f(xp, p, x), argnums=(0, 1))(P0, X)
    expected = getattr(jax, name)(lambda p, x: f(jnp, p, x), argnums=(0, 1))(
        to_jax(jnp, P0), jnp.asarray(X)
    )
    # outer structure: the output's (a named tuple); inner: a tuple over argnums
    assert type(got) is NT and type(got.u) is tuple and set(got.u[0]) == {"b", "w"}
    assert got.u[0]["w"].shape == (3, 3) and got.v["s"][1].shape == (3,)
    close_trees(got, to_np(expected))


def to_jax(jnp, tree):
    return pytree.tree_map(jnp.asarray, tree)


@pytest.mark.parametrize("name", ["jacrev", "jacfwd"])
def test_jacobian_tree_of_a_dataclass_and_a_registered_class(jax, name):
    import jax.numpy as jnp

    def f(xp, p):
        return Pair(xp.sin(p.w) * p.b, [p.b * 2.0])

    xp = ad.Autodiff(np)
    p = Params(X, np.array(0.5))
    got = getattr(ad, name)(lambda q: f(xp, q))(p)
    expected = getattr(jax, name)(lambda q: f(jnp, q))(Params(jnp.asarray(X), jnp.asarray(0.5)))
    assert type(got) is Pair and type(got.first) is Params and type(got.second[0]) is Params
    close_trees(got, to_np(expected))


def test_hessian_of_a_function_of_a_dict_is_a_dict_of_blocks_as_jax(be, jax):
    import jax.numpy as jnp

    got = ad.hessian(lambda p: loss(be.xp, p))(pytree.tree_map(be.arr, P0))
    expected = to_np(jax.hessian(lambda p: loss(jnp, p))(to_jax(jnp, P0)))
    assert set(got) == {"b", "w"} and all(set(got[k]) == {"b", "w"} for k in got)
    assert got["w"]["w"].shape == (3, 3) and got["w"]["b"].shape == (3,)
    assert type(got["w"]["b"]) is be.raw
    close_trees(got, expected)


def test_hessian_with_argnums_tuple_as_jax(jax):
    import jax.numpy as jnp

    def f(xp, p, x):
        return loss(xp, p) * xp.sum(x**2)

    xp = ad.Autodiff(np)
    got = ad.hessian(lambda p, x: f(xp, p, x), argnums=(0, 1))(P0, X)
    expected = jax.hessian(lambda p, x: f(jnp, p, x), argnums=(0, 1))(
        to_jax(jnp, P0), jnp.asarray(X)
    )
    # outer: the gradient's structure (a tuple over argnums of p's dict and x); inner: a
    # tuple over argnums of the arguments' structures
    assert type(got) is tuple and set(got[0]) == {"b", "w"} and type(got[0]["w"]) is tuple
    assert set(got[0]["w"][0]) == {"b", "w"} and got[0]["w"][1].shape == (3, 3)
    close_trees(got, to_np(expected))


# -- hvp of trees ------------------------------------------------------------------------------
def test_hvp_takes_dict_primals_and_tangents(be, jax):
    import jax.numpy as jnp

    p, v = pytree.tree_map(be.arr, P0), pytree.tree_map(be.arr, PV)
    g, hv = ad.hvp(lambda q: loss(be.xp, q), (p,), (v,))
    g_jax, hv_jax = jax.jvp(
        jax.grad(lambda q: loss(jnp, q)), (to_jax(jnp, P0),), (to_jax(jnp, PV),)
    )
    assert set(g) == {"b", "w"} and type(hv["w"]) is be.raw
    close_trees(g, to_np(g_jax))
    close_trees(hv, to_np(hv_jax))


def test_hvp_of_several_tree_primals(jax):
    import jax.numpy as jnp

    def f(xp, p, x):
        return loss(xp, p) * xp.sum(x**2)

    xp = ad.Autodiff(np)
    (gp, gx), (hp, hx) = ad.hvp(lambda p, x: f(xp, p, x), (P0, X), (PV, V))
    expected = jax.jvp(
        jax.grad(lambda p, x: f(jnp, p, x), argnums=(0, 1)),
        (to_jax(jnp, P0), jnp.asarray(X)),
        (to_jax(jnp, PV), jnp.asarray(V)),
    )
    assert set(gp) == {"b", "w"} and type(hx) is np.ndarray
    close_trees(((gp, gx), (hp, hx)), to_np(expected))


# -- registration --------------------------------------------------------------------------------
def test_a_dataclass_of_parameters_is_a_node_without_registration(be, jax):
    import jax.numpy as jnp

    def f(xp, p):
        return xp.sum(xp.sin(p.w) * p.w) * p.b

    p = Params(be.arr(X), be.arr(np.array(1.5)))
    g = ad.grad(lambda q: f(be.xp, q))(p)
    expected = jax.grad(lambda q: f(jnp, q))(Params(jnp.asarray(X), jnp.asarray(1.5)))
    assert type(g) is Params and type(g.w) is be.raw
    close_trees(g, to_np(expected))
    h = ad.hessian(lambda q: f(be.xp, q))(p)
    h_jax = jax.hessian(lambda q: f(jnp, q))(Params(jnp.asarray(X), jnp.asarray(1.5)))
    assert type(h) is Params and type(h.w) is Params
    close_trees(h, to_np(h_jax))


def test_register_pytree_node_and_the_class_decorator():
    xp = ad.Autodiff(np)

    @pytree.register_pytree_node_class
    class Scaled:
        def __init__(self, x, scale):
            self.x, self.scale = x, scale

        def tree_flatten(self):
            return (self.x,), self.scale

        @classmethod
        def tree_unflatten(cls, scale, children):
            return cls(*children, scale)

    g = ad.grad(lambda p: xp.sum(p.first.x**2) * p.second)(Pair(Scaled(X, "static"), 3.0))
    assert type(g) is Pair and type(g.first) is Scaled and g.first.scale == "static"
    close(g.first.x, 6.0 * X)
    assert g.second == pytest.approx(float(np.sum(X**2)))
    leaves, td = pytree.tree_flatten([Pair(1, None), {"k": Scaled(2, "s")}])
    assert (
        leaves == [1, 2]
        and pytree.tree_structure(Pair(5, None)) == pytree.flatten(Pair(0, None))[1]
    )
    back = pytree.tree_unflatten(td, [10, 20])
    assert back[0].first == 10 and back[0].second is None and back[1]["k"].scale == "s"
    assert pytree.tree_leaves(pytree.tree_map(lambda a: a + 1, back)) == [11, 21]
    # is_leaf stops the descent (JAX's argument)
    assert pytree.tree_map(len, {"a": (1, 2)}, is_leaf=lambda t: type(t) is tuple) == {"a": 2}
    with pytest.raises(ValueError, match="a node already"):
        pytree.register_pytree_node(Pair, lambda p: ((), None), lambda _, c: Pair(1, 2))


def test_register_dataclass_keeps_static_fields_out_of_the_leaves():
    xp = ad.Autodiff(np)

    @pytree.register_dataclass
    @dataclasses.dataclass(frozen=True)
    class Layer:
        w: object
        act: str = dataclasses.field(default="tanh", metadata={"static": True})

    layer = Layer(X)
    assert pytree.leaves(layer) == [X]
    g = ad.grad(lambda m: xp.sum(getattr(xp, m.act)(m.w)))(layer)
    assert type(g) is Layer and g.act == "tanh"
    close(g.w, 1 - np.tanh(X) ** 2)
    # another static value is another structure
    assert pytree.tree_structure(Layer(X, "sin")) != pytree.tree_structure(layer)

    @dataclasses.dataclass
    class Two:
        a: object
        b: object

    pytree.register_dataclass(Two, data_fields=["b"], meta_fields=["a"])
    assert pytree.leaves(Two(1, 2)) == [2]


def test_the_pytree_module_examples_run():
    # the runnable examples of the module's docstrings (the registration API's)
    result = doctest.testmod(pytree, raise_on_error=False)
    assert result.attempted >= 8 and result.failed == 0


# -- Python numbers and constants --------------------------------------------------------------
def test_jacfwd_and_hessian_of_a_python_float():
    for transform in (ad.jacfwd, ad.jacrev):
        got = transform(lambda x: x**3)(2.0)
        assert np.ndim(got) == 0 and float(got) == 12.0  # 3 x^2
    got = ad.hessian(lambda x: x**3)(2.0)
    assert np.ndim(got) == 0 and float(got) == 12.0  # 6 x
    # argnums over numbers and a tree holding one
    jx, jy = ad.jacfwd(lambda x, y: x * y**2, argnums=(0, 1))(2.0, 3.0)
    assert (float(jx), float(jy)) == (9.0, 12.0)
    h = ad.hessian(lambda d: d["x"] ** 2 * d["y"])({"x": 2.0, "y": 3.0})
    assert float(h["x"]["x"]) == 6.0 and float(h["x"]["y"]) == 4.0 and float(h["y"]["y"]) == 0.0


@pytest.mark.parametrize("name", ["jacfwd", "jacrev"])
def test_jacobian_of_a_constant_output_is_zeros_of_its_shape(be, name):
    jac = getattr(ad, name)
    x = be.arr(X)
    for const in [be.arr(np.ones(2)), 3.0, be.xp.ones((2, 2), dtype=be.xp.float64)]:
        got = jac(lambda v, c=const: c)(x)
        shape = np.shape(val(const)) + (3,)
        assert type(got) is be.raw and tuple(got.shape) == shape
        close(got, np.zeros(shape))
    # a constant beside a dependent output, in a tree
    got = jac(lambda v: {"c": be.arr(np.ones(2)), "y": v * 2.0})(x)
    close(got["c"], np.zeros((2, 3)))
    close(got["y"], 2.0 * np.eye(3))


def test_jvp_of_a_constant_python_number_output():
    _, t = ad.jvp(lambda x: 3.0, (X,), (V,))
    close(t, 0.0)


# -- inside vmap -------------------------------------------------------------------------------
def test_vmap_of_hvp_gives_the_hessian_rows(be, jax):
    import jax.numpy as jnp

    def f(xp, x):
        return xp.sum(xp.sin(x) * x) * x[0]

    x = be.arr(X)
    rows = ad.vmap(lambda v: ad.hvp(lambda y: f(be.xp, y), (x,), (v,))[1])(be.arr(np.eye(3)))
    assert type(rows) is be.raw
    close(rows, np.asarray(jax.hessian(lambda y: f(jnp, y))(jnp.asarray(X))), rtol=1e-11)
    # batched primals too: one Hessian-vector product per example
    xs = rng.standard_normal((4, 3))
    got = ad.vmap(lambda p, v: ad.hvp(lambda y: f(be.xp, y), (p,), (v,))[1])(
        be.arr(xs), be.arr(xs[::-1].copy())
    )
    expected = jax.vmap(lambda p, v: jax.jvp(jax.grad(lambda y: f(jnp, y)), (p,), (v,))[1])(
        jnp.asarray(xs), jnp.asarray(xs[::-1].copy())
    )
    close(got, np.asarray(expected), rtol=1e-11)


def test_vmap_of_hvp_of_a_dict():
    xp = ad.Autodiff(np)
    xs = rng.standard_normal((4, 3))
    got = ad.vmap(lambda x: ad.hvp(lambda d: xp.sum(d["y"] ** 3), ({"y": x},), ({"y": x},))[1])(xs)
    assert set(got) == {"y"}
    close(got["y"], 6 * xs * xs)  # H = diag(6 y), applied to y


def test_register_hook_inside_vmap_of_grad():
    xp = ad.Autodiff(np)
    xs = rng.standard_normal((4, 3))
    seen = []

    def f(x):
        y = x * 3.0
        # the hook sees one example's gradient, batched as x is, and scales it by x
        y.register_hook(lambda g: (seen.append(tuple(g.shape)), g * x)[1])
        return xp.sum(y**2)

    g = ad.vmap(ad.grad(f))(xs)
    # d/dx sum(y^2), y = 3x: the gradient at y (2y = 6x) replaced by 6x * x, times 3
    close(g, 3 * (6 * xs) * xs)
    assert seen == [(3,)]

    def constant_replacement(x, w):
        y = x * w
        y.register_hook(lambda g: xp.ones_like(w))  # the same for every example
        return xp.sum(y**2)

    w = np.array([1.0, 2.0, 3.0])
    g = ad.vmap(ad.grad(constant_replacement), in_axes=(0, None))(xs, w)
    close(g, np.broadcast_to(w, xs.shape))


def test_per_example_parameter_gradients_mixing_batched_and_shared_values(be):
    xp = be.xp
    W, b = rng.standard_normal((3, 2)), rng.standard_normal(2)
    xs, ys = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))

    def f(p, x, y):
        return xp.sum((xp.tanh(x @ p["W"] + p["b"]) - y) ** 2)

    params = {"W": be.arr(W), "b": be.arr(b)}
    g = ad.vmap(ad.grad(f), in_axes=(None, 0, 0))(params, be.arr(xs), be.arr(ys))
    assert type(g["W"]) is be.raw and tuple(g["W"].shape) == (5, 3, 2)
    # by hand, example by example
    for i in range(5):
        z = np.tanh(xs[i] @ W + b)
        dz = 2 * (z - ys[i]) * (1 - z**2)
        close(g["W"][i, ...], np.outer(xs[i], dz))
        close(g["b"][i, ...], dz)
    # a reshape of the batched input against the shared weights
    g2 = ad.vmap(ad.grad(lambda W_, x: xp.sum(xp.reshape(x, (1, 3)) @ W_)), in_axes=(None, 0))(
        be.arr(W), be.arr(xs)
    )
    close(g2, np.broadcast_to(xs[:, :, None], (5, 3, 2)))


@pytest.mark.parametrize("name", ["jacrev", "jacfwd"])
def test_vmap_of_a_jacobian_of_a_dict_output(be, name):
    xs = rng.standard_normal((4, 3))
    got = ad.vmap(getattr(ad, name)(lambda x: {"s": be.xp.sum(x**2), "y": be.xp.sin(x)}))(
        be.arr(xs)
    )
    close(got["s"], 2 * xs)
    close(got["y"], np.stack([np.diag(np.cos(x)) for x in xs]))


def test_vmap_in_axes_as_trees_with_none_leaves_and_a_dataclass():
    xp = ad.Autodiff(np)
    xs = rng.standard_normal((4, 3))
    w = np.array([1.0, 2.0, 3.0])
    out = ad.vmap(lambda d: d["w"] * d["x"], in_axes=({"w": None, "x": 0},))({"w": w, "x": xs})
    close(out, w * xs)
    p = Params(w, np.array(0.5))
    out = ad.vmap(lambda q, x: q.w * x + q.b, in_axes=(Params(None, None), 0))(p, xs)
    close(out, w * xs + 0.5)
    per = ad.vmap(lambda q: q.w * q.b, in_axes=(Params(0, None),))(Params(xs, np.array(2.0)))
    close(per, 2.0 * xs)
    out = ad.vmap(lambda x: {"a": x, "b": NT(x * 2, xp.sum(x))}, out_axes={"a": 1, "b": 0})(xs)
    assert type(out["b"]) is NT
    close(out["a"], xs.T)
    close(out["b"].v, xs.sum(1))
    out = ad.vmap(lambda x: Params(x, xp.sum(x)))(xs)
    assert type(out) is Params and type(out.w) is np.ndarray
    with pytest.raises(ValueError, match="not a prefix"):
        ad.vmap(lambda q: q.w, in_axes=(NT(0, 0),))(p)


def test_an_unmapped_argument_holding_no_array_is_the_callers_object():
    xp = ad.Autodiff(np)

    @dataclasses.dataclass
    class Counter:
        calls: int = 0

    c = Counter()

    def f(x, counter):
        counter.calls += 1  # state the caller reads afterwards
        return xp.sum(x**2)

    ad.grad(f)(X, c)
    ad.vmap(f, in_axes=(0, None))(np.ones((2, 3)), c)
    assert c.calls == 2


# -- the other transforms on trees ---------------------------------------------------------------
def test_value_and_grad_with_a_tree_aux(be):
    xp = be.xp
    p = Params(be.arr(X), be.arr(np.array(2.0)))

    def f(q):
        out = xp.sum(q.w**2) * q.b
        return out, NT(u=q.w * 2.0, v={"note": "kept", "loss": out})

    (value, aux), g = ad.value_and_grad(f, has_aux=True)(p)
    assert type(aux) is NT and aux.v["note"] == "kept"
    assert type(aux.u) is be.raw and type(value) is be.raw and type(g) is Params
    close(aux.u, 2 * X)
    close(value, 2 * np.sum(X**2))
    close(g.w, 4 * X)
    close(g.b, np.sum(X**2))


def test_vjp_with_tree_outputs_and_cotangents(be):
    xp = be.xp
    p = Params(be.arr(X), be.arr(np.array(2.0)))
    out, vjp_fn = ad.vjp(lambda q: NT(q.w * q.b, Pair(xp.sum(q.w), [q.b**2])), p)
    assert type(out) is NT and type(out.v) is Pair and type(out.u) is be.raw
    cot = NT(be.arr(V), Pair(be.arr(np.array(1.0)), [be.arr(np.array(3.0))]))
    (g,) = vjp_fn(cot)
    assert type(g) is Params
    close(g.w, V * 2.0 + 1.0)
    close(g.b, np.sum(V * X) + 3.0 * 2 * 2.0)


def test_jvp_with_tree_primals_tangents_and_outputs(be):
    xp = be.xp
    p = Params(be.arr(X), be.arr(np.array(2.0)))
    t = Params(be.arr(V), be.arr(np.array(0.5)))
    out, tan = ad.jvp(lambda q: {"y": q.w * q.b, "s": Pair(xp.sum(q.w**2), None)}, (p,), (t,))
    assert type(out["s"]) is Pair and out["s"].second is None and type(tan["y"]) is be.raw
    close(tan["y"], V * 2.0 + X * 0.5)
    close(tan["s"].first, np.sum(2 * X * V))


def test_checkpoint_of_a_function_of_trees():
    xp = ad.Autodiff(np)

    @ad.checkpoint
    def block(q, x):
        return {"h": xp.tanh(x * q.w + q.b), "aux": Pair(q.b * 2.0, None)}

    def f(q):
        out = block(q, X)
        return xp.sum(out["h"] ** 2) + out["aux"].first

    p = Params(np.array([0.3, -0.2, 0.9]), np.array(0.1))
    g = ad.grad(f)(p)
    h = np.tanh(X * p.w + p.b)
    dh = 2 * h * (1 - h**2)
    assert type(g) is Params
    close(g.w, dh * X)
    close(g.b, np.sum(dh) + 2.0)


def test_tensors_in_give_tensors_out_for_every_transform():
    xp = ad.Autodiff(np)
    p = {"w": xp.asarray(X), "b": xp.asarray(np.array(0.8))}
    v = {"w": xp.asarray(V), "b": xp.asarray(np.array(1.0))}

    def f(q):
        return loss(xp, q)

    results = [
        ad.grad(f)(p),
        ad.jacrev(lambda q: {"y": q["w"] * q["b"]})(p),
        ad.jacfwd(lambda q: {"y": q["w"] * q["b"]})(p),
        ad.hessian(f)(p),
        ad.hvp(f, (p,), (v,)),
        ad.jvp(f, (p,), (v,)),
        ad.vjp(lambda q: {"y": q["w"] * 2.0}, p)[0],
        ad.vmap(lambda q: q["w"] * q["b"], in_axes=({"w": 0, "b": None},))(p),
    ]
    for r in results:
        assert all(isinstance(leaf, ad.Tensor) for leaf in pytree.leaves(r))


def test_errors_name_the_transform_and_the_leaf():
    xp = ad.Autodiff(np)
    with pytest.raises(TypeError, match="jacfwd: the function must return arrays .* got str"):
        ad.jacfwd(lambda x: {"a": "text"})(X)
    with pytest.raises(TypeError, match="jacobian: the function must return arrays"):
        ad.jacrev(lambda x: [x, object()])(X)
    with pytest.raises(ValueError, match="real scalar"):
        ad.hvp(lambda d: d["y"] * 2.0, ({"y": X},), ({"y": V},))

    def hooked(x):
        x.register_hook(lambda g: g * 2.0)
        return xp.sum(x**2)

    # a hook in a backward pass batched over another vmap (vmap of jacrev) is refused
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(NotImplementedError, match="register_hook"):
            ad.vmap(ad.hessian(hooked))(np.ones((2, 3)))


def test_custom_vjp_on_trees_keeps_the_users_rule():
    xp = ad.Autodiff(np)

    @ad.custom_vjp
    def f(p):
        return {"y": xp.sin(p["w"]) * p["b"], "s": xp.sum(p["w"])}

    def fwd(p):
        return f(p), p

    def bwd(p, g):  # deliberately not the true VJP: 10x the true one, None for 'b'
        return ({"w": 10.0 * (g["y"] * xp.cos(p["w"]) * p["b"] + g["s"]), "b": None},)

    f.defvjp(fwd, bwd)
    p = {"w": X, "b": np.array(2.0)}
    g = ad.grad(lambda q: xp.sum(f(q)["y"]) + f(q)["s"])(p)
    # two calls of f, each by its rule: the cotangent of 'y' from one, of 's' from the other
    close(g["w"], 10.0 * (np.cos(X) * 2.0 + 1.0))
    close(g["b"], 0.0)
    per = ad.vmap(ad.grad(lambda q: f(q)["s"]))({"w": np.ones((4, 3)), "b": np.ones(4)})
    close(per["w"], np.full((4, 3), 10.0))


def test_custom_jvp_on_trees_keeps_the_users_rule():
    xp = ad.Autodiff(np)

    @ad.custom_jvp
    def f(p):
        return NT(u=xp.sum(p.w**2), v=p.w * p.b)

    @f.defjvp
    def f_jvp(primals, tangents):  # deliberately 3x the true JVP
        (p,), (t,) = primals, tangents
        return f(p), NT(u=3.0 * xp.sum(2 * p.w * t.w), v=3.0 * (t.w * p.b + p.w * t.b))

    p, t = Params(X, np.array(2.0)), Params(V, np.array(0.5))
    out, tan = ad.jvp(f, (p,), (t,))
    assert type(out) is NT and type(tan) is NT
    close(tan.u, 3.0 * np.sum(2 * X * V))
    close(tan.v, 3.0 * (V * 2.0 + X * 0.5))
    g = ad.grad(lambda q: f(q).u)(p)  # reverse mode: the rule transposed
    assert type(g) is Params
    close(g.w, 3.0 * 2 * X)
    close(g.b, 0.0)
