"""The conventions of DESIGN.md, each against a hand-derived value or float64
central differences: broadcasting undone centrally, fan-out, metrics after the
loss, astype, ties and kinks, indexing, and gradients keeping dtype and device."""

import array_api_strict
import numpy as np
import pytest

import autodiff as ad
from gradcheck.core import check_grad


def to_numpy(t):
    a = t.data if isinstance(t, ad.Tensor) else t
    return np.from_dlpack(a) if hasattr(a, "__dlpack__") else np.asarray(a)


def grads(xp, f, *arrays, dtype=None):
    """Gradients (as numpy) of the scalar ``f(*tensors)`` w.r.t. every input."""
    kw = {} if dtype is None else {"dtype": getattr(xp, dtype)}
    ts = [xp.asarray(np.asarray(a, dtype=np.float64), requires_grad=True, **kw) for a in arrays]
    f(*ts).backward()
    for t in ts:
        assert t.grad is not None
        assert t.grad.shape == t.shape and t.grad.dtype == t.dtype and t.grad.device == t.device
        assert not t.grad.requires_grad
    out = [to_numpy(t.grad) for t in ts]
    return out[0] if len(out) == 1 else out


rng = np.random.default_rng(0)


# -- broadcasting ------------------------------------------------------------------
SHAPES = [((3, 1), (1, 4)), ((), (2, 3)), ((2, 3), ()), ((4,), (3, 4)), ((2, 1, 3), (4, 1))]
BINARY = {
    "add": lambda xp: xp.add,
    "subtract": lambda xp: xp.subtract,
    "multiply": lambda xp: xp.multiply,
    "divide": lambda xp: lambda a, b: a / (b * b + 1.0),
    "maximum": lambda xp: xp.maximum,
    "atan2": lambda xp: xp.atan2,
    "where": lambda xp: lambda a, b: xp.where(a > b, a * b, a - b),
}


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("op", sorted(BINARY))
def test_broadcasting_is_undone_to_the_primal_shape(xp, op, shapes):
    a, b = (rng.standard_normal(s) for s in shapes)
    check_grad(BINARY[op](xp), a, b, xp=xp)  # also checks shape, dtype and device


# A reduction's gradient reaches element-wise rules before it is broadcast (the pass
# broadcasts it only where a rule, a hook or a leaf needs the full shape): every way
# such a pending gradient meets a broadcast input, a second reduction, fan-out and a
# non-element-wise rule.
PENDING = {
    "sum of a broadcast sum": lambda xp: lambda a, b: xp.sum(a + b),
    "mean over an axis": lambda xp: lambda a, b: xp.sum(xp.mean(a * b, axis=0) * 3.0),
    "kept axis": lambda xp: lambda a, b: xp.sum(xp.sin(xp.sum(a - b, axis=-1, keepdims=True))),
    "unary chain": lambda xp: lambda a, b: xp.mean(xp.exp(-(a * b))),
    "fan-out": lambda xp: lambda a, b: xp.mean(a + b) + xp.sum(xp.tanh(a + b)),
    "then reshape": lambda xp: (
        lambda a, b: xp.sum(xp.reshape(xp.mean(a * b, axis=0, keepdims=True) + b, (-1,)) ** 2)
    ),
    "two reductions": lambda xp: lambda a, b: xp.sum(xp.mean(a + b, axis=0) * xp.mean(b)),
}


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("case", sorted(PENDING))
def test_a_reductions_gradient_broadcast_late_is_exact(xp, case, shapes):
    a, b = (rng.standard_normal(s) for s in shapes)
    check_grad(PENDING[case](xp), a, b, xp=xp)


def test_broadcast_multiply_by_hand(xp):
    a = np.array([[1.0], [2.0], [3.0]])
    b = np.array([[1.0, -2.0, 4.0, 0.5]])
    ga, gb = grads(xp, lambda x, y: xp.sum(x * y), a, b)
    np.testing.assert_allclose(ga, np.full((3, 1), b.sum()))
    np.testing.assert_allclose(gb, np.full((1, 4), a.sum()))
    g0, g1 = grads(xp, lambda s, m: xp.sum(s + m), np.array(2.0), np.ones((2, 3)))
    assert g0.shape == () and g0 == 6.0
    np.testing.assert_allclose(g1, np.ones((2, 3)))


