"""The recorded graph: deep chains, freeing, accumulation, higher order, the
version counter, grad mode per thread, the errors of backward, and memory.
Every expected value is a hand-derived formula."""

import gc
import math
import sys
import threading
import weakref

import numpy as np
import pytest

import autodiff as ad
from autodiff.nn import functional as F


def val(t):
    """The values of a Tensor as a float64 numpy array (any backend, CPU device)."""
    d = t.data if isinstance(t, ad.Tensor) else t
    return np.asarray(d, dtype=np.float64)


def leaf(xp, values):
    return xp.asarray(np.asarray(values, dtype=np.float64), requires_grad=True)


X0 = [0.5, -1.25, 2.0]


# -- depth --------------------------------------------------------------------
def test_chain_of_100k_ops_backpropagates_without_recursion():
    xp = ad.Autodiff(np)
    limit = sys.getrecursionlimit()
    x = leaf(xp, X0)
    y = x
    n, c = 100_000, 1.0000001
    for _ in range(n):
        y = y * c
    xp.sum(y).backward()
    assert sys.getrecursionlimit() == limit
    np.testing.assert_allclose(val(x.grad), np.full(3, c**n), rtol=1e-9)
    np.testing.assert_allclose(val(y), np.asarray(X0) * c**n, rtol=1e-9)
    del y  # freeing a 100k-deep graph must not overflow the C stack either


def test_deep_chain_of_mixed_ops_on_each_backend(xp):
    # y_{k+1} = y_k + 0.0 then * 1: 2 * 5000 nodes, gradient exactly 1 per element.
    limit = sys.getrecursionlimit()
    x = leaf(xp, X0)
    y = xp.sin(x)
    for _ in range(5000):
        y = (y + 0.0) * 1.0
    xp.sum(y).backward()
    assert sys.getrecursionlimit() == limit
    np.testing.assert_allclose(val(x.grad), np.cos(X0), rtol=1e-12)


def test_deep_graph_without_backward_is_freed():
    xp = ad.Autodiff(np)
    x = leaf(xp, X0)
    y = x
    for _ in range(100_000):
        y = y + 1.0
    last = weakref.ref(y)
    del y
    assert last() is None
    assert x.grad is None


# -- freeing and accumulation ---------------------------------------------------
def test_second_backward_through_freed_graph_raises(xp):
    x = leaf(xp, X0)
    loss = xp.sum(xp.sin(x) * x)
    loss.backward()
    with pytest.raises(RuntimeError, match="retain_graph"):
        loss.backward()


def test_retain_graph_allows_second_backward_and_grads_accumulate(xp):
    x = leaf(xp, X0)
    a = np.asarray(X0)
    loss = xp.sum(xp.sin(x) * x)
    expected = np.cos(a) * a + np.sin(a)
    loss.backward(retain_graph=True)
    np.testing.assert_allclose(val(x.grad), expected, rtol=1e-12)
    loss.backward()
    np.testing.assert_allclose(val(x.grad), 2 * expected, rtol=1e-12)


def test_leaves_accumulate_and_grad_has_no_history(xp):
    x = leaf(xp, X0)
    a = np.asarray(X0)
    for k in (1, 2, 3):
        xp.sum(x * x * x).backward()
        np.testing.assert_allclose(val(x.grad), k * 3 * a**2, rtol=1e-12)
        assert not x.grad.requires_grad and x.grad.grad_fn is None
        assert x.grad.shape == x.shape and x.grad.dtype == x.dtype


# -- higher order ---------------------------------------------------------------
@pytest.mark.parametrize(
    "f, d1, d2",
    [
        (lambda xp, x: x**3, lambda a: 3 * a**2, lambda a: 6 * a),
        (lambda xp, x: xp.sin(x), np.cos, lambda a: -np.sin(a)),
        (lambda xp, x: xp.exp(x) * x, lambda a: np.exp(a) * (a + 1), lambda a: np.exp(a) * (a + 2)),
    ],
    ids=["cube", "sin", "x_exp"],
)
def test_create_graph_gives_second_derivative(xp, f, d1, d2):
    x = leaf(xp, X0)
    a = np.asarray(X0)
    xp.sum(f(xp, x)).backward(create_graph=True)
    g = x.grad
    assert g.requires_grad and g.grad_fn is not None
    np.testing.assert_allclose(val(g), d1(a), rtol=1e-12)
    x.grad = None
    xp.sum(g).backward()
    np.testing.assert_allclose(val(x.grad), d2(a), rtol=1e-12)


