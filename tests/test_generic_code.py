"""Array-API code written by others differentiates unchanged, or fails loudly.

One test per defect class found on third-party code (the reproducers of the issue
that asked for this), on numpy and array_api_strict; each value is compared with a
hand-derived formula. The third-party suite itself is tests/test_third_party.py.
"""

import sys

import array_api_compat
import numpy as np
import pytest

import autodiff as ad
from gradcheck import check_grad

X = np.array([0.5, -1.0, 2.0])


def val(t):
    return np.asarray((t.detach() if isinstance(t, ad.Tensor) else t).data)


def leaf(xp, a):
    return xp.asarray(np.asarray(a, dtype=np.float64), requires_grad=True)


# -- custom_vjp is differentiated under create_graph, or refuses -------------------------
def _ident(xp):
    @ad.custom_vjp
    def ident(x):
        return x * 1.0

    ident.defvjp(lambda x: (x * 1.0, None), lambda res, g: (g,))
    return ident


def _sine(xp, bwd=None):
    @ad.custom_vjp
    def sine(x):
        return xp.sin(x)

    sine.defvjp(lambda x: (xp.sin(x), xp.cos(x)), bwd or (lambda cos, g: (g * cos,)))
    return sine


def test_custom_vjp_hessian_of_identity_is_not_zero(xp):
    ident = _ident(xp)
    h = ad.hessian(lambda x: xp.sum(ident(x) ** 2))(xp.asarray(np.array([1.0, 2.0])))
    np.testing.assert_allclose(val(h), 2.0 * np.eye(2))


def test_custom_vjp_backward_create_graph_records_the_user_rule(xp):
    ident = _ident(xp)
    x = leaf(xp, X)
    xp.sum(ident(x) ** 3).backward(create_graph=True)
    assert x.grad.requires_grad
    np.testing.assert_allclose(val(x.grad), 3 * X**2)
    g = x.grad
    x.grad = None
    xp.sum(g).backward()
    np.testing.assert_allclose(val(x.grad), 6 * X)


def test_custom_vjp_residuals_follow_the_inputs_under_create_graph(xp):
    # bwd reads cos(x), a residual of fwd: the second derivative flows through it too
    sine = _sine(xp)
    h = ad.hessian(lambda x: xp.sum(sine(x)))(xp.asarray(X))
    np.testing.assert_allclose(val(h), np.diag(-np.sin(X)), atol=1e-15)
    np.testing.assert_allclose(val(ad.grad(lambda x: xp.sum(sine(x)))(xp.asarray(X))), np.cos(X))


def test_custom_vjp_with_a_foreign_bwd_refuses_second_order(xp):
    def foreign(cos, g):  # computes with numpy on the raw values
        return (xp.asarray(np.asarray(g) * np.asarray(cos)),)

    sine = _sine(xp, foreign)
    # first order: bwd may compute anything, its result is taken as the gradient
    np.testing.assert_allclose(val(ad.grad(lambda x: xp.sum(sine(x)))(xp.asarray(X))), np.cos(X))
    with pytest.raises(RuntimeError, match="detach"):
        ad.hessian(lambda x: xp.sum(sine(x)))(xp.asarray(X))


def test_custom_vjp_bwd_returning_a_raw_array_under_create_graph_raises():
    xp = ad.Autodiff(np)
    sine = _sine(xp, lambda cos, g: (np.cos(X),))  # ignores g: can't be differentiated
    with pytest.raises(TypeError, match="sine.*can't be differentiated"):
        ad.hessian(lambda x: xp.sum(sine(x)))(X)


def test_custom_vjp_bwd_that_detaches_g_under_create_graph_raises(xp):
    @ad.custom_vjp
    def ident(x):
        return x * 1.0

    ident.defvjp(lambda x: (x * 1.0, None), lambda res, g: (g.detach() * 1.0,))
    with pytest.raises(TypeError, match="does not depend on g"):
        ad.hessian(lambda x: xp.sum(ident(x) ** 2))(xp.asarray(np.array([1.0, 2.0])))