@pytest.mark.parametrize(
    "shape, target", [((3, 1), (2, 3, 4)), ((4,), (3, 4)), ((), (2, 2)), ((1, 1), (5, 1))]
)
def test_sum_of_broadcast_to(xp, shape, target):
    g = grads(xp, lambda x: xp.sum(xp.broadcast_to(x, target)), np.ones(shape))
    np.testing.assert_allclose(g, np.full(shape, np.prod(target) / np.prod(shape)))
    assert np.all(g != 0)
    check_grad(lambda x: xp.broadcast_to(x, target), rng.standard_normal(shape), xp=xp)


# -- fan-out ----------------------------------------------------------------------
def test_fan_out_sums_every_use(xp):
    s = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(grads(xp, lambda t: xp.sum(t * t + t), s), 2 * s + 1)
    diamond = grads(xp, lambda a: xp.sum(3 * a + xp.exp(a)), s)
    np.testing.assert_allclose(diamond, 3 + np.exp(s), rtol=1e-14)

    # One intermediate used by three later nodes, one of them twice.
    def deep(a):
        h = xp.sin(a)
        return xp.sum(h * h + xp.exp(h) * a - h)

    expected = np.cos(s) * (2 * np.sin(s) + np.exp(np.sin(s)) * s - 1) + np.exp(np.sin(s))
    np.testing.assert_allclose(grads(xp, deep, s), expected, rtol=1e-12)
    check_grad(deep, s, xp=xp)


def test_metrics_after_the_loss_do_not_change_its_gradient(xp):
    w = xp.asarray([0.5, -1.0, 2.0], requires_grad=True)
    y = w * 3.0
    loss = xp.sum(y * y)
    acc = xp.mean(xp.astype(y > 0, xp.float64))
    loss2 = loss * 100 + xp.sum(w)
    logged = xp.sum(xp.exp(y))
    loss.backward()
    np.testing.assert_allclose(to_numpy(w.grad), 18 * np.array([0.5, -1.0, 2.0]))
    assert float(acc) == pytest.approx(2 / 3)
    assert loss2.requires_grad and logged.requires_grad


# -- astype ---------------------------------------------------------------------------
@pytest.mark.parametrize("src, mid", [("float32", "float64"), ("float64", "float32")])
def test_astype_casts_the_gradient_back(xp, src, mid):
    v = np.array([0.5, -1.5, 2.0])
    g = grads(
        xp, lambda x: xp.sum(xp.astype(x, getattr(xp, mid)) ** 3), v, dtype=src
    )  # grads() asserts g has the input's dtype
    assert g.dtype == np.dtype(src)
    np.testing.assert_allclose(g, 3 * v**2, rtol=1e-6)
    assert np.all(g != 0)
    same = grads(xp, lambda x: xp.sum(xp.astype(x, getattr(xp, src)) * 2.0), v, dtype=src)
    np.testing.assert_allclose(same, 2.0)


# -- ties and kinks -------------------------------------------------------------------
@pytest.mark.parametrize(
    "fn, x, expected",
    [
        ("max", [1.0, 3.0, 3.0, 2.0], [0, 0.5, 0.5, 0]),
        ("min", [1.0, 1.0, 1.0, 2.0], [1 / 3, 1 / 3, 1 / 3, 0]),
        ("max", [[2.0, 2.0, 1.0], [0.0, 5.0, 4.0]], [[0.5, 0.5, 0], [0, 1, 0]]),
        ("max0", [[2.0, 2.0, 1.0], [2.0, 5.0, 1.0]], [[0.5, 0, 0.5], [0.5, 1, 0.5]]),
        ("min", [[4.0, 4.0], [4.0, 4.0]], [[0.25, 0.25], [0.25, 0.25]]),
    ],
)
def test_max_min_split_ties_evenly(xp, fn, x, expected):
    def f(t):
        if fn == "max0":
            return xp.sum(xp.max(t, axis=0))
        if t.ndim == 2 and fn == "max":
            return xp.sum(xp.max(t, axis=1))
        return getattr(xp, fn)(t)

    np.testing.assert_allclose(grads(xp, f, np.array(x)), expected)


