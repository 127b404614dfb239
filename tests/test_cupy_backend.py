"""The CuPy backend: lazy import, dispatch to ``backends.cupy_fast``, its kernels against
NumPy's fast paths (on the CPU through a NumPy stand-in for cupy), the range checks that
read the host only on CPU backends; and, marked ``gpu``, the same on real CuPy."""

import subprocess
import sys
import types

import array_api_compat
import array_api_compat.numpy
import numpy as np
import pytest
from autodiff.backends import generic, numpy_fast

import autodiff as ad
from autodiff import backends
from autodiff.nn import functional as F

from .cupy_support import fake_cupy_fast, need_cupy

strict = pytest.importorskip("array_api_strict")


@pytest.fixture
def fast(monkeypatch):
    """``backends.cupy_fast`` on a NumPy stand-in for cupy."""
    yield from fake_cupy_fast(monkeypatch)


WINDOWS = [  # (shape, kernel, stride, dilation)
    ((2, 3, 7, 6), (3, 3), (1, 1), (1, 1)),
    ((1, 2, 9, 8), (3, 2), (2, 3), (1, 1)),
    ((2, 1, 10, 9), (2, 3), (2, 1), (2, 3)),
    ((5, 5), (1, 1), (1, 1), (1, 1)),
]


def _out(size, k, s, d):
    return tuple((n - (kk - 1) * dd - 1) // ss + 1 for n, kk, ss, dd in zip(size, k, s, d))


# -- lazy import and the dispatch table ----------------------------------------------
def test_importing_the_packages_imports_no_cupy():
    code = "import autodiff, gradcheck, sys; assert 'cupy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_fast_table_maps_cupy_to_its_module():
    assert backends._FAST["cupy"] == "cupy_fast"


def test_cupy_backend_binds_every_kernel_to_cupy_fast(fast):
    b = backends.Backend("cupy", array_api_compat.numpy)
    # persist (for lazy libraries) is the identity on an eager one: generic's is right;
    # embed, set_at and set_ are the out-of-place writes of immutable libraries, in pure
    # Array API (CuPy's rules write in place and don't call them)
    eager = {"persist", "embed", "set_at", "set_"}
    assert b.kernel_source == {n: "generic" if n in eager else "fast" for n in backends.KERNELS}
    assert not b.lazy
    for name in set(backends.KERNELS) - eager:
        assert getattr(b, name).func is getattr(fast, name)
    assert b.array_type is sys.modules["cupy"].ndarray
    assert b.scalar_types == ()
    assert b.host_checks is False
    assert not b.checks_on_host(np.zeros(3))


# -- the kernels, on NumPy arrays through the stand-in --------------------------------
@pytest.mark.parametrize(
    "shape, axis, indices",
    [((5,), 0, [0, 2, 2, 4, 0]), ((4, 3), 1, [2, 0, 2, 2, 1]), ((2, 3, 4), -1, [1, 1, 3])],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_index_add_matches_numpy(fast, shape, axis, indices, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    vshape = list(shape)
    vshape[axis] = len(indices)
    values = rng.standard_normal(vshape).astype(dtype)
    idx = np.asarray(indices)
    got = fast.index_add(np, x, idx, values, axis=axis)
    np.testing.assert_array_equal(got, numpy_fast.index_add(np, x, idx, values, axis=axis))
    assert got.dtype == x.dtype and fast.scatter_calls == [np.dtype(dtype).name]
    assert not np.shares_memory(got, x)


def test_index_add_without_atomic_add_takes_the_generic_path(fast):
    x, idx, v = np.arange(4), np.asarray([1, 1, 3]), np.asarray([5, 6, 7])
    got = fast.index_add(np, x, idx, v)
    np.testing.assert_array_equal(got, generic.index_add(np, x, idx, v))
    assert fast.scatter_calls == []  # int64 has no CUDA atomicAdd


def test_own_copies_views_only(fast):
    a = np.ones((3, 4))
    assert fast.own(np, a) is a
    for view in (a[1:], np.broadcast_to(np.ones(4), (3, 4)), a.T):
        got = fast.own(np, view)
        assert got.base is None and not np.shares_memory(got, a)
        np.testing.assert_array_equal(got, view)


@pytest.mark.parametrize("pads, value", [((1, 1, 1, 1), 0.0), ((0, 2, 3, 0), -np.inf)])
def test_pad2d_matches_numpy(fast, pads, value):
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 5))
    got = fast.pad2d(np, x, pads, value)
    width = ((0, 0), (0, 0), pads[:2], pads[2:])
    np.testing.assert_array_equal(got, np.pad(x, width, constant_values=value))


@pytest.mark.parametrize("shape, kernel, stride, dilation", WINDOWS)
def test_windows_and_col2im_match_numpy_and_are_adjoint(fast, shape, kernel, stride, dilation):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape)
    out = _out(shape[-2:], kernel, stride, dilation)
    got = fast.windows2d(np, x, kernel, stride, dilation, out)
    want = numpy_fast.windows2d(np, x, kernel, stride, dilation, out)
    assert got.shape == tuple(shape[:-2]) + kernel + out
    np.testing.assert_array_equal(got, want)
    assert np.shares_memory(got, x)  # a strided view, no copy
    cols = rng.standard_normal(got.shape)
    back = fast.col2im2d(np, cols, shape[-2:], stride, dilation)
    np.testing.assert_allclose(back, numpy_fast.col2im2d(np, cols, shape[-2:], stride, dilation),
                               rtol=1e-12, atol=1e-12)  # fmt: skip
    # <windows(x), cols> == <x, col2im(cols)>: col2im is the adjoint
    np.testing.assert_allclose(np.sum(got * cols), np.sum(x * back), rtol=1e-10)