def test_custom_vjp_bwd_returning_zeros_is_fine_under_create_graph(xp):
    @ad.custom_vjp
    def flat(x):
        return x * 0.0

    flat.defvjp(lambda x: (x * 0.0, None), lambda res, g: (xp.zeros_like(g),))
    h = ad.hessian(lambda x: xp.sum(flat(x) ** 2))(xp.asarray(np.array([1.0, 2.0])))
    np.testing.assert_array_equal(val(h), np.zeros((2, 2)))


# -- converting a tensor that requires grad to a foreign array raises --------------------
def test_numpy_asarray_of_a_tensor_requiring_grad_raises_not_a_zero_gradient():
    xp = ad.Autodiff(np)
    with pytest.raises(RuntimeError, match=r"requires grad.*detach\(\)"):
        ad.grad(lambda x: xp.sum(xp.asarray(np.tanh(np.asarray(x)))))(np.array([0.5, 1.0]))


@pytest.mark.parametrize(
    "convert",
    [np.asarray, np.array, np.from_dlpack, lambda t: np.asarray(memoryview(t))],
    ids=["asarray", "array", "from_dlpack", "buffer"],
)
def test_every_export_of_a_tensor_requiring_grad_raises(xp, convert):
    x = leaf(xp, X)
    if convert.__name__ == "<lambda>" and not hasattr(x.data, "__buffer__"):
        pytest.skip("the backend's arrays offer no __buffer__")
    if convert.__name__ == "<lambda>" and sys.version_info < (3, 12):
        pytest.skip("__buffer__ of a Python class needs Python 3.12 (PEP 688)")
    for t in (x, x * 2.0):
        with pytest.raises(RuntimeError, match="requires grad.*detach"):
            convert(t)
    with ad.no_grad():  # a leaf still requires grad there (as in torch)
        with pytest.raises(RuntimeError, match="requires grad.*detach"):
            convert(x)
    if convert.__name__ != "<lambda>":
        np.testing.assert_array_equal(np.asarray(convert(x.detach())), X)


# -- numpy ufuncs on a NumPy-backed Tensor --------------------------------------------
def test_numpy_ufuncs_of_the_standard_are_the_namespace_functions():
    xp = ad.Autodiff(np)
    x = leaf(xp, X)
    y = np.exp(x) * np.arange(3.0) + np.float64(2.0) * np.arctan2(x, 1.0)  # scipy's style
    assert isinstance(y, ad.Tensor) and y.requires_grad
    xp.sum(y).backward()
    np.testing.assert_allclose(val(x.grad), np.exp(X) * np.arange(3.0) + 2.0 / (1 + X**2))


def test_other_numpy_ufunc_uses_convert_and_so_refuse_a_tensor_requiring_grad():
    xp = ad.Autodiff(np)
    x = leaf(xp, X)
    a = np.ones(3)
    with pytest.raises(RuntimeError, match="numpy.add: .*requires grad"):
        a += x  # out=a: the value would leave the graph
    with pytest.raises(RuntimeError, match="numpy.add.reduce"):
        np.add.reduce(x)
    assert np.add.reduce(x.detach()) == pytest.approx(X.sum())
    with pytest.raises(TypeError, match="out= can't be a Tensor"):
        np.add(X, X, out=xp.asarray(np.zeros(3)))


def test_the_namespaces_from_dlpack_refuses_a_tensor_requiring_grad(xp):
    x = leaf(xp, X)
    with pytest.raises(RuntimeError, match="from_dlpack: .*requires grad"):
        xp.from_dlpack(x)
    other = ad.Autodiff(np).asarray(X)  # a Tensor of any namespace moves its buffer
    np.testing.assert_array_equal(val(xp.from_dlpack(other)), X)
    leaf2 = xp.from_dlpack(other, requires_grad=True)
    assert leaf2.requires_grad
    with ad.no_grad():
        leaf2 *= 2.0
    np.testing.assert_array_equal(val(other), X)  # the leaf owns its buffer


def test_copy_and_deepcopy_as_in_torch(xp):
    import copy

    x = leaf(xp, X)
    xp.sum(x * x).backward()
    d = copy.deepcopy(x)
    assert d.requires_grad and d.is_leaf and d is not x
    np.testing.assert_array_equal(val(d), X)
    np.testing.assert_array_equal(val(d.grad), 2 * X)
    with ad.no_grad():
        d *= 0.0
    np.testing.assert_array_equal(val(x), X)  # its own buffer
    y = x * 3.0
    c = copy.copy(y)  # the same value and node
    xp.sum(c).backward()
    np.testing.assert_array_equal(val(x.grad), 2 * X + 3.0)
    e = copy.deepcopy(y)  # a computed tensor: a recorded copy, its own buffer
    assert not e.is_leaf and e.requires_grad
    with ad.no_grad():
        e *= 0.0
    np.testing.assert_array_equal(val(y), 3.0 * X)


