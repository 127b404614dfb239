"""Hooks, as torch's: ``Tensor.register_hook``, ``retain_grad``, and the module forward
(pre-)hooks. Every value is checked against a hand-derived formula."""

import copy
import warnings

import numpy as np
import pytest

import autodiff as ad
from autodiff import nn

xp = ad.Autodiff(np)
X = np.array([0.3, -1.2, 0.7])


def leaf(values=X):
    return xp.asarray(values, requires_grad=True)


def close(t, expected, rtol=1e-12):
    np.testing.assert_allclose(np.asarray(t.data), expected, rtol=rtol, atol=1e-12)


# -- Tensor.register_hook --------------------------------------------------------------
def test_leaf_hook_sees_the_total_gradient_once_before_accumulation():
    x = leaf()
    seen = []
    x.register_hook(lambda g: seen.append((g, x.grad)))
    # fan-out: d/dx [sum(x^3) + sum(3 sin x)] = 3x^2 + 3 cos x, summed before the hook
    (xp.sum(x**3) + xp.sum(3.0 * xp.sin(x))).backward()
    assert len(seen) == 1
    g, grad_then = seen[0]
    assert type(g) is type(x) and not g.requires_grad
    assert grad_then is None  # the hook runs before .grad is filled
    close(g, 3 * X**2 + 3 * np.cos(X))
    close(x.grad, 3 * X**2 + 3 * np.cos(X))
    assert not np.shares_memory(np.asarray(g.data), np.asarray(x.grad.data))


def test_leaf_hook_replacement_doubles_the_leaf_gradient():
    x = leaf()
    x.register_hook(lambda g: 2 * g)
    xp.sum(xp.exp(x)).backward()
    close(x.grad, 2 * np.exp(X))
    xp.sum(x * x).backward()  # accumulates: the hook doubles each pass's gradient
    close(x.grad, 2 * np.exp(X) + 4 * X)


def test_hook_on_a_scalar_leaf_that_is_the_root():
    x = xp.asarray(3.0, requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(float(g)))
    x.backward()
    assert seen == [1.0] and float(x.grad) == 1.0


def test_non_leaf_hook_sees_the_complete_gradient():
    x = leaf()
    y = 2.0 * x
    seen = []
    y.register_hook(lambda g: seen.append(g))
    # two consumers of y: d/dy [sum(y^2) + sum(sin y)] = 2y + cos y
    (xp.sum(y**2) + xp.sum(xp.sin(y))).backward()
    assert len(seen) == 1
    Y = 2 * X
    close(seen[0], 2 * Y + np.cos(Y))
    close(x.grad, 2 * (2 * Y + np.cos(Y)))


def test_non_leaf_replacement_scales_every_gradient_upstream():
    x = leaf()
    y = xp.exp(x)
    y.register_hook(lambda g: 3 * g)
    z = xp.sin(x)  # a path around the hook: not scaled
    xp.sum(y * y + z).backward()
    close(x.grad, 3 * 2 * np.exp(2 * X) + np.cos(X))


def test_hooks_run_in_registration_order_each_on_the_previous_result():
    x = leaf()
    y = x * 1.0
    order = []
    y.register_hook(lambda g: order.append(("a", g.data.copy())) or g + 1.0)
    y.register_hook(lambda g: order.append(("b", g.data.copy())) or 10.0 * g)
    y.register_hook(lambda g: order.append(("c", g.data.copy())))
    xp.sum(y).backward()
    assert [k for k, _ in order] == ["a", "b", "c"]
    np.testing.assert_allclose(order[0][1], np.ones(3))
    np.testing.assert_allclose(order[1][1], 2 * np.ones(3))
    np.testing.assert_allclose(order[2][1], 20 * np.ones(3))
    close(x.grad, 20 * np.ones(3))