@pytest.mark.parametrize("fn", ["maximum", "minimum"])
def test_maximum_minimum_give_half_to_each_side_on_a_tie(xp, fn):
    a, b = np.array([1.0, 2.0, 3.0, -1.0]), np.array([1.0, 0.0, 4.0, -1.0])
    ga, gb = grads(xp, lambda x, y: xp.sum(getattr(xp, fn)(x, y)), a, b)
    first = (a > b) if fn == "maximum" else (a < b)
    second = (b > a) if fn == "maximum" else (b < a)
    np.testing.assert_allclose(ga, np.where(a == b, 0.5, first.astype(float)))
    np.testing.assert_allclose(gb, np.where(a == b, 0.5, second.astype(float)))


def test_kinks(xp):
    np.testing.assert_array_equal(
        grads(xp, lambda x: xp.sum(xp.abs(x)), np.array([-2.0, 0.0, 3.0])), [-1.0, 0.0, 1.0]
    )
    for kw in ({}, {"ord": 2}, {"ord": 3}, {"ord": 1}, {"axis": 1}):
        g = grads(xp, lambda x: xp.sum(xp.linalg.vector_norm(x, **kw)), np.zeros((2, 3)))
        assert np.all(np.isfinite(g)), kw
        np.testing.assert_array_equal(g, np.zeros((2, 3)))
    g = grads(xp, lambda x: xp.linalg.matrix_norm(x), np.zeros((2, 2)))
    np.testing.assert_array_equal(g, np.zeros((2, 2)))
    g = grads(xp, lambda x: xp.linalg.vector_norm(x), np.array([3.0, -4.0]))
    np.testing.assert_allclose(g, [0.6, -0.8])


def test_std_of_a_constant_row_is_zero_not_nan(xp):
    x = np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]])
    for correction in (0.0, 1.0):
        g = grads(xp, lambda t: xp.sum(xp.std(t, axis=1, correction=correction)), x)
        assert np.all(np.isfinite(g))
        np.testing.assert_array_equal(g[0], 0.0)
        row = x[1]
        expected = (row - row.mean()) / ((3 - correction) * row.std(ddof=correction))
        np.testing.assert_allclose(g[1], expected, rtol=1e-12)
    np.testing.assert_array_equal(grads(xp, lambda t: xp.std(t), np.full(4, 3.0)), 0.0)


@pytest.mark.parametrize(
    "x, expected",
    [
        ([0.0, 2.0, 3.0], [6.0, 0.0, 0.0]),
        ([2.0, 0.0, 3.0], [0.0, 6.0, 0.0]),
        ([0.0, 2.0, 0.0], [0.0, 0.0, 0.0]),
        ([1.5, 2.0, -4.0], [-8.0, -6.0, 3.0]),
        ([0.0], [1.0]),
    ],
)
def test_prod_is_exact_with_zeros(xp, x, expected):
    g = grads(xp, lambda t: xp.prod(t), np.array(x))
    np.testing.assert_array_equal(g, expected)


def test_prod_over_an_axis_with_zeros(xp):
    x = np.array([[0.0, 2.0, 3.0], [1.0, 0.0, 0.0], [1.0, 2.0, 4.0]])
    g = grads(xp, lambda t: xp.sum(xp.prod(t, axis=1)), x)
    np.testing.assert_array_equal(g, [[6, 0, 0], [0, 0, 0], [8, 4, 2]])
    g = grads(xp, lambda t: xp.sum(xp.prod(t, axis=0)), x)
    np.testing.assert_array_equal(g, [[1, 0, 0], [0, 4, 12], [0, 0, 0]])