# -- a Tensor converts as its backend array does -----------------------------------------
def test_tensors_convert_to_numpy_as_their_backend_arrays_do(xp):
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    t = xp.asarray(a)
    raw = t.data
    np.testing.assert_array_equal(np.asarray(t), np.asarray(raw))
    np.testing.assert_array_equal(np.asarray(t, dtype=np.float32), a.astype(np.float32))
    np.testing.assert_array_equal(np.from_dlpack(t), a)
    for name in ("__array__", "__buffer__"):
        assert hasattr(t, name) == hasattr(raw, name), name


# -- multi-output ops decide per output --------------------------------------------------
def test_broadcast_arrays_output_is_differentiable_after_a_bool_one(xp):
    x = leaf(xp, X)
    mask, y = xp.broadcast_arrays(x > 0, x)
    assert not mask.requires_grad and y.requires_grad
    xp.sum(y * y).backward()
    np.testing.assert_allclose(val(x.grad), 2 * X)


def test_meshgrid_of_an_integer_and_a_float_array():
    xp = ad.Autodiff(np)  # the standard asks for one dtype; numpy allows two
    x = leaf(xp, X)
    i, v = xp.meshgrid(xp.arange(2), x, indexing="ij")
    assert not i.requires_grad and v.requires_grad
    xp.sum(v * xp.astype(i + 1, xp.float64)).backward()
    np.testing.assert_allclose(val(x.grad), np.full(3, 3.0))


# -- in-place writes through views and into saved tensors --------------------------------
def test_inplace_through_a_basic_index_view_goes_into_the_base(xp):
    z0 = leaf(xp, np.ones((2, 3)))
    z = z0 * 1.0
    v = z[:, 1]
    row = z[1, :]
    v += 5.0
    expected = np.array([[1.0, 6.0, 1.0], [1.0, 6.0, 1.0]])
    np.testing.assert_array_equal(val(z), expected)
    np.testing.assert_array_equal(val(v), [6.0, 6.0])
    np.testing.assert_array_equal(val(row), expected[1])  # other views see the write
    (xp.sum(z * z) + xp.sum(v * 3.0)).backward()
    grad = 2 * expected
    grad[:, 1] += 3.0
    np.testing.assert_allclose(val(z0.grad), grad)


def test_a_written_value_that_requires_grad_flows_through_the_view(xp):
    z = xp.asarray(np.zeros((2, 3)))
    w = leaf(xp, [2.0, 3.0])
    v = z[:, 2]
    v[...] = w * w  # z needs no grad: it does now, through the view
    assert z.requires_grad
    xp.sum(z * xp.asarray(np.arange(6.0).reshape(2, 3))).backward()
    np.testing.assert_allclose(val(w.grad), [2 * 2.0 * 2.0, 2 * 3.0 * 5.0])


def test_inplace_through_a_reshape_or_transpose_view(xp):
    z0 = leaf(xp, np.arange(6.0).reshape(2, 3))
    z = z0 * 1.0
    r = xp.reshape(z, (3, 2))
    t = xp.matrix_transpose(z)
    r[0, :] = xp.asarray([10.0, 20.0])
    t *= 2.0
    expected = 2.0 * np.array([[10.0, 20.0, 2.0], [3.0, 4.0, 5.0]])
    np.testing.assert_array_equal(val(z), expected)
    np.testing.assert_array_equal(val(r), expected.reshape(3, 2))
    xp.sum(z * xp.asarray(np.arange(6.0).reshape(2, 3))).backward()
    np.testing.assert_allclose(val(z0.grad), [[0.0, 0.0, 4.0], [6.0, 8.0, 10.0]])


