"""backends/: the resolver, the index_add kernels (generic and numpy fast path)
against a hand loop, gradients that stay on a non-default device, and errors
that keep the backend's type and name the op."""

import subprocess
import sys

import array_api_compat
import numpy as np
import pytest
from autodiff.backends import generic, numpy_fast

import autodiff as ad
from autodiff import backends

strict = pytest.importorskip("array_api_strict")
CPU = strict.Device("CPU_DEVICE")
DEV1 = strict.Device("device1")


def host(a):
    """A strict (any device), numpy or Tensor array as a float64 numpy array."""
    if isinstance(a, ad.Tensor):
        a = a.data
    if not isinstance(a, np.ndarray):  # a strict array, maybe on another device
        a = np.asarray(a.to_device(CPU))
    return np.asarray(a)


# -- resolver --------------------------------------------------------------------
def test_numpy_and_compat_numpy_are_one_backend():
    assert backends.resolve(np) is backends.resolve(array_api_compat.numpy)
    assert ad.Autodiff(np) is ad.Autodiff(array_api_compat.numpy)
    assert backends.resolve(strict) is not backends.resolve(np)


def test_importing_autodiff_imports_no_optional_gpu_library():
    code = "import autodiff, sys; print('cupy' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_kernel_sources():
    assert backends.resolve(strict).kernel_source["index_add"] == "generic"
    assert backends.resolve(np).kernel_source["index_add"] == "fast"


def test_apply_in_place_on_numpy_new_array_elsewhere():
    values = [-1.0, 0.0, 2.5]
    x = np.asarray(values, dtype=np.float32)
    out = backends.resolve(np).apply_("exp", x)
    assert out is x  # numpy: written into the caller's temporary
    np.testing.assert_allclose(out, np.exp(np.float32(values)), rtol=1e-7)
    s = strict.asarray(values, device=DEV1)
    out = backends.resolve(strict).apply_("tanh", s)
    assert out.device == DEV1
    np.testing.assert_allclose(host(out), np.tanh(values), rtol=1e-15)
    np.testing.assert_array_equal(host(s), values)  # the standard alone: a new array


def test_index_add_in_place_on_numpy_new_array_elsewhere():
    x = np.zeros(4)
    out = backends.resolve(np).index_add_(x, np.asarray([1, 3, 1]), np.asarray([1.0, 2.0, 4.0]))
    assert out is x  # the caller's own array, added into
    np.testing.assert_array_equal(x, [0.0, 5.0, 0.0, 2.0])
    s = strict.zeros(4, dtype=strict.float64)
    out = backends.resolve(strict).index_add_(
        s, strict.asarray([1, 3, 1]), strict.asarray([1.0, 2.0, 4.0])
    )
    np.testing.assert_array_equal(host(out), [0.0, 5.0, 0.0, 2.0])
    np.testing.assert_array_equal(host(s), [0.0] * 4)  # the standard alone: a new array


def test_matmul_stack_lays_products_out_as_a_permuted_stack():
    rng = np.random.default_rng(0)
    pairs = [(rng.normal(size=(2, 3, 4, 5)), rng.normal(size=(2, 3, 5, 6))) for _ in range(3)]
    # by hand: each product (2, 3, 4, 6) permuted to (2, 4, 3, 6), stacked at axis 2
    want = np.stack([np.transpose(a @ b, (0, 2, 1, 3)) for a, b in pairs], axis=2)
    out = backends.resolve(np).matmul_stack(pairs, axis=2, perm=(0, 2, 1, 3))
    assert out.shape == (2, 4, 3, 3, 6) and out.flags.c_contiguous
    np.testing.assert_allclose(out, want, rtol=1e-13)
    spairs = [(strict.asarray(a), strict.asarray(b)) for a, b in pairs]
    sout = backends.resolve(strict).matmul_stack(spairs, axis=2, perm=(0, 2, 1, 3))
    np.testing.assert_allclose(host(sout), want, rtol=1e-13)