# -- indexing -----------------------------------------------------------------------------
def test_getitem_with_repeated_indices_accumulates(xp):
    idx = xp.asarray([0, 0, 1])
    g = grads(xp, lambda x: xp.sum(x[idx]), np.arange(5.0))
    np.testing.assert_array_equal(g, [2, 1, 0, 0, 0])
    rows, cols = xp.asarray([0, 0, 1, 0]), xp.asarray([1, 1, 0, 1])
    w = xp.asarray([1.0, 10.0, 100.0, 1000.0])
    g = grads(xp, lambda x: xp.sum(x[rows, cols] * w), np.ones((3, 2)))
    np.testing.assert_array_equal(g, [[0, 1011], [100, 0], [0, 0]])
    g = grads(xp, lambda x: xp.sum(xp.take(x, xp.asarray([2, 2, 2, 0]))), np.ones(3))
    np.testing.assert_array_equal(g, [1, 0, 3])
    check_grad(lambda x: x[xp.asarray([3, 1, 3, 3])], rng.standard_normal((4,)), xp=xp)


def test_getitem_basic_and_boolean(xp):
    x = rng.standard_normal((3, 4))
    check_grad(lambda t: t[1:, ::2], x, xp=xp)
    check_grad(lambda t: t[-1, None, :], x, xp=xp)
    check_grad(lambda t: t[t > 0], x, xp=xp)
    g = grads(xp, lambda t: xp.sum(t[0, 1:3] * 2.0), x)
    expected = np.zeros((3, 4))
    expected[0, 1:3] = 2.0
    np.testing.assert_array_equal(g, expected)


def test_setitem_gradients_flow_to_old_values_and_to_the_value(xp):
    x0, v0, w0 = np.arange(1.0, 6.0), np.array([10.0, 20.0]), np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    x = xp.asarray(x0, requires_grad=True)
    v = xp.asarray(v0, requires_grad=True)
    y = x * 1.0
    y[1:3] = v
    assert y.requires_grad
    np.testing.assert_array_equal(to_numpy(y), [1, 10, 20, 4, 5])
    xp.sum(y * xp.asarray(w0)).backward()
    np.testing.assert_array_equal(to_numpy(x.grad), [1, 0, 0, 4, 5])
    np.testing.assert_array_equal(to_numpy(v.grad), [2, 3])

    def f(a, b):
        y = a * a
        y[0, :] = b
        y[2, 1] = 7.0
        return y * a

    check_grad(f, rng.standard_normal((3, 2)), rng.standard_normal((2,)), xp=xp)


def test_setitem_of_a_broadcast_scalar_tensor(xp):
    def f(a, s):
        y = xp.zeros((2, 3)) + a
        y[:, 1] = s
        return y * y

    check_grad(f, rng.standard_normal((2, 3)), rng.standard_normal(()), xp=xp)


# -- dtype and device ------------------------------------------------------------------
DEVICE_CASES = {
    "elementwise": lambda xp: lambda a, b: xp.exp(a) * b - a / (b * b + 1.0),
    "broadcast": lambda xp: lambda a, b: a[:, :1] * b[:1, :],
    "reductions": lambda xp: lambda a, b: xp.max(a, axis=0) + xp.mean(b, axis=0),
    "prod_std": lambda xp: lambda a, b: xp.prod(a, axis=1) + xp.std(b, axis=1),
    "matmul": lambda xp: lambda a, b: a @ xp.matrix_transpose(b),
    "getitem": lambda xp: (
        lambda a, b: a[_index(xp, a, [0, 0, 2]), _index(xp, a, [1, 1, 3])] + b[1, 1:]
    ),
    "take": lambda xp: lambda a, b: xp.take(a, _index(xp, a, [3, 1, 1]), axis=1) + b[:, :3],
    "sort": lambda xp: lambda a, b: xp.sort(a, axis=1) * b,
    "where": lambda xp: lambda a, b: xp.where(a > b, a, b),
    "concat": lambda xp: lambda a, b: xp.concat([a, b], axis=0),
    "cumulative": lambda xp: (
        lambda a, b: xp.cumulative_prod(a, axis=1) + xp.cumulative_sum(b, axis=0)
    ),
    "astype": lambda xp: lambda a, b: xp.astype(a, xp.float32) * xp.astype(b, xp.float32),
    "norm": lambda xp: lambda a, b: xp.linalg.vector_norm(a - b, axis=1),
    "inv": lambda xp: lambda a, b: xp.linalg.inv(a[:, :3] + 3.0 * xp.eye(3, device=a.device)) @ b,
    "setitem": lambda xp: lambda a, b: _assign(a, b),
}


