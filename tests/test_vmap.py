"""``ad.vmap``: in_axes / out_axes as JAX, nesting, composition with grad and vjp
(per-example gradients, Jacobian rows), batched linear algebra, the fallback loop and
the errors; and, over the whole registry, every op batched against a loop of it
(gradcheck's batching check, driven by the specs)."""

import warnings

import numpy as np
import pytest

import autodiff as ad
import autodiff.nn as nn
import autodiff.nn.functional as F
from autodiff.engine import batching, registry
from autodiff.rules import batch_rules as br
from gradcheck.batching import check_batching
from gradcheck.specs import SPECS

xp = ad.Autodiff(np)
rng = np.random.default_rng(0)


def loop(f, *args):
    """f over the first axis of every argument, stacked (the reference)."""
    return np.stack([np.asarray(f(*[a[i] for a in args])) for i in range(len(args[0]))])


# -- in_axes / out_axes ------------------------------------------------------------------------
def test_maps_over_axis_0_and_gives_raw_arrays_for_raw_arrays():
    x = rng.standard_normal((4, 3))
    out = ad.vmap(lambda v: xp.sum(xp.exp(v) * v))(x)
    assert isinstance(out, np.ndarray) and out.shape == (4,)
    np.testing.assert_allclose(out, (np.exp(x) * x).sum(1))


def test_tensors_in_give_tensors_out():
    x = xp.asarray(rng.standard_normal((4, 3)))
    out = ad.vmap(lambda v: v * 2)(x)
    assert isinstance(out, ad.Tensor) and out.shape == (4, 3)


def test_in_axes_none_negative_and_per_argument():
    a = rng.standard_normal((3, 5))  # mapped over axis -1 (5 examples of 3)
    b = rng.standard_normal(3)  # the same for every example
    out = ad.vmap(lambda u, v: u * v + 1, in_axes=(-1, None))(a, b)
    np.testing.assert_allclose(out, a.T * b + 1)
    out = ad.vmap(lambda u, v: u @ v, in_axes=[1, None])(a, b)  # a list is a tuple (JAX)
    np.testing.assert_allclose(out, a.T @ b)


def test_in_axes_as_a_tree_prefix_of_a_dict():
    p = {"w": rng.standard_normal((4, 3)), "b": rng.standard_normal(3)}
    x = rng.standard_normal(3)
    out = ad.vmap(lambda q, v: q["w"] * v + q["b"], in_axes=({"w": 0, "b": None}, None))(p, x)
    np.testing.assert_allclose(out, p["w"] * x + p["b"])


def test_out_axes_move_and_trees_and_none():
    x = rng.standard_normal((4, 2, 3))
    out = ad.vmap(lambda v: v * 2, out_axes=-1)(x)
    np.testing.assert_allclose(out, np.moveaxis(x * 2, 0, -1))
    c = rng.standard_normal(3)
    got = ad.vmap(lambda v: (xp.sum(v, axis=0), {"c": xp.asarray(c)}), out_axes=(1, {"c": None}))(x)
    np.testing.assert_allclose(got[0], x.sum(axis=1).T)
    np.testing.assert_allclose(got[1]["c"], c)  # not batched: out_axes None keeps it whole


def test_an_unbatched_output_is_repeated_along_the_batch():
    out = ad.vmap(lambda v: xp.ones(2))(rng.standard_normal((3, 4)))
    np.testing.assert_allclose(out, np.ones((3, 2)))


def test_keyword_arguments_are_mapped_over_axis_0():
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    out = ad.vmap(lambda u, *, w: xp.sum(u * w))(x, w=y)
    np.testing.assert_allclose(out, (x * y).sum(1))


def test_axis_size_when_nothing_is_mapped_as_jax():
    out = ad.vmap(lambda v: v + 1, in_axes=None, axis_size=3)(np.arange(2.0))
    np.testing.assert_allclose(out, np.tile(np.arange(2.0) + 1, (3, 1)))
    with pytest.raises(ValueError, match="every in_axes is None.*axis_size"):
        ad.vmap(lambda v: v, in_axes=None)(np.arange(2.0))


def test_nested_vmap_equals_a_double_loop():
    a = rng.standard_normal((2, 3, 4))
    b = rng.standard_normal((3, 4))
    inner = ad.vmap(lambda u, v: xp.sum(xp.sin(u) * v), in_axes=(0, 0))
    out = ad.vmap(inner, in_axes=(0, None))(a, b)
    want = np.array([[np.sum(np.sin(a[i, j]) * b[j]) for j in range(3)] for i in range(2)])
    np.testing.assert_allclose(out, want)
    # the inner map over another axis, the outer one's output moved
    out = ad.vmap(ad.vmap(lambda u: u @ u, in_axes=1), in_axes=0, out_axes=1)(a)
    np.testing.assert_allclose(out, np.einsum("ijk,ijk->ki", a, a))