# view of z (2, 3) in the namespace, the same view of a numpy array (writes go through)
VIEWS = {
    "expand_dims": (lambda xp, z: xp.expand_dims(z, axis=0), lambda a: np.expand_dims(a, 0)),
    "permute_dims": (lambda xp, z: xp.permute_dims(z, (1, 0)), lambda a: a.T),
    "flip": (lambda xp, z: xp.flip(z, axis=1), lambda a: np.flip(a, 1)),
    "unstack": (lambda xp, z: xp.unstack(z, axis=1)[2], lambda a: a[:, 2]),
    "moveaxis": (lambda xp, z: xp.moveaxis(z, 0, 1), lambda a: np.moveaxis(a, 0, 1)),
    "negative-step": (lambda xp, z: z[::-1, 1:], lambda a: a[::-1, 1:]),
    "view-of-a-view": (lambda xp, z: xp.flip(z[:, 1:], axis=0), lambda a: np.flip(a[:, 1:], 0)),
    "reshape-then-slice": (
        lambda xp, z: xp.reshape(z, (3, 2))[1:, :],
        lambda a: a.reshape(3, 2)[1:],
    ),
}


@pytest.mark.parametrize("view", VIEWS)
def test_inplace_through_every_kind_of_view(xp, view):
    take, take_np = VIEWS[view]
    a0 = np.arange(1.0, 7.0).reshape(2, 3)
    weights = a0[::-1] * 0.5
    z0 = leaf(xp, a0)
    z = z0 * 1.0
    row = z[0, :]
    v = take(xp, z)
    v *= 10.0
    a = a0.copy()
    take_np(a)[...] *= 10.0  # what numpy's views do
    np.testing.assert_array_equal(val(z), a)
    np.testing.assert_array_equal(val(v), take_np(a))
    np.testing.assert_array_equal(val(row), a[0])
    xp.sum(z * xp.asarray(weights)).backward()
    np.testing.assert_array_equal(val(z0.grad), np.where(a != a0, 10.0, 1.0) * weights)


def test_a_write_through_a_broadcast_view_is_refused(xp):
    z = leaf(xp, X) * 1.0
    b = xp.broadcast_to(z, (2, 3))
    with pytest.raises(ValueError, match="repeats elements"):
        b += 1.0


def test_views_of_a_leaf_that_requires_grad_are_not_written(xp):
    x = leaf(xp, X)
    with pytest.raises(RuntimeError, match="through a view"):
        x[1:] *= 2.0


def test_inplace_change_of_a_saved_tensor_that_needs_no_grad(xp):
    # scipy.integrate.romb: y = sum(x * h); h /= 2
    x = leaf(xp, [1.0, 2.0])
    h = xp.asarray(np.array([3.0, 4.0]))
    y = xp.sum(x * h)
    h /= 2.0
    y.backward()
    np.testing.assert_allclose(val(x.grad), [3.0, 4.0])
    np.testing.assert_allclose(val(h), [1.5, 2.0])


def test_writes_with_nothing_recorded_stay_in_place(xp):
    a = xp.zeros(3)
    b = a[1:]
    a[1] = 5.0
    b += 1.0
    np.testing.assert_array_equal(val(a), [0.0, 6.0, 1.0])


# -- a library's own dispatch sees a conforming array ------------------------------------
def test_library_dispatch_sees_the_wrapped_namespace(xp):
    a = np.arange(6.0).reshape(2, 3)
    t = xp.asarray(a)
    assert array_api_compat.array_namespace(t) is xp
    assert array_api_compat.is_array_api_obj(t)
    assert t.device == xp.asarray(1.0).device == array_api_compat.device(t)
    np.testing.assert_array_equal(val(t.mT), a.T)
    np.testing.assert_array_equal(val(t.to_device(t.device)), a)
    assert xp.__array_namespace_info__().default_dtypes()["real floating"] == t.dtype


# -- NaN in an untaken branch: the gradient there is exactly zero -----------------------
def test_nan_of_an_untaken_where_branch_gives_a_zero_gradient(xp):
    x = leaf(xp, [-1.0, 4.0])
    with np.errstate(invalid="ignore"):
        xp.sum(xp.where(x > 0, xp.sqrt(x), 0.0 * x)).backward()
    np.testing.assert_array_equal(val(x.grad), [0.0, 0.25])  # not NaN: 0 * inf