def test_numpy_backend_calls_numpy_itself_on_hot_paths():
    B = backends.resolve(np)
    if tuple(int(p) for p in np.__version__.split(".")[:2]) >= (2, 1):
        assert B.matmul is np.matmul and B.asarray is np.asarray
    a = np.arange(6.0).reshape(2, 3)
    # reshape, permute_dims, sum: the array methods and add.reduce, the standard's semantics
    r = B.reshape(a, (3, 2))
    assert np.shares_memory(r, a) and r.tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    assert not np.shares_memory(B.reshape(a, (6,), copy=True), a)
    with pytest.raises(ValueError):
        B.reshape(a.T, (6,), copy=False)  # a copy would be needed
    assert B.permute_dims(a, axes=(1, 0)).tolist() == a.T.tolist()
    assert B.sum(a, axis=0).tolist() == [3.0, 5.0, 7.0] and B.sum(a) == 15.0
    assert B.sum(a, axis=(0, 1), keepdims=True).shape == (1, 1)
    assert B.sum(np.ones(3, dtype=np.float32)).dtype == np.float32
    assert B.sum(np.ones(3, dtype=np.int32)).dtype == np.int64  # the default integer
    assert B.sum(np.ones(3, dtype=np.int32), dtype=np.int16).dtype == np.int16
    a = np.arange(6.0).reshape(1, 2, 3)
    np.testing.assert_array_equal(B.matrix_transpose(a), [[[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]])
    with pytest.raises(ValueError):
        B.matrix_transpose(np.ones(3))  # the standard's error for a 1-D input
    assert B.zeros_like(np.ones(2, dtype=np.float32), device="cpu").dtype == np.float32


@pytest.mark.parametrize("kind", ["fast", "generic-strict"])
@pytest.mark.parametrize(
    "kh, kw, oh, size, dilation", [(3, 3, 4, (6, 7), (1, 1)), (2, 3, 3, (5, 8), (2, 1))]
)
def test_col2im2d_rows_matches_hand_loop(kind, kh, kw, oh, size, dilation):
    (dh, dw), (h, w) = dilation, size
    ow = w - dw * (kw - 1)
    cols = np.random.default_rng(0).standard_normal((2, 3, kh, kw, oh, w))
    cols[..., ow:] = 0.0  # full-width rows: zero beyond the valid columns
    ref = np.zeros((2, 3, h, w))
    for i, j, y, x in np.ndindex(kh, kw, oh, ow):
        ref[..., y + i * dh, x + j * dw] += cols[..., i, j, y, x]
    if kind == "fast":
        out = numpy_fast.col2im2d_rows(np, cols, size, dilation)
    else:
        out = backends.resolve(strict).col2im2d_rows(strict.asarray(cols), size, dilation)
    np.testing.assert_allclose(host(out), ref, rtol=1e-14, atol=1e-14)


# -- index_add -------------------------------------------------------------------
def reference_index_add(x, indices, values, axis):
    """out[..., indices[j], ...] += values[..., j, ...], one element at a time, float64."""
    out = np.array(x, dtype=np.float64)
    vals = np.asarray(values, dtype=np.float64)
    axis = axis % out.ndim
    out = np.moveaxis(out, axis, 0)
    vals = np.moveaxis(vals, axis, 0)
    for j, i in enumerate(np.asarray(indices).reshape(-1)):
        for pos in np.ndindex(vals.shape[1:]):
            out[(int(i),) + pos] += vals[(j,) + pos]
    return np.moveaxis(out, 0, axis)


def _case(shape, axis, indices, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    vshape = list(shape)
    vshape[axis] = len(indices)
    values = rng.standard_normal(vshape).astype(dtype)
    return x, np.asarray(indices, dtype=np.int64), values


CASES = [
    pytest.param((5,), 0, [0, 2, 2, 4, 0, 0], id="1d-dups"),
    pytest.param((4, 3), 0, [3, 1, 3, 3], id="axis0"),
    pytest.param((4, 3), 1, [2, 0, 2, 2, 1], id="axis1"),
    pytest.param((2, 3, 4), -1, [1, 1, 3, 0, 1], id="axis-1"),
    pytest.param((2, 3, 4), 1, [2, 2, 2, 2], id="3d-axis1-all-same"),
    pytest.param((3, 2), 0, [], id="no-indices"),
]
TOL = {np.float32: dict(rtol=2e-6, atol=2e-6), np.float64: dict(rtol=1e-13, atol=1e-13)}


def run_kernel(kind, x, indices, values, axis):
    if kind == "fast":
        return numpy_fast.index_add(np, x, indices, values, axis=axis)
    if kind == "generic-numpy":
        return generic.index_add(array_api_compat.numpy, x, indices, values, axis=axis)
    dev = DEV1 if kind == "generic-strict-device1" else CPU
    out = generic.index_add(
        strict,
        strict.asarray(x, device=dev),
        strict.asarray(indices, device=dev),
        strict.asarray(values, device=dev),
        axis=axis,
    )
    assert not isinstance(out, np.ndarray) and out.device == dev
    return out


KINDS = ["fast", "generic-numpy", "generic-strict", "generic-strict-device1"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, axis, indices", CASES)
def test_index_add_matches_hand_loop(kind, dtype, shape, axis, indices):
    x, idx, values = _case(shape, axis, indices, dtype, seed=len(indices) + sum(shape))
    x_before = x.copy()
    out = host(run_kernel(kind, x, idx, values, axis))
    assert out.shape == x.shape and out.dtype == dtype
    np.testing.assert_allclose(out, reference_index_add(x, idx, values, axis), **TOL[dtype])
    np.testing.assert_array_equal(x, x_before)  # the input is not modified


@pytest.mark.parametrize("kind", KINDS)
def test_index_add_float32_keeps_small_sums_next_to_large_ones(kind):
    # Index 0 gets three values of size 1e6, index 2 gets 2000 values of 1e-3
    # (shuffled together), index 1 gets none. A float32 cumulative sum carries
    # 5e5 into index 2's segment, where an increment of 1e-3 is below half an ulp.
    rng = np.random.default_rng(3)
    idx = np.asarray([0, 0, 0] + [2] * 2000, dtype=np.int64)
    vals = np.asarray([1.0e6, -3.0e6, 2.5e6] + [1.0e-3] * 2000)
    perm = rng.permutation(idx.size)
    idx, vals = idx[perm], vals[perm].astype(np.float32)
    x = np.asarray([1.5, -2.0, 0.5], dtype=np.float32)
    ref = reference_index_add(x, idx, vals, 0)
    np.testing.assert_allclose(ref, [500001.5, -2.0, 2.5], rtol=1e-7)
    order = np.argsort(idx, kind="stable")
    naive = np.cumsum(np.concatenate([[0.0], vals[order]]).astype(np.float32), dtype=np.float32)
    ends = np.searchsorted(idx[order], np.arange(4), side="left")
    naive_sums = naive[ends[1:]] - naive[ends[:-1]]
    assert abs(naive_sums[2] - 2.0) > 0.5  # the case really defeats a float32 cumsum
    out = host(run_kernel(kind, x, idx, vals, 0))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=0)


# -- gradients on a non-default device ---------------------------------------------
S = ad.Autodiff(strict)
RNG = np.random.default_rng(7)
A = RNG.standard_normal((4, 3))
B = RNG.standard_normal((3, 2))
U42 = RNG.standard_normal((4, 2))
V5 = np.asarray([0.3, -1.2, 2.5, 0.7, -0.4])


def _take(x):
    idx = S.asarray([3, 0, 3, 1, 3], device=DEV1)
    w = S.asarray(V5, device=DEV1)
    return S.sum(S.take(x[:, 0], idx) * w)


def _take_ref(a):
    g = np.zeros_like(a)
    for j, i in enumerate([3, 0, 3, 1, 3]):
        g[i, 0] += V5[j]
    return g


ROWS, COLS, W4 = [2, 2, 0, 3, 2], [1, 1, 0, 2, 0], [0.5, -2.0, 1.5, 3.0, 0.25]


def _getitem(x):
    rows, cols = S.asarray(ROWS, device=DEV1), S.asarray(COLS, device=DEV1)
    return S.sum(x[rows, cols] * S.asarray(W4, device=DEV1))


def _getitem_ref(a):
    g = np.zeros_like(a)
    for r, c, w in zip(ROWS, COLS, W4):
        g[r, c] += w
    return g


def _where(x):
    cond = S.asarray(A > 0, device=DEV1)
    return S.sum(S.where(cond, x * x, 3.0 * x))


def _sort(x):
    w = S.asarray(np.arange(1.0, 13.0).reshape(4, 3), device=DEV1)
    return S.sum(S.sort(x, axis=0) * w)


def _sort_ref(a):
    w = np.arange(1.0, 13.0).reshape(4, 3)
    g = np.zeros_like(a)
    order = np.argsort(a, axis=0)
    for k in range(4):
        for c in range(3):
            g[order[k, c], c] = w[k, c]
    return g


DEVICE_CASES = [
    pytest.param(_take, _take_ref, id="take"),
    pytest.param(_getitem, _getitem_ref, id="getitem-int-array"),
    pytest.param(lambda x: S.sum(x * x), lambda a: 2 * a, id="sum"),
    pytest.param(
        lambda x: S.sum((x @ S.asarray(B, device=DEV1)) * S.asarray(U42, device=DEV1)),
        lambda a: U42 @ B.T,
        id="matmul",
    ),
    pytest.param(_where, lambda a: np.where(A > 0, 2 * a, 3.0), id="where"),
    pytest.param(_sort, _sort_ref, id="sort"),
]


@pytest.mark.parametrize("f, ref", DEVICE_CASES)
def test_gradients_stay_on_device1_and_are_correct(f, ref):
    x = S.asarray(A, device=DEV1, requires_grad=True)
    loss = f(x)
    assert loss.device == DEV1
    loss.backward()
    assert x.grad.device == DEV1 and x.grad.dtype == S.float64 and x.grad.shape == (4, 3)
    np.testing.assert_allclose(host(x.grad), ref(A), rtol=1e-12, atol=1e-12)


def test_matmul_gradient_of_right_operand_on_device1():
    a = S.asarray(A, device=DEV1)
    b = S.asarray(B, device=DEV1, requires_grad=True)
    S.sum((a @ b) * S.asarray(U42, device=DEV1)).backward()
    assert b.grad.device == DEV1
    np.testing.assert_allclose(host(b.grad), A.T @ U42, rtol=1e-12)


# -- errors -------------------------------------------------------------------------
def _ones(M, shape, dtype=None):
    return M.ones(shape, dtype=dtype if dtype is not None else M.float64)


ERRORS = [
    ("matmul", lambda M: M.matmul(_ones(M, (2, 3)), _ones(M, (2, 3)))),
    ("add", lambda M: M.add(_ones(M, (2, 3)), _ones(M, (4,)))),
    ("multiply", lambda M: M.multiply(_ones(M, (2, 3)), _ones(M, (3, 2)))),
    ("reshape", lambda M: M.reshape(_ones(M, (2, 3)), (5,))),
    ("concat", lambda M: M.concat([_ones(M, (2, 3)), _ones(M, (2, 4))], axis=0)),
    ("where", lambda M: M.where(M.ones((2,), dtype=M.bool), _ones(M, (3,)), _ones(M, (3,)))),
    ("permute_dims", lambda M: M.permute_dims(_ones(M, (2, 3)), (0,))),
    ("take", lambda M: M.take(_ones(M, (3,)), M.asarray([0.0]))),
    ("bitwise_and", lambda M: M.bitwise_and(_ones(M, (3,)), _ones(M, (3,)))),
    ("linalg.inv", lambda M: M.linalg.inv(_ones(M, (2, 3)))),
    ("sum", lambda M: M.sum(_ones(M, (3,)), axis=2)),
    ("sort", lambda M: M.sort(_ones(M, (3,)), axis=3)),
]
STRICT_ONLY_ERRORS = [
    ("add", lambda M: M.add(_ones(M, (3,)), M.ones((3,), dtype=M.int64))),
    ("sin", lambda M: M.sin(M.ones((3,), dtype=M.int64))),
    ("multiply", lambda M: M.multiply(_ones(M, (2,)), M.ones((2,), dtype=M.bool))),
    (
        "where",
        lambda M: M.where(M.ones((2,), dtype=M.bool), _ones(M, (2,)), M.ones((2,), dtype=M.int64)),
    ),
]


class _RequiresGrad:
    """A namespace whose float64 ``ones`` require grad (the recording path)."""

    def __init__(self, ns):
        self._ns = ns

    def __getattr__(self, name):
        return getattr(self._ns, name)

    def ones(self, shape, dtype=None):
        rg = dtype is None or dtype == self._ns.float64
        return self._ns.ones(shape, dtype=dtype, requires_grad=rg)


def _check_error(raw_ns, wrapped, name, call):
    with pytest.raises(Exception) as raw:  # noqa: B017 - any error, compared below
        call(raw_ns)
    for ns in (wrapped, _RequiresGrad(wrapped)):
        with pytest.raises(Exception) as ours:  # noqa: B017
            call(ns)
        assert type(ours.value) is type(raw.value), (name, ours.value, raw.value)
        assert name in str(ours.value), str(ours.value)


@pytest.mark.parametrize("lib", ["numpy", "strict"])
@pytest.mark.parametrize("name, call", ERRORS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(ERRORS)])
def test_errors_keep_backend_type_and_name_the_op(lib, name, call):
    raw_ns = array_api_compat.numpy if lib == "numpy" else strict
    _check_error(raw_ns, ad.Autodiff(np if lib == "numpy" else strict), name, call)


@pytest.mark.parametrize("name, call", STRICT_ONLY_ERRORS, ids=[n for n, _ in STRICT_ONLY_ERRORS])
def test_strict_dtype_errors_keep_backend_type_and_name_the_op(name, call):
    _check_error(strict, S, name, call)


@pytest.mark.parametrize("rg", [False, True])
@pytest.mark.parametrize(
    "name, call",
    [
        ("add", lambda a, b: a + b),
        ("multiply", lambda a, b: S.multiply(a, b)),
        ("matmul", lambda a, b: S.matmul(S.reshape(a, (1, 2)), S.reshape(b, (2, 1)))),
        ("where", lambda a, b: S.where(a > 0, a, b)),
    ],
)
def test_mixing_devices_on_strict_raises_backends_error(rg, name, call):
    a_raw = strict.asarray([1.0, 2.0], device=DEV1)
    b_raw = strict.asarray([3.0, 4.0], device=CPU)
    with pytest.raises(Exception) as raw:  # noqa: B017
        a_raw + b_raw
    a = S.asarray([1.0, 2.0], device=DEV1, requires_grad=rg)
    b = S.asarray([3.0, 4.0], device=CPU)
    with pytest.raises(type(raw.value)) as ours:
        call(a, b)
    assert type(ours.value) is type(raw.value)
    assert "device" in str(ours.value) and name in str(ours.value)