# -- composition with grad and vjp -------------------------------------------------------------
def _mlp():
    r = np.random.default_rng(1)
    p = {
        "w1": r.standard_normal((16, 8)) / 4,
        "b1": r.standard_normal(16) * 0.1,
        "w2": r.standard_normal((3, 16)) / 4,
        "b2": r.standard_normal(3) * 0.1,
    }
    return p, r.standard_normal((128, 8)), r.integers(0, 3, 128)


def mlp_loss(p, x, y):
    h = xp.tanh(x @ p["w1"].T + p["b1"])
    logits = F.linear(h, p["w2"], p["b2"])
    return F.cross_entropy(logits[None, :], y[None])


def test_per_example_gradients_of_an_mlp_equal_a_loop_of_grads():
    p, X, Y = _mlp()
    got = ad.vmap(ad.grad(mlp_loss), in_axes=(None, 0, 0))(p, X, Y)
    want = [ad.grad(mlp_loss)(p, X[i], Y[i]) for i in range(len(X))]
    for k in p:
        assert got[k].shape == (128,) + p[k].shape
        np.testing.assert_allclose(got[k], np.stack([w[k] for w in want]), rtol=1e-12, atol=1e-14)


def test_per_example_gradients_through_functional_call_of_a_module():
    model = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 2)).to(dtype="float64")
    params = {k: v.detach() for k, v in model.named_parameters()}
    X, Y = rng.standard_normal((6, 5)), rng.standard_normal((6, 2))

    def loss(p, x, y):
        return F.mse_loss(nn.functional_call(model, p, (x,)), y)

    got = ad.vmap(ad.grad(loss), in_axes=(None, 0, 0))(params, X, Y)
    for k in params:
        want = np.stack([ad.grad(loss)(params, X[i], Y[i])[k].data for i in range(6)])
        np.testing.assert_allclose(got[k].data, want, rtol=1e-12, atol=1e-14)


def test_per_example_gradients_of_a_conv_net():
    w = rng.standard_normal((4, 2, 3, 3))
    X = rng.standard_normal((5, 1, 2, 6, 6))  # 5 examples, each a batch of 1 image

    def loss(w, x):
        return xp.sum(F.max_pool2d(F.conv2d(x, w, padding=1), 2) ** 2)

    got = ad.vmap(ad.grad(loss), in_axes=(None, 0))(w, X)
    want = np.stack([ad.grad(loss)(w, X[i]) for i in range(5)])
    np.testing.assert_allclose(got, want, rtol=1e-11)


def test_vmap_of_a_vjp_function_gives_the_jacobian_rows():
    def f(x):
        return xp.concat([xp.sin(x) * x[::-1], xp.cumulative_sum(x)[1:] ** 2])

    x = rng.standard_normal(4)
    out, vjp_fn = ad.vjp(f, x)
    (rows,) = ad.vmap(vjp_fn)(np.eye(out.shape[0]))
    np.testing.assert_allclose(rows, ad.jacobian(f)(x), rtol=1e-12)


def test_vmap_of_the_vjp_of_grad_gives_the_hessian():
    def f(x):
        return xp.sum(xp.exp(x[:2]) * x[1:]) + xp.linalg.vector_norm(x) ** 3

    x = rng.standard_normal(3)
    _, vjp_fn = ad.vjp(ad.grad(f), x)
    (h,) = ad.vmap(vjp_fn)(np.eye(3))
    np.testing.assert_allclose(h, ad.hessian(f)(x), rtol=1e-10)


def test_grad_through_vmap():
    x = rng.standard_normal((4, 3))
    g = ad.grad(lambda v: xp.sum(ad.vmap(lambda r: xp.prod(r) * xp.max(r))(v)))(x)
    want = np.stack([ad.grad(lambda r: xp.prod(r) * xp.max(r))(x[i]) for i in range(4)])
    np.testing.assert_allclose(g, want)


def test_nested_vmap_of_grad():
    a = rng.standard_normal((2, 3, 4))
    g = ad.vmap(ad.vmap(ad.grad(lambda v: xp.sum(xp.sin(v) * v))))(a)
    np.testing.assert_allclose(g, np.cos(a) * a + np.sin(a))