def test_remove_and_context_manager():
    x = leaf()
    calls = []
    h = x.register_hook(lambda g: calls.append(1) or 5 * g)
    h.remove()
    h.remove()  # twice: nothing
    xp.sum(x).backward()
    assert calls == [] and np.allclose(x.grad.data, 1.0)
    x.grad = None
    with x.register_hook(lambda g: 5 * g) as h2:
        assert isinstance(h2, ad.engine.hooks.RemovableHandle)
        xp.sum(x).backward()
    close(x.grad, 5 * np.ones(3))
    xp.sum(x).backward()  # removed on exit
    close(x.grad, 6 * np.ones(3))


def test_non_leaf_hook_removed():
    x = leaf()
    y = x * 2.0
    h = y.register_hook(lambda g: 0 * g)
    h.remove()
    xp.sum(y).backward()
    close(x.grad, 2 * np.ones(3))


def test_hook_on_one_output_of_a_multi_output_op():
    x = xp.asarray([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    a, b = xp.unstack(x)
    seen = []
    b.register_hook(lambda g: seen.append(g) or 10 * g)
    xp.sum(a * a + b).backward()
    assert len(seen) == 1
    close(seen[0], [1.0, 1.0])
    close(x.grad, [[2.0, 4.0], [10.0, 10.0]])


def test_complex_hooks_see_the_pytorch_convention():
    Z = np.array([1 + 2j, -0.5 + 0.25j])
    z = xp.asarray(Z, requires_grad=True)
    w = 2.0 * z
    seen_w, seen_z = [], []
    w.register_hook(lambda g: seen_w.append(g))
    z.register_hook(lambda g: seen_z.append(g))
    # L = |w|^2 = 4|z|^2: .grad is 2 dL/d(conj) -> 2w for w, 8z for z
    xp.sum(xp.real(w * xp.conj(w))).backward()
    close(seen_w[0], 2 * (2 * Z))
    close(seen_z[0], 8 * Z)
    close(z.grad, 8 * Z)


def test_hooks_in_transforms():
    def f(x):
        y = xp.sin(x)
        y.register_hook(lambda g: 2 * g)  # on an intermediate: d/dx doubled
        return xp.sum(y)

    close(ad.grad(f)(X), 2 * np.cos(X))

    def g(x):
        x.register_hook(lambda g: 3 * g)  # on the variable itself: what grad returns
        return xp.sum(x * x)

    close(ad.grad(g)(X), 3 * 2 * X)

    def h(x):
        y = xp.exp(x)
        y.register_hook(lambda g: -g)
        return y

    out, vjp_fn = ad.vjp(h, xp.asarray(X))
    (ct,) = vjp_fn(xp.asarray([1.0, 2.0, 3.0]))
    close(ct, -np.array([1.0, 2.0, 3.0]) * np.exp(X))


def test_non_leaf_hook_under_create_graph_gives_second_derivatives():
    x = leaf()
    y = x**2
    seen = []
    h = y.register_hook(lambda g: seen.append(g) or g * y)  # depends on y: recorded
    xp.sum(xp.sin(y)).backward(create_graph=True)
    assert seen[0].requires_grad  # the hook got a recorded gradient
    # first derivative through the hook: g1 = 2x h(y), h(y) = y cos y
    close(x.grad, 2 * X**3 * np.cos(X**2))
    g1 = x.grad
    assert g1.requires_grad
    x.grad = None
    # The hook still runs in the second pass (as torch): the gradient reaching y,
    # 2x h'(y), is multiplied by y again. d/dx = 2 h(y) + 2x * y h'(y) * 2x
    xp.sum(g1).backward(retain_graph=True)
    C, S = np.cos(X**2), np.sin(X**2)
    close(x.grad, 2 * X**2 * C + 4 * X**4 * C - 4 * X**6 * S)
    x.grad = None
    h.remove()
    xp.sum(g1).backward()
    # d/dx [2 x^3 cos(x^2)] = 6 x^2 cos(x^2) - 4 x^4 sin(x^2)
    close(x.grad, 6 * X**2 * C - 4 * X**4 * S)


def test_leaf_hook_under_create_graph():
    x = leaf()
    h = x.register_hook(lambda g: g * x)
    xp.sum(x**3).backward(create_graph=True)
    close(x.grad, 3 * X**3)  # 3x^2, times x by the hook
    g1 = x.grad
    x.grad = None
    h.remove()
    xp.sum(g1).backward()
    close(x.grad, 9 * X**2)


def test_hook_errors():
    with pytest.raises(RuntimeError, match="register_hook.*does not require grad"):
        xp.asarray(X).register_hook(lambda g: g)
    x = leaf()
    with pytest.raises(TypeError, match="register_hook.*callable"):
        x.register_hook(3)

    def wrong_shape(g):
        return xp.ones((2,))

    x.grad = xp.asarray([1.0, 1.0, 1.0])
    h = x.register_hook(wrong_shape)
    with pytest.raises(ValueError, match="register_hook: hook '.*wrong_shape' changed the grad"):
        xp.sum(x * 2.0).backward()
    close(x.grad, np.ones(3))  # a failing hook leaves .grad as it was
    h.remove()
    h = x.register_hook(lambda g: xp.astype(g, xp.float32))
    with pytest.raises(TypeError, match="register_hook.*dtype"):
        xp.sum(x * 2.0).backward()
    h.remove()
    y = x * 2.0
    y.register_hook(lambda g: [1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="register_hook.*returned list"):
        xp.sum(y).backward()
    xp32 = ad.Autodiff(__import__("array_api_strict"))
    y = x * 2.0
    y.register_hook(lambda g: xp32.ones((3,), dtype=xp32.float64))
    with pytest.raises(TypeError, match="register_hook.*returned"):
        xp.sum(y).backward()
    close(x.grad, np.ones(3))


def test_hook_runs_without_recording():
    # a plain backward records nothing, even if the hook mixes in a tensor that requires grad
    x = leaf()
    w = leaf(np.array([1.0, 2.0, 3.0]))
    y = x * 1.0
    y.register_hook(lambda g: g * w)
    xp.sum(y).backward()
    assert not x.grad.requires_grad
    close(x.grad, [1.0, 2.0, 3.0])


# -- retain_grad --------------------------------------------------------------------------
def test_retain_grad_values_and_accumulation():
    x = leaf()
    y = xp.exp(x)
    assert not y.retains_grad
    y.retain_grad()
    assert y.retains_grad
    z = xp.sum(y * y)
    z.backward(retain_graph=True)
    close(y.grad, 2 * np.exp(X))
    assert not y.grad.requires_grad
    z.backward()
    close(y.grad, 4 * np.exp(X))  # accumulates like a leaf's
    close(x.grad, 4 * np.exp(2 * X))


def test_retain_grad_keeps_the_gradient_after_the_hooks():
    x = leaf()
    y = x * 3.0
    y.retain_grad()  # before the hook: still runs after it, as torch
    y.register_hook(lambda g: 2 * g)
    xp.sum(y * y).backward()
    close(y.grad, 2 * (2 * 3 * X))
    close(x.grad, 3 * 2 * (2 * 3 * X))


def test_retain_grad_is_a_copy():
    x = leaf()
    y = x + 0.0  # add's rule hands y's gradient on to x as it is
    y.retain_grad()
    xp.sum(y).backward()
    assert not np.shares_memory(np.asarray(y.grad.data), np.asarray(x.grad.data))


def test_retain_grad_in_a_transform_and_create_graph():
    x = leaf()
    y = x**2
    y.retain_grad()
    xp.sum(xp.sin(y)).backward(create_graph=True)
    assert y.grad.requires_grad
    close(y.grad, np.cos(X**2))


def test_retain_grad_on_leaves_and_errors():
    x = leaf()
    x.retain_grad()  # a no-op on a leaf
    assert not x.retains_grad
    xp.sum(x).backward()
    close(x.grad, np.ones(3))
    with pytest.raises(RuntimeError, match="retain_grad"):
        xp.asarray(X).retain_grad()


def test_reading_grad_of_a_non_leaf_warns():
    x = leaf()
    y = x * 2.0
    xp.sum(y).backward()
    with pytest.warns(UserWarning, match="retain_grad"):
        assert y.grad is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x.grad is not None  # a leaf: no warning
        assert xp.asarray(X).grad is None  # a leaf that needs no grad
        y.retain_grad()
        assert y.grad is None  # retained, nothing yet


# -- module hooks -----------------------------------------------------------------------
def linear():
    m = nn.Linear(3, 2, dtype="float64")
    with ad.no_grad():
        m.weight[...] = xp.asarray([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]])
        m.bias[...] = xp.asarray([0.1, -0.2])
    return m


W = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]])
B = np.array([0.1, -0.2])