# -- version counter and in-place ops -------------------------------------------
def _bump_iadd(c):
    c += 1.0


def _bump_imul(c):
    c *= 2.0


def _bump_setitem(c):
    c[0] = 5.0


BUMPS = [_bump_iadd, _bump_imul, _bump_setitem]


@pytest.mark.parametrize("bump", BUMPS, ids=["iadd", "imul", "setitem"])
def test_modifying_a_saved_tensor_in_place_keeps_the_value_the_graph_saw(xp, bump):
    # copy-on-write: c needs no gradient, but multiply saved it (scipy.integrate.romb)
    x = leaf(xp, X0)
    c = xp.asarray([3.0, 4.0, 5.0])
    y = x * c  # saves c for the gradient of x
    bump(c)
    assert val(c).tolist() != [3.0, 4.0, 5.0]
    xp.sum(y).backward()
    np.testing.assert_allclose(val(x.grad), [3.0, 4.0, 5.0])


@pytest.mark.parametrize("bump", BUMPS, ids=["iadd", "imul", "setitem"])
def test_modifying_a_saved_tensor_under_no_grad_raises_naming_the_op(xp, bump):
    x = leaf(xp, X0)
    c = xp.asarray([3.0, 4.0, 5.0])
    y = x * c
    with ad.no_grad():
        bump(c)
    with pytest.raises(RuntimeError, match="multiply"):
        xp.sum(y).backward()


@pytest.mark.parametrize("bump", BUMPS, ids=["iadd", "imul", "setitem"])
def test_parameter_updated_under_no_grad_after_forward_raises(xp, bump):
    w = leaf(xp, X0)
    loss = xp.sum(xp.sin(w))  # sin saves w
    with ad.no_grad():
        bump(w)
    with pytest.raises(RuntimeError, match="'sin'"):
        loss.backward()


def test_modifying_a_tensor_that_was_not_saved_is_fine(xp):
    x = leaf(xp, X0)
    c = xp.asarray([3.0, 4.0, 5.0])
    b = xp.asarray([1.0, 1.0, 1.0])
    y = x * c + b  # add saves nothing; multiply saves c, not x
    b += 10.0
    b[1] = -7.0
    with ad.no_grad():
        x += 100.0
    xp.sum(y).backward()
    np.testing.assert_allclose(val(x.grad), [3.0, 4.0, 5.0])


def test_modifying_a_detached_alias_of_a_saved_tensor_raises(xp):
    # detach() shares memory, so a write through it changes what sin saved.
    x = leaf(xp, X0)
    loss = xp.sum(xp.sin(x))
    d = x.detach()
    d[0] = 5.0
    assert val(x)[0] == 5.0  # shares values
    with pytest.raises(RuntimeError, match="'sin'"):
        loss.backward()


@pytest.mark.parametrize(
    "inplace",
    [lambda x: x.__iadd__(1.0), lambda x: x.__imul__(2.0), lambda x: x.__setitem__(0, 1.0)],
    ids=["iadd", "imul", "setitem"],
)
def test_inplace_on_leaf_requiring_grad_raises(xp, inplace):
    x = leaf(xp, X0)
    with pytest.raises(RuntimeError, match="leaf"):
        inplace(x)
    with ad.no_grad():  # allowed there (an optimizer step)
        inplace(x)
    assert val(x).tolist() != X0


def test_inplace_on_non_leaf_gives_correct_gradients(xp):
    x, y = leaf(xp, X0), leaf(xp, [2.0, 3.0, -1.0])
    a, b = np.asarray(X0), np.asarray([2.0, 3.0, -1.0])
    h = x * 2.0
    h += y
    h *= y  # h = (2x + y) * y
    h[0] = 0.0
    np.testing.assert_allclose(val(h), [0.0, (2 * a[1] + b[1]) * b[1], (2 * a[2] + b[2]) * b[2]])
    xp.sum(h * h).backward()  # d/dx = 2h * 2y, d/dy = 2h * (2x + 2y), zero at 0
    hv = (2 * a + b) * b
    mask = np.asarray([0.0, 1.0, 1.0])
    np.testing.assert_allclose(val(x.grad), mask * 2 * hv * 2 * b, rtol=1e-12)
    np.testing.assert_allclose(val(y.grad), mask * 2 * hv * (2 * a + 2 * b), rtol=1e-12)