def test_matmul_stack_matches_numpy(fast):
    rng = np.random.default_rng(4)
    pairs = [
        (rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((2, 3, 5, 2))) for _ in range(3)
    ]
    got = fast.matmul_stack(np, pairs, 2, (0, 2, 1, 3))
    want = np.stack([np.transpose(a @ b, (0, 2, 1, 3)) for a, b in pairs], axis=2)
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_windows_of_a_strided_input(fast):
    x = np.random.default_rng(3).standard_normal((3, 2, 12, 10))[:, :, ::2, 1:]
    args = ((3, 3), (1, 2), (1, 1), _out(x.shape[-2:], (3, 3), (1, 2), (1, 1)))
    np.testing.assert_array_equal(fast.windows2d(np, x, *args),
                                  numpy_fast.windows2d(np, x, *args))  # fmt: skip


def test_bernoulli_is_seeded_and_has_the_keep_rate(fast):
    a = fast.bernoulli(np, (200, 50), 0.7, seed=5)
    b = fast.bernoulli(np, (200, 50), 0.7, seed=5)
    assert a.shape == (200, 50) and a.dtype == np.float64
    assert set(np.unique(a)) <= {0.0, 1.0}
    np.testing.assert_array_equal(a, b)
    assert abs(a.mean() - 0.7) < 0.03
    c = fast.bernoulli(np, (200, 50), 0.7)
    d = fast.bernoulli(np, (200, 50), 0.7)
    assert not np.array_equal(c, d)  # unseeded calls draw new masks


# -- range checks: on the host for CPU backends only ---------------------------------
def _strict_on(device):
    xp = ad.Autodiff(strict)
    return lambda a, dtype=None: xp.asarray(a, dtype=dtype, device=strict.Device(device))


@pytest.mark.parametrize("make", ["numpy", "CPU_DEVICE", "device1"])
def test_range_checks_raise_on_cpu_backends(make):
    if make == "numpy":
        xp = ad.Autodiff(np)
        arr = lambda a, dtype=None: xp.asarray(a, dtype=dtype)
    else:
        arr = _strict_on(make)
        xp = ad.Autodiff(strict)
    logits = arr(np.zeros((2, 3)), dtype=xp.float64)
    with pytest.raises(IndexError, match="target out of range"):
        F.cross_entropy(logits, arr(np.asarray([0, 3])))
    weight = arr(np.zeros((4, 2)), dtype=xp.float64)
    with pytest.raises(IndexError, match="index out of range"):
        F.embedding(arr(np.asarray([1, 4])), weight)