def test_forward_pre_hook_modifies_the_input():
    m = linear()
    seen = []

    def double(module, args):
        seen.append((module, len(args)))
        return args[0] * 2.0  # a single value: wrapped into a tuple

    h = m.register_forward_pre_hook(double)
    x = xp.asarray(X)
    close(m(x), W @ (2 * X) + B)
    assert seen == [(m, 1)]
    h.remove()
    close(m(x), W @ X + B)


def test_forward_hook_modifies_the_output_and_gradients_flow_through_it():
    m = linear()
    seen = []

    def triple(module, args, out):
        seen.append(args)
        return 3.0 * out

    h = m.register_forward_hook(triple)
    x = leaf()
    out = m(x)
    close(out, 3 * (W @ X + B))
    assert seen[0][0] is x
    xp.sum(out).backward()
    close(m.weight.grad, 3 * np.outer(np.ones(2), X))
    close(m.bias.grad, 3 * np.ones(2))
    close(x.grad, 3 * W.sum(axis=0))
    h.remove()
    close(m(x), W @ X + B)


def test_module_hook_order_prepend_and_none():
    m = linear()
    order = []
    m.register_forward_hook(lambda mod, a, o: order.append("a"))
    m.register_forward_hook(lambda mod, a, o: order.append("b") or o + 1.0)
    m.register_forward_hook(lambda mod, a, o: order.append("first") or o * 10.0, prepend=True)
    m.register_forward_pre_hook(lambda mod, a: order.append("pre"))
    out = m(xp.asarray(X))
    assert order == ["pre", "first", "a", "b"]
    close(out, (W @ X + B) * 10 + 1)