def test_nan_through_a_chain_of_element_wise_ops_and_a_broadcast_input(xp):
    # scipy.stats.tvar: NaN outside the limits, (x - mean)**2 masked by where
    m = leaf(xp, 0.5)
    w = leaf(xp, [2.0, 3.0])
    d = xp.asarray(np.array([1.0, np.nan])) - m
    y = xp.where(xp.isnan(d), 0.0, xp.exp(d * d) * w)
    xp.sum(y).backward()
    np.testing.assert_allclose(val(m.grad), -2 * 0.5 * np.exp(0.25) * 2.0)
    np.testing.assert_allclose(val(w.grad), [np.exp(0.25), 0.0])


def test_nan_overwritten_by_setitem_gives_a_zero_gradient(xp):
    # scikit-learn's incremental variance: 0 / 0 for the empty first batch, overwritten
    x = leaf(xp, [1.0, 2.0])
    z = xp.zeros(2)
    with np.errstate(invalid="ignore"):
        y = (z / z - x) ** 2
    y[xp.asarray([True, False])] = x[:1] * 3.0
    xp.sum(y).backward()
    assert np.isnan(val(x.grad)[1])  # y[1] is still NaN: its gradient is NaN
    np.testing.assert_allclose(val(x.grad)[:1], [3.0])


def test_where_masks_do_not_leak_past_a_non_element_wise_op(xp):
    # the mask stops at matmul: a NaN of a matrix entry that is used stays visible
    a = leaf(xp, [[1.0, 2.0], [3.0, 4.0]])
    b = xp.asarray(np.array([[1.0], [np.nan]]))
    y = a @ b  # both rows use the NaN
    s = xp.sum(xp.where(xp.asarray(np.array([[True], [False]])), y, 0.0))
    s.backward()
    assert np.isnan(val(a.grad)[0, 1])


def test_second_derivative_through_an_untaken_nan_branch(xp):
    x = leaf(xp, [-1.0, 4.0])
    with np.errstate(invalid="ignore"):
        g = ad.grad(lambda t: xp.sum(xp.where(t > 0, xp.sqrt(t) ** 3, 0.0)))(x)
        xp.sum(g).backward()
    np.testing.assert_allclose(val(x.grad), [0.0, 0.75 / 2.0])  # (t^1.5)" = 0.75 / sqrt(t)


def test_an_infinite_scalar_in_the_untaken_branch(xp):
    x = leaf(xp, [1.0, 2.0])
    with np.errstate(invalid="ignore"):
        y = xp.where(xp.asarray([True, False]), x * float("inf"), x)
        xp.sum(y).backward()
    np.testing.assert_array_equal(val(x.grad), [np.inf, 1.0])  # 0 * inf only where untaken


@pytest.mark.parametrize("test", ["ttest_1samp", "jarque_bera", "skewtest", "chisquare"])
def test_scipy_tests_that_convert_run_on_tensors_that_need_no_grad(xp, test):
    # their p-values convert to NumPy: fine for a tensor that doesn't require grad
    stats = pytest.importorskip("scipy.stats")
    x = np.random.default_rng(0).uniform(0.5, 2.0, 12)
    args = (x, 0.5) if test == "ttest_1samp" else (x,)
    want = getattr(stats, test)(*args)
    got = getattr(stats, test)(xp.asarray(x), *args[1:])
    for w, g in zip(want, got):
        np.testing.assert_allclose(val(g), w, rtol=1e-12)


# -- set functions carry the gradient of their values ------------------------------------
@pytest.mark.parametrize("name", ["unique_values", "unique_all", "unique_counts", "unique_inverse"])
def test_unique_values_split_their_gradient_among_repeated_entries(xp, name):
    x = leaf(xp, [3.0, 1.0, 3.0, 2.0, 3.0])
    out = getattr(xp, name)(x)
    values = out if name == "unique_values" else out[0]
    assert values.requires_grad
    if name != "unique_values":  # the integer outputs carry none
        assert not any(o.requires_grad for o in out[1:])
    xp.sum(values * xp.asarray(np.array([10.0, 20.0, 30.0]))).backward()  # values 1, 2, 3
    np.testing.assert_allclose(val(x.grad), [10.0, 10.0, 10.0, 20.0, 10.0])