def test_host_checks_by_backend_and_device():
    torch = pytest.importorskip("torch")
    compat_torch = pytest.importorskip("array_api_compat.torch")

    assert backends.resolve(np).host_checks and backends.resolve(strict).host_checks
    t = backends.resolve(compat_torch)
    assert t.host_checks and t.checks_on_host(torch.zeros(2))
    on_gpu = types.SimpleNamespace(device=torch.device("cuda", 0))
    assert not t.checks_on_host(on_gpu)  # decided per array: torch on CUDA doesn't sync


def test_range_checks_are_skipped_where_the_host_is_not_read(monkeypatch):
    b, xp = backends.resolve(np), ad.Autodiff(np)
    monkeypatch.setattr(b, "host_checks", False)  # as on cupy
    asked, read = [], []
    real = backends.Backend.checks_on_host
    monkeypatch.setattr(b, "checks_on_host", lambda x: asked.append(1) or real(b, x))
    monkeypatch.setattr(b, "any", lambda *a, **k: read.append("B.any"))
    monkeypatch.setattr(xp, "any", lambda *a, **k: read.append("xp.any"))
    weight = xp.asarray(np.zeros((4, 2)))
    F.embedding(xp.asarray(np.asarray([1, 3])), weight)
    F.cross_entropy(xp.asarray(np.zeros((2, 3))), xp.asarray(np.asarray([0, 2])))
    assert asked == [1, 1] and read == []


# -- on a GPU -------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_dispatch_and_namespaces():
    cp = need_cupy()
    b = backends.resolve(cp)
    assert b.key == "cupy" and b.kernel_source == {k: "fast" for k in backends.KERNELS}
    import array_api_compat.cupy as compat_cupy

    assert ad.Autodiff(cp) is ad.Autodiff(compat_cupy)
    assert b.host_checks is False


@pytest.mark.gpu
@pytest.mark.parametrize("shape, kernel, stride, dilation", WINDOWS)
def test_gpu_kernels_match_numpy(shape, kernel, stride, dilation):
    cp = need_cupy()
    from autodiff.backends import cupy_fast

    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape)
    out = _out(shape[-2:], kernel, stride, dilation)
    dx = cp.asarray(x)
    w = cupy_fast.windows2d(cp, dx, kernel, stride, dilation, out)
    np.testing.assert_array_equal(w.get(), numpy_fast.windows2d(np, x, kernel, stride, dilation,
                                                                out))  # fmt: skip
    cols = rng.standard_normal(w.shape)
    back = cupy_fast.col2im2d(cp, cp.asarray(cols), shape[-2:], stride, dilation)
    np.testing.assert_allclose(back.get(), numpy_fast.col2im2d(np, cols, shape[-2:], stride,
                                                               dilation), rtol=1e-12)  # fmt: skip
    pads = (1, 2, 0, 1)
    want = np.pad(x, ((0, 0), (0, 0), (1, 2), (0, 1)), constant_values=-1.0)
    np.testing.assert_array_equal(cupy_fast.pad2d(cp, dx, pads, -1.0).get(), want)
    idx = np.asarray([0, 1, 1, 0])
    v = rng.standard_normal(shape[:-1] + (4,))
    got = cupy_fast.index_add(cp, dx, cp.asarray(idx), cp.asarray(v), axis=-1)
    np.testing.assert_allclose(got.get(), numpy_fast.index_add(np, x, idx, v, axis=-1),
                               rtol=1e-12)  # fmt: skip
    mask = cupy_fast.bernoulli(cp, (64, 64), 0.5, seed=0)
    assert isinstance(mask, cp.ndarray)
    assert cp.array_equal(mask, cupy_fast.bernoulli(cp, (64, 64), 0.5, seed=0))


@pytest.mark.gpu
def test_gpu_conv2d_gradients_match_numpy():
    cp = need_cupy()
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((2, 3, 9, 8)), rng.standard_normal((4, 3, 3, 3))
    grads = {}
    for lib in (np, cp):
        xp = ad.Autodiff(lib)
        X, W = xp.asarray(x, requires_grad=True), xp.asarray(w, requires_grad=True)
        y = F.max_pool2d(F.conv2d(X, W, stride=(1, 2), padding=1), 2)
        xp.sum(y * y).backward()
        grads[lib.__name__] = [ad.io.to_host(t.grad) for t in (X, W)]
    for a, b in zip(grads["numpy"], grads["cupy"]):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-10)