def test_module_hooks_with_kwargs():
    class Scale(nn.Module):
        def forward(self, x, *, factor=1.0):
            return x * factor

    m = Scale()
    m.register_forward_pre_hook(lambda mod, a, kw: (a, {"factor": 4.0}), with_kwargs=True)
    got = []
    m.register_forward_hook(lambda mod, a, kw, out: got.append(kw) or out - 1.0, with_kwargs=True)
    close(m(xp.asarray(X), factor=2.0), 4 * X - 1)
    assert got == [{"factor": 4.0}]
    m2 = Scale()
    m2.register_forward_pre_hook(lambda mod, a, kw: a, with_kwargs=True)
    with pytest.raises(TypeError, match="pre-hook"):
        m2(xp.asarray(X))


def test_module_hooks_bad_arguments():
    m = linear()
    with pytest.raises(TypeError, match="register_forward_hook.*callable"):
        m.register_forward_hook(None)
    with pytest.raises(TypeError, match="register_forward_pre_hook.*prepend"):
        m.register_forward_pre_hook(lambda mod, a: None, prepend="yes")


def test_module_hooks_in_a_sequential_and_state_dict_and_deepcopy():
    inner = linear()
    seq = nn.Sequential(inner, nn.ReLU())
    keys = set(seq.state_dict())
    inner.register_forward_hook(lambda mod, a, o: -o)
    assert set(seq.state_dict()) == keys  # hooks are not state
    x = xp.asarray(X)
    close(seq(x), np.maximum(-(W @ X + B), 0))
    twin = copy.deepcopy(seq)  # the copy keeps its own hooks
    close(twin(x), np.maximum(-(W @ X + B), 0))
    fresh = nn.Sequential(linear(), nn.ReLU())
    fresh.load_state_dict(seq.state_dict())
    close(fresh(x), np.maximum(W @ X + B, 0))