# -- linear algebra ----------------------------------------------------------------------------
def test_batched_solve_equals_numpys():
    a = rng.standard_normal((1000, 3, 3)) + 3 * np.eye(3)
    b = rng.standard_normal((1000, 3))
    got = ad.vmap(xp.linalg.solve)(a, b)
    np.testing.assert_allclose(got, np.linalg.solve(a, b[..., None])[..., 0], rtol=1e-12)
    shared = ad.vmap(xp.linalg.solve, in_axes=(None, 0))(a[0], b)
    np.testing.assert_allclose(shared, np.linalg.solve(a[0], b.T).T, rtol=1e-12)


@pytest.mark.parametrize(
    "s1, s2, axes",
    [((3,), (3,), (0, 0)), ((3,), (3, 4), (0, None)), ((2, 3), (3,), (None, 0)),
     ((2, 3), (3, 4), (0, 0)), ((5, 2, 3), (3, 4), (0, None)), ((2, 3), (5, 3, 4), (None, 0)),
     ((3,), (5, 3, 4), (0, 0))],
)  # fmt: skip
def test_matmul_of_each_example(s1, s2, axes):
    a = rng.standard_normal(((4,) if axes[0] == 0 else ()) + s1)
    b = rng.standard_normal(((4,) if axes[1] == 0 else ()) + s2)
    got = ad.vmap(lambda u, v: u @ v, in_axes=axes)(a, b)
    want = np.stack([(a[i] if axes[0] == 0 else a) @ (b[i] if axes[1] == 0 else b)
                     for i in range(4)])  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-12)


# -- indexing and in-place writes --------------------------------------------------------------
def test_indexing_with_per_example_indices():
    x = rng.standard_normal((4, 5, 3))
    idx = rng.integers(0, 5, (4, 2))
    got = ad.vmap(lambda u, i: u[i])(x, idx)
    np.testing.assert_allclose(got, np.stack([x[k][idx[k]] for k in range(4)]))
    got = ad.vmap(lambda u, i: xp.take(u, i, axis=1))(x.transpose(0, 2, 1), idx)
    np.testing.assert_allclose(got, np.stack([x[k].T[:, idx[k]] for k in range(4)]))


def test_in_place_writes_into_a_batched_value():
    x = rng.standard_normal((3, 4))

    def f(v):
        y = v * 1.0
        y[0] = 7.0
        y[1:] += v[:-1]
        return y

    np.testing.assert_allclose(ad.vmap(f)(x), loop(lambda r: f(xp.asarray(r)).data, x))


def test_writing_a_batched_value_into_an_unbatched_tensor_is_refused():
    z = xp.zeros(4)

    def f(v):
        z[0] = v[0]
        return z

    with pytest.raises(ValueError, match="vmap: x\\[key\\] = value writes a batched value"):
        ad.vmap(f)(rng.standard_normal((3, 4)))