# -- found in review: each a reproducer -------------------------------------------------
def test_where_with_an_integer_or_float_condition():
    xp = ad.Autodiff(np)  # numpy takes any condition; the standard asks for bool
    x = leaf(xp, np.arange(1.0, 5.0))
    for c1, c2 in (([1, 0, 1, 0], [1, 1, 0, 0]), ([1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0])):
        x.grad = None
        s = xp.sin(x)
        a, b = xp.asarray(np.array(c1)), xp.asarray(np.array(c2))
        xp.sum(xp.where(a, s, 0.0) + xp.where(b, s, 0.0)).backward()
        np.testing.assert_allclose(val(x.grad), np.cos(np.arange(1.0, 5.0)) * [2, 1, 1, 0])


def test_setitem_with_repeated_indices_credits_the_last_write():
    xp = ad.Autodiff(np)  # numpy assigns in order: the last write wins
    x = leaf(xp, np.ones(3))
    z = x * 1.0
    z[xp.asarray(np.array([0, 0]))] = x[1:] * 3.0
    xp.sum(z * xp.asarray(np.array([10.0, 1.0, 1.0]))).backward()
    np.testing.assert_allclose(val(x.grad), [0.0, 1.0, 31.0])

    def f(a, v):
        z = a * 1.0
        z[xp.asarray(np.array([2, 0, 2, 1]))] = v
        return z * xp.asarray(np.array([1.0, 2.0, 3.0]))

    check_grad(f, np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0, 7.0]), xp=xp)


@pytest.mark.parametrize("requires_grad", [True, False])
def test_a_view_the_library_returns_as_a_copy_stays_a_copy(requires_grad):
    xp = ad.Autodiff(np)  # numpy copies a reshape of a transpose, and an integer index
    x = xp.asarray(np.arange(6.0).reshape(2, 3), requires_grad=requires_grad)
    z = x * 1.0
    r = xp.reshape(z.mT, (6,))
    r[0] = 50.0
    v = z[0, 1]
    v += 5.0
    np.testing.assert_array_equal(val(z), np.arange(6.0).reshape(2, 3))
    assert val(r)[0] == 50.0 and val(v) == 6.0


def test_a_detach_alias_and_a_copy_follow_a_copy_on_write_of_their_tensor(xp):
    import copy

    x = leaf(xp, np.ones(3))
    z = x * 1.0
    d = z.detach()
    c = copy.copy(z)
    z += x  # a new buffer for z
    np.testing.assert_array_equal(val(d), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(val(c), [2.0, 2.0, 2.0])
    c[0:1] = xp.asarray(np.array([7.0]))  # a copy.copy handle writes into z too
    np.testing.assert_array_equal(val(z), [7.0, 2.0, 2.0])
    xp.sum(z).backward()
    np.testing.assert_array_equal(val(x.grad), [0.0, 2.0, 2.0])


def test_a_read_only_view_is_written_alike_with_and_without_grad(xp):
    for rg in (True, False):
        z = xp.asarray(np.eye(2), requires_grad=rg) * 1.0
        d = xp.linalg.diagonal(z)  # numpy's diagonal is a read-only view
        d += 1.0
        np.testing.assert_array_equal(val(z), 2.0 * np.eye(2))
        b = xp.broadcast_to(z[0, :], (3, 2))
        with pytest.raises(ValueError, match="repeats elements"):
            b += 1.0


def test_nested_where_keeps_the_untaken_branch_zero(xp):
    x = leaf(xp, [-4.0, 4.0])
    with np.errstate(invalid="ignore"):
        y = xp.where(x > 0, xp.where(x > -5, xp.sqrt(x), 0.0), 0.0)
        xp.sum(y).backward()
    np.testing.assert_array_equal(val(x.grad), [0.0, 0.25])


def test_inplace_casts_between_floating_dtypes_as_the_library(xp):
    x = xp.asarray(np.ones(3, dtype=np.float32), requires_grad=True)
    z = x * 1.0
    w = leaf(xp, np.full(3, 2.0))
    z += w  # float32 += float64 stays float32, recorded
    assert z.dtype == xp.float32
    xp.sum(z).backward()
    assert x.grad.dtype == xp.float32 and w.grad.dtype == xp.float64
    np.testing.assert_array_equal(val(w.grad), np.ones(3))