def test_setitem_of_a_tensor_value_sends_gradient_to_it(xp):
    x, v = leaf(xp, X0), leaf(xp, [7.0])
    h = x * 3.0
    h[1:2] = v * v
    xp.sum(h * h).backward()  # h = [3x0, v^2, 3x2]
    np.testing.assert_allclose(val(x.grad), [18 * X0[0], 0.0, 18 * X0[2]], rtol=1e-12)
    np.testing.assert_allclose(val(v.grad), [4 * 7.0**3], rtol=1e-12)


# -- grad mode ------------------------------------------------------------------
def test_no_grad_and_enable_grad_are_context_managers_and_decorators(xp):
    x = leaf(xp, X0)
    with ad.no_grad():
        assert not ad.is_grad_enabled()
        assert not (x * 2.0).requires_grad
        with ad.enable_grad():
            assert ad.is_grad_enabled()
            assert (x * 2.0).requires_grad
        assert not ad.is_grad_enabled()
    assert ad.is_grad_enabled()

    @ad.no_grad()
    def frozen(t):
        return t * 2.0

    @ad.enable_grad()
    def recorded(t):
        return t * 2.0

    assert not frozen(x).requires_grad
    with ad.no_grad():
        assert recorded(x).requires_grad
    assert ad.is_grad_enabled()


def test_grad_mode_is_per_thread(xp):
    x = leaf(xp, X0)
    inside = threading.Event()
    checked = threading.Event()
    seen = {}

    def worker():
        with ad.no_grad():
            inside.set()
            checked.wait(10)
            seen["worker"] = (ad.is_grad_enabled(), (x * 2.0).requires_grad)

    t = threading.Thread(target=worker)
    t.start()
    assert inside.wait(10)
    # The worker is inside no_grad right now; this thread still records.
    seen["main"] = (ad.is_grad_enabled(), (x * 2.0).requires_grad)
    checked.set()
    t.join(10)
    assert seen == {"main": (True, True), "worker": (False, False)}


# -- detach, requires_grad, errors of backward ----------------------------------
def test_detach_shares_values_without_history(xp):
    x = leaf(xp, X0)
    y = x * 2.0
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    np.testing.assert_array_equal(val(d), 2 * np.asarray(X0))
    assert y.requires_grad and y.grad_fn is not None


def test_requires_grad_setter_only_on_leaves(xp):
    x = xp.asarray([1.0, 2.0])
    assert not x.requires_grad
    x.requires_grad = True
    y = x * 2.0
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad = False
    xp.sum(y).backward()
    np.testing.assert_allclose(val(x.grad), [2.0, 2.0])


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_requires_grad_on_integer_or_bool_raises_type_error(xp, dtype):
    with pytest.raises(TypeError):
        xp.asarray([1, 0], dtype=getattr(xp, dtype), requires_grad=True)
    t = xp.asarray([1, 0], dtype=getattr(xp, dtype))
    with pytest.raises(TypeError):
        t.requires_grad = True
    assert not t.requires_grad


def test_backward_errors(xp):
    x = leaf(xp, X0)
    y = x * 2.0
    with pytest.raises(RuntimeError, match="scalar"):
        y.backward()
    with pytest.raises(ValueError, match="shape"):
        y.backward(xp.ones((2,), dtype=xp.float64))
    with pytest.raises(RuntimeError, match="require"):
        xp.sum(xp.asarray([1.0, 2.0])).backward()
    with ad.no_grad():
        z = xp.sum(x * 2.0)
    with pytest.raises(RuntimeError, match="require"):
        z.backward()
    y.backward(xp.asarray([1.0, 10.0, 100.0]))  # explicit grad of the right shape
    np.testing.assert_allclose(val(x.grad), [2.0, 20.0, 200.0])