# -- the fallback loop -------------------------------------------------------------------------
def test_an_op_without_a_rule_loops_and_warns_once():
    op = registry.get("unique_values")
    assert op.batch_kind == "fallback"
    batching._warned.discard("unique_values")
    x = np.array([[3.0, 1.0, 3.0], [2.0, 2.0, 5.0]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = ad.vmap(xp.unique_values)(x)
        second = ad.vmap(xp.unique_values)(x)
    msgs = [str(w.message) for w in caught if "no batching rule" in str(w.message)]
    assert len(msgs) == 1 and "'unique_values'" in msgs[0]
    np.testing.assert_allclose(first, [[1.0, 3.0], [2.0, 5.0]])
    np.testing.assert_allclose(second, first)


def test_the_fallback_refuses_results_of_different_shapes():
    with pytest.raises(ValueError, match="different shapes for different examples"):
        ad.vmap(xp.unique_values)(np.array([[1.0, 1.0], [1.0, 2.0]]))


# -- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("convert", [float, bool, int, lambda v: v.item(), np.asarray])
def test_a_batched_value_cant_be_converted(convert):
    with pytest.raises(TypeError, match="vmap: a batched value can't be converted"):
        ad.vmap(lambda v: convert(xp.sum(v)))(np.ones((2, 3)))


def test_a_per_example_boolean_mask_is_refused_clearly():
    with pytest.raises(ValueError, match="vmap: x\\[mask\\] with a boolean mask"):
        ad.vmap(lambda v: v[v > 0])(rng.standard_normal((3, 4)))
    shared = np.array([True, False, True, True])  # the same mask for every example: fine
    x = rng.standard_normal((3, 4))
    np.testing.assert_allclose(ad.vmap(lambda v: v[xp.asarray(shared)])(x), x[:, shared])


def test_mismatched_batch_sizes_name_the_arguments():
    def f(x, y):
        return x + y

    with pytest.raises(ValueError, match="different sizes.*argument 0 \\(x\\).*argument 1 \\(y\\)"):
        ad.vmap(f)(np.ones((3, 2)), np.ones((4, 2)))


@pytest.mark.parametrize(
    "kw, args, match",
    [
        ({"in_axes": 2}, (np.ones((3, 2)),), "out of range"),
        ({"in_axes": (0, 0)}, (np.ones(3),), "2 entries for 1 positional"),
        ({"in_axes": ({"a": 0},)}, ({"b": np.ones(3)},), "not a prefix"),
        ({"in_axes": 0}, (3.0,), "not an array"),
        ({"out_axes": None}, (np.ones(3),), "out_axes is None for an output that differs"),
    ],
)
def test_bad_axes_are_clear_errors(kw, args, match):
    with pytest.raises((ValueError, TypeError), match=match):
        ad.vmap(lambda *a: a[0] if not isinstance(a[0], dict) else a[0]["b"], **kw)(*args)


# -- every op of the registry ------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_op_batched_equals_a_loop_of_it(xp, name):
    """Values and per-example gradients, every input mapped and each in turn not; an
    op with a batching rule never falls back to the loop."""
    bad = [r for r in check_batching(name, xp) if r[1] in ("FAIL", "ERROR")]
    assert not bad, bad


def test_rule_kinds_cover_the_registry():
    kinds = {name: op.batch_kind for name, op in registry.ops().items()}
    assert set(kinds.values()) <= set(registry.BATCH_KINDS)
    fallback = {n for n, k in kinds.items() if k == "fallback"}
    # what is left to the loop: shapes that depend on the values, and creation functions
    # that take no arrays
    assert fallback <= {"nonzero", "unique_all", "unique_counts", "unique_inverse",
                        "unique_values", "arange", "empty", "eye", "full", "linspace", "ones",
                        "zeros", "fft.fftfreq", "fft.rfftfreq", "broadcast_shapes"}  # fmt: skip


def _standard_names():
    """The ops of the standard (registered by autodiff/rules): its functions, the array's
    indexing and to_device, and the scatter-add kernel their rules use."""
    from autodiff.engine.standard import SIGNATURES

    names = set(SIGNATURES) | {"__getitem__", "__setitem__", "to_device", "index_add"}
    assert names <= set(registry.ops())
    return names


def test_batch_kind_agrees_with_how_rule_of_resolves_the_rule():
    from autodiff.nn.functional.linear import _linear_batch
    from autodiff.rules import linear_algebra

    seen = {"declared": 0, "metadata": 0, "none": 0}
    for name, op in registry.ops().items():
        rule = batching.rule_of(op)
        # the order of rule_of: declared (the nn ops too), derived from metadata
        if op.batch is not None:
            assert rule is op.batch, name
            seen["declared"] += 1
        elif op.diagonal:
            assert rule is batching.elementwise, name
            seen["metadata"] += 1
        else:
            assert rule is None, name
            seen["none"] += 1
        want = "fallback" if rule is None else ("derived" if getattr(rule, "derived", False)
                                                else "written")  # fmt: skip
        assert op.batch_kind == want, name
    assert seen == {"declared": 132, "metadata": 77, "none": 15}
    kinds = [op.batch_kind for op in registry.ops().values()]
    assert {k: kinds.count(k) for k in registry.BATCH_KINDS} == {
        "derived": 149, "written": 60, "fallback": 15,
    }  # fmt: skip
    matmul = registry.get("matmul")
    assert matmul.batch is linear_algebra._matmul_batch and matmul.batch_kind == "written"
    assert registry.get("linalg.matmul").batch is linear_algebra._matmul_batch
    exp = registry.get("exp")  # element-wise: derived from the metadata, nothing declared
    assert exp.batch is None and batching.rule_of(exp) is batching.elementwise
    assert exp.batch_kind == "derived" and registry.get("where").batch_kind == "derived"
    assert registry.get("sum").batch is not None and registry.get("sum").batch_kind == "derived"
    assert registry.get("linalg.inv").batch is br.leading
    assert registry.get("nn.linear").batch is _linear_batch
    assert registry.get("nn.linear").batch_kind == "written"
    assert registry.get("pad2d").batch is br.leading  # a kernel nn registers
    assert registry.get("nn.softmax").batch_kind == "derived"  # axis(...), a maker
    assert registry.get("unique_values").batch_kind == "fallback"


def test_no_table_keyed_by_op_names_holds_batching_rules():
    """Each op (of the standard, of nn, the kernels nn registers) declares its rule at
    registration: no module-level dict maps one of their names to a rule."""
    import sys

    names = set(registry.ops())
    assert _standard_names() < names and {"nn.linear", "pad2d"} < names
    for module_name, module in list(sys.modules.items()):
        if module_name != "autodiff" and not module_name.startswith("autodiff."):
            continue
        if module_name.startswith("autodiff.backends"):
            continue  # the backends' own functions by name (their namespaces), not rules
        for var, value in vars(module).items():
            if isinstance(value, dict) and not var.startswith("__"):
                bad = [k for k, v in value.items() if k in names and callable(v)]
                assert not bad, f"{module_name}.{var} maps {bad[:3]} to rules"
    assert not hasattr(batching, "NN_RULES")
    assert not hasattr(batching, "STYLE_RULES") and not hasattr(batching, "RULES")
    assert not hasattr(br, "RULES")


def test_jvp_inside_vmap_gives_one_tangent_per_example():
    import autodiff as ad

    xp = ad.Autodiff(np)
    X = np.random.default_rng(3).standard_normal((4, 3))
    T = np.random.default_rng(4).standard_normal((4, 3))
    f = lambda x: xp.sum(xp.sin(x) * x)  # noqa: E731
    _, tangent = ad.vmap(lambda x, t: ad.jvp(f, (x,), (t,)))(X, T)
    np.testing.assert_allclose(tangent, ((np.cos(X) * X + np.sin(X)) * T).sum(axis=1))
    # an unbatched primal (w) with batched data: its tangent is per example too
    w = np.array([0.5, -1.0, 2.0])
    per = ad.vmap(lambda x: ad.jvp(lambda w: xp.sum(xp.sin(x * w)), (w,), (np.ones(3),))[1])(X)
    np.testing.assert_allclose(per, (np.cos(X * w) * X).sum(axis=1))


def test_jacobians_and_hessians_inside_vmap():
    import autodiff as ad

    xp = ad.Autodiff(np)
    X = np.random.default_rng(5).standard_normal((4, 3))
    f = lambda v: xp.sum(xp.sin(v) * v)  # noqa: E731
    H = ad.vmap(ad.hessian(f))(X)
    for x, h in zip(X, H):  # d^2/dx^2 of x sin x = 2 cos x - x sin x, diagonal
        np.testing.assert_allclose(h, np.diag(2 * np.cos(x) - x * np.sin(x)), rtol=1e-13)
    A = np.arange(6.0).reshape(2, 3)
    for jac in (ad.jacfwd, ad.jacrev):
        J = ad.vmap(jac(lambda v: A @ xp.tanh(v)))(X)
        assert J.shape == (4, 2, 3)
        for x, j in zip(X, J):
            np.testing.assert_allclose(j, A / np.cosh(x) ** 2, rtol=1e-13)


def test_custom_rules_apply_inside_vmap():
    import autodiff as ad

    xp = ad.Autodiff(np)
    X = np.random.default_rng(6).standard_normal((4, 3))

    @ad.custom_vjp
    def f(x, w):
        return x * w

    # deliberately 3x and 5x the true derivatives: proves the user's rule is applied
    f.defvjp(lambda x, w: (x * w, (x, w)), lambda r, g: (3.0 * g * r[1], 5.0 * g * r[0]))
    w = np.array([0.5, 1.0, -2.0])
    gx = ad.vmap(ad.grad(lambda x: xp.sum(f(x, w))))(X)
    np.testing.assert_allclose(gx, np.broadcast_to(3.0 * w, X.shape))
    # w shared by the examples (in_axes None): its cotangent is their sum
    gw = ad.grad(lambda w: xp.sum(ad.vmap(f, in_axes=(0, None))(X, w)))(w)
    np.testing.assert_allclose(gw, 5.0 * X.sum(axis=0))

    @ad.custom_jvp
    def k(x):
        return xp.sin(x)

    k.defjvp(lambda p, t: (xp.sin(p[0]), 10.0 * xp.cos(p[0]) * t[0]))
    _, tangent = ad.vmap(lambda x: ad.jvp(k, (x,), (xp.ones_like(x),)))(X)
    np.testing.assert_allclose(tangent, 10.0 * np.cos(X))
    np.testing.assert_allclose(ad.vmap(ad.grad(lambda x: xp.sum(k(x))))(X), 10.0 * np.cos(X))