def _index(xp, like, values):
    return xp.asarray(values, device=like.device)


def _assign(a, b):
    y = a * 1.0
    y[1, :] = b[0, :]
    return y


def _grads_on(xp, f, a, b, **kw):
    ta = xp.asarray(a, requires_grad=True, **kw)
    tb = xp.asarray(b, requires_grad=True, **kw)
    xp.sum(f(ta, tb)).backward()
    return ta, tb


@pytest.mark.parametrize("name", sorted(DEVICE_CASES))
def test_gradients_keep_the_input_dtype_and_device(xp, name):
    a, b = rng.uniform(0.5, 1.5, (3, 4)), rng.uniform(-1.0, 1.0, (3, 4))
    f = DEVICE_CASES[name](xp)
    # float64 on the default device, against central differences (checks dtype and device)
    tol = {"eps": 1e-2, "atol": 1e-4} if name == "astype" else {}
    check_grad(f, a, b, xp=xp, **tol)
    check_grad(f, a, b, xp=xp, dtype="float32", eps=1e-2, atol=1e-2, rtol=1e-2)
    ref = _grads_on(xp, f, a, b)
    if xp.__name__ != "autodiff.array_api_strict":
        return
    device = array_api_strict.Device("device1")
    cpu = array_api_strict.Device("CPU_DEVICE")
    for dtype in (xp.float64, xp.float32):
        ts = _grads_on(xp, f, a, b, device=device, dtype=dtype)
        for t, r in zip(ts, ref):
            assert t.device == device and t.grad.device == device
            assert t.grad.dtype == dtype and t.grad.shape == t.shape
            back = to_numpy(t.grad.to_device(cpu))
            np.testing.assert_allclose(back, to_numpy(r.grad), rtol=1e-5, atol=1e-5)


def test_gradient_of_a_0d_input_is_a_backend_array(xp):
    s = xp.asarray(2.0, requires_grad=True)
    (s * 3.0).backward()
    assert isinstance(s.grad.data, type(s.data))
    assert s.grad.shape == () and float(s.grad) == 3.0
    v = xp.asarray([1.0, 2.0], requires_grad=True)
    xp.sum(v * s).backward()
    assert isinstance(s.grad.data, type(s.data)) and isinstance(v.grad.data, type(v.data))
    assert float(s.grad) == 6.0


def test_softmax_family_on_numpy_integers_is_floating():
    # NumPy computes exp of integers in float64: so does the softmax family (the
    # in-place fast paths must not write floats into the integer input's buffer)
    from autodiff.nn import functional as F

    xp = ad.Autodiff(np)
    x = xp.asarray([1, 2, 3])
    e = np.exp([1.0, 2.0, 3.0])
    lse = np.log(e.sum())
    np.testing.assert_allclose(to_numpy(F.softmax(x)), e / e.sum(), rtol=1e-15)
    np.testing.assert_allclose(to_numpy(F.log_softmax(x)), [1 - lse, 2 - lse, 3 - lse], rtol=1e-15)
    np.testing.assert_allclose(to_numpy(F.logsumexp(x)), lse, rtol=1e-15)
    loss = F.cross_entropy(xp.asarray([[1, 2]]), xp.asarray([0]))
    np.testing.assert_allclose(to_numpy(loss), np.log1p(np.e), rtol=1e-15)
    np.testing.assert_array_equal(to_numpy(x), [1, 2, 3])