def test_backward_starts_at_the_tensor_it_is_called_on(xp):
    x = leaf(xp, X0)
    loss = xp.sum(x * x)
    metric = loss * 100.0 + xp.sum(xp.exp(x))  # recorded after the loss
    loss.backward()
    np.testing.assert_allclose(val(x.grad), 2 * np.asarray(X0), rtol=1e-12)
    assert metric.requires_grad


def test_a_tensor_times_itself_is_one_square_node(xp):
    # x * x is recorded as square(x): one rule, 2 g x, instead of g x twice and a sum
    x = leaf(xp, X0)
    y = x * x
    assert y.grad_fn.op.name == "square"
    np.testing.assert_array_equal(val(y), np.square(X0))
    (g,) = ad.grad(lambda t: xp.sum(t * t), argnums=(0,))(x)
    np.testing.assert_allclose(val(g), 2 * np.asarray(X0), rtol=1e-15)
    h = ad.hessian(lambda t: xp.sum(t * t * 3.0))(x)
    np.testing.assert_allclose(val(h), 6 * np.eye(3), rtol=1e-15)
    c = xp.asarray(X0)  # no gradient wanted: a plain multiply
    assert (c * c).grad_fn is None


# -- memory ---------------------------------------------------------------------
def _forward(xp):
    x = leaf(xp, X0)
    h = xp.exp(x)
    z = h * h
    loss = xp.sum(z)
    return x, h, z, loss


def test_graph_is_freed_by_reference_counting(xp):
    x, h, z, loss = _forward(xp)
    refs = [weakref.ref(t) for t in (x, h, z, loss)]
    del x, h, z, loss
    assert [r() for r in refs] == [None] * 4
    gc.collect()
    assert [r() for r in refs] == [None] * 4


def test_nodes_are_freed_by_reference_counting(xp):
    x, h, z, loss = _forward(xp)
    nodes = [weakref.ref(t.grad_fn) for t in (h, z, loss)]
    del x, h, z, loss
    assert [r() for r in nodes] == [None] * 3
    gc.collect()
    assert [r() for r in nodes] == [None] * 3


@pytest.mark.parametrize("retain", [False, True])
def test_backward_releases_saved_arrays(xp, retain):
    x, h, z, loss = _forward(xp)
    node = z.grad_fn
    saved = weakref.ref(h.data)  # multiply saves the raw array of h
    loss.backward(retain_graph=retain)
    np.testing.assert_allclose(val(x.grad), 2 * np.exp(2 * np.asarray(X0)), rtol=1e-12)
    del h
    if retain:
        assert node.args is not None and saved() is not None
    else:
        assert node.args is None
        assert saved() is None
    assert math.isfinite(float(val(loss)))


def test_leaf_grads_never_share_a_buffer(xp):
    """One gradient array reaching two leaves (x + y), or the caller's grad=, is
    copied: scaling one leaf's grad in place (clip_grad_norm_) leaves the other."""
    x = xp.asarray([1.0, 2.0], requires_grad=True)
    y = xp.asarray([3.0, 4.0], requires_grad=True)
    u = xp.asarray([1.0, 1.0])
    (x + y).backward(u)
    with ad.no_grad():
        x.grad *= 10.0
    np.testing.assert_array_equal(np.asarray(y.grad.data), [1.0, 1.0])
    np.testing.assert_array_equal(np.asarray(u.data), [1.0, 1.0])
    np.testing.assert_array_equal(np.asarray(x.grad.data), [10.0, 10.0])


def test_a_leafs_grad_buffer_is_not_a_gradient_still_pending(xp):
    """In a + w, add hands the same array to the node a and to the leaf w; a later
    gradient into w (from b = 3 w) must not be added into that array while a's rule
    has yet to read it. By hand: d/dw [sum(w + w) + sum(3 w)] = 1 + 1 + 3."""
    w = xp.asarray([1.0, 2.0], requires_grad=True)
    a = w * 1.0
    b = w * 3.0  # runs after the add and before a in the backward pass
    (xp.sum((a + w) * 1.0) + xp.sum(b)).backward()
    np.testing.assert_array_equal(np.asarray(w.grad.data), [5.0, 5.0])


def test_accumulation_keeps_an_earlier_grad_object_unchanged(xp):
    w = xp.asarray([1.0, 2.0], requires_grad=True)
    xp.sum(w * w + w).backward()  # fan-out: 2w + 1, accumulated within one backward
    first = w.grad
    np.testing.assert_array_equal(np.asarray(first.data), [3.0, 5.0])
    xp.sum(3.0 * w).backward()
    np.testing.assert_array_equal(np.asarray(w.grad.data), [6.0, 8.0])
    np.testing.assert_array_equal(np.asarray(first.data), [3.0, 5.0])


# -- weights reused by a looped cell: factors stacked, one matmul per leaf ------------------
def _loop_loss(xp, cell, ws, xs):
    """A cell looped over xs; w[1] is also used outside the cells (a plain gradient
    reaches the same leaf as the stacked factors)."""
    n, hidden = xs[0].shape[0], ws[1].shape[-1]
    h = xp.zeros((n, hidden), dtype=xp.float64)
    c = h
    total = 0.0
    for x in xs:
        if cell == "gru":
            h = F.gru_cell(x, h, *ws)
        elif cell == "lstm":
            h, c = F.lstm_cell(x, (h, c), *ws)
        else:
            h = F.gated_memory_cell(h, x, *ws)
        total = total + xp.mean(h * h)
    return total + xp.sum(ws[1] * ws[1]) * 0.01


_CELLS = {  # shapes of the weights for input 3, hidden 4
    "gru": [(12, 3), (12, 4), (12,), (12,)],
    "lstm": [(16, 3), (16, 4), (16,), (16,)],
    "gmc": [(7, 4), (7, 4), (4,), (4,)],
    # biases that are not 1-D: their gradients are d itself, summed back by the engine
    "gmc-row-bias": [(7, 4), (7, 4), (2, 4), (1, 4)],
}


@pytest.mark.parametrize("cell", sorted(_CELLS))
def test_looped_cell_weight_grads_match_central_differences(xp, cell, monkeypatch):
    rng = np.random.default_rng(5)
    values = [rng.standard_normal(s) * 0.5 for s in _CELLS[cell]]
    xs = [xp.asarray(rng.standard_normal((2, 3))) for _ in range(4)]
    ws = [leaf(xp, v) for v in values]
    stacked = []
    total = ad.engine.node.Outer.total

    def counted(b, outers, cache):
        stacked.append((len(outers), outers[0].b is None))
        return total(b, outers, cache)

    monkeypatch.setattr(ad.engine.node.Outer, "total", staticmethod(counted))
    _loop_loss(xp, cell, ws, xs).backward()
    # both weight matrices and both biases: the factors of the 4 steps, one matmul (sum)
    biases = [] if cell == "gmc-row-bias" else [(4, True), (4, True)]
    assert sorted(stacked) == [(4, False), (4, False)] + biases
    first = [val(w.grad) for w in ws]
    _loop_loss(xp, cell, ws, xs).backward()  # accumulates into the same grads
    for w, g in zip(ws, first):
        np.testing.assert_allclose(val(w.grad), 2 * g, rtol=1e-12)
    eps = 1e-6
    for k, v in enumerate(values):
        num = np.zeros_like(v)
        for idx in np.ndindex(v.shape):
            losses = []
            for sign in (1, -1):
                moved = [u.copy() for u in values]
                moved[k][idx] += sign * eps
                with ad.no_grad():
                    loss = _loop_loss(xp, cell, [xp.asarray(u) for u in moved], xs)
                losses.append(float(val(loss)))
            num[idx] = (losses[0] - losses[1]) / (2 * eps)
        np.testing.assert_allclose(first[k], num, rtol=1e-6, atol=1e-8)


def test_looped_cell_weight_grads_keep_the_weights_dtype():
    xp = ad.Autodiff(np)
    w_ih = xp.asarray(np.full((6, 3), 0.1, np.float32), requires_grad=True)
    w_hh = xp.asarray(np.full((6, 2), 0.1, np.float32), requires_grad=True)
    x = xp.asarray(np.ones((4, 3)))  # float64 inputs promote the step to float64
    h = xp.zeros((4, 2), dtype=xp.float64)
    for _ in range(3):
        h = F.gru_cell(x, h, w_ih, w_hh)
    xp.sum(h).backward()
    assert w_ih.grad.dtype == xp.float32 and w_hh.grad.dtype == xp.float32
    assert w_ih.grad.shape == (6, 3) and w_hh.grad.shape == (6, 2)
