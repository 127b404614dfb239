"""The out-of-core example's gradient on chunked Dask arrays against NumPy's and the
closed form, without a cluster (the notebook run trains on one); and the gradients
of a matmul with one constant operand (only the wanted one is made)."""

from __future__ import annotations

import pathlib
import runpy

import numpy as np
import pytest

import autodiff as ad

dask = pytest.importorskip("dask", reason="the example needs dask")
import array_api_compat.dask.array as dxp  # noqa: E402
import dask.array as da  # noqa: E402

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "out_of_core.py"


@pytest.fixture(scope="module")
def example():
    return runpy.run_path(str(EXAMPLE), run_name="out_of_core")  # main() not run


def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def test_example_gradient_on_chunks_equals_numpy_and_the_closed_form(example):
    X, y = example["dataset"](3, 400, 5, seed=1)  # 3 chunks of 400 samples
    assert X.chunks == ((400,) * 3, (5,))
    Xn, yn = dask.compute(X, y, scheduler="sync")
    params = {"w": np.linspace(-1.0, 1.0, 5), "b": np.asarray(0.25)}
    lazy = {k: da.from_array(v) for k, v in params.items()}
    value, grads = example["value_and_grad"](lazy, X, y)
    assert isinstance(grads["w"], da.Array)  # lazy until computed
    value, grads = dask.compute(value, grads, scheduler="sync")
    value_np, grads_np = example["value_and_grad"](params, Xn, yn)
    # d/dw mean(log(1 + e^z) - y z) = X^T (sigmoid(z) - y) / n, z = X w + b
    r = (_sigmoid(Xn @ params["w"] + params["b"]) - yn) / len(yn)
    z = Xn @ params["w"] + params["b"]
    assert float(value) == pytest.approx(np.mean(np.logaddexp(0, z) - yn * z), abs=1e-14)
    for got in (grads, grads_np):
        np.testing.assert_allclose(got["w"], Xn.T @ r, rtol=0, atol=1e-14)
        np.testing.assert_allclose(got["b"], r.sum(), rtol=0, atol=1e-14)
    np.testing.assert_allclose(grads["w"], grads_np["w"], rtol=0, atol=1e-15)


def test_example_chunks_are_seeded_per_chunk(example):
    a = example["chunk"](10, 3, seed=0, block_id=(1, 0))
    assert np.array_equal(a, example["chunk"](10, 3, seed=0, block_id=(1, 0)))
    assert not np.array_equal(a, example["chunk"](10, 3, seed=0, block_id=(2, 0)))
    assert set(np.unique(a[:, 3])) <= {0.0, 1.0}


@pytest.mark.parametrize("backend", ["numpy", "dask"])
def test_matmul_with_one_constant_operand(backend):
    rng = np.random.default_rng(0)
    A, B, v = rng.standard_normal((6, 4)), rng.standard_normal((4, 3)), rng.standard_normal(4)
    u = rng.standard_normal(6)
    wrap = (lambda a: da.from_array(a, chunks=2)) if backend == "dask" else (lambda a: a)
    xp = ad.Autodiff(dxp if backend == "dask" else np)
    const_a, const_b, const_v, const_u = map(wrap, (A, B, v, u))

    def value(g):
        return np.asarray(dask.compute(g)[0]) if backend == "dask" else np.asarray(g)

    # d sum(tanh(A @ W)) / dW = A^T (1 - tanh^2), and the like for each side
    d = 1 - np.tanh(A @ B) ** 2
    got = ad.grad(lambda W: xp.sum(xp.tanh(xp.matmul(const_a, W))))(wrap(B))
    np.testing.assert_allclose(value(got), A.T @ d, atol=1e-14)
    got = ad.grad(lambda M: xp.sum(xp.tanh(xp.matmul(M, const_b))))(wrap(A))
    np.testing.assert_allclose(value(got), d @ B.T, atol=1e-14)
    dv = 1 - np.tanh(A @ v) ** 2
    got = ad.grad(lambda w: xp.sum(xp.tanh(xp.matmul(const_a, w))))(wrap(v))
    np.testing.assert_allclose(value(got), A.T @ dv, atol=1e-14)
    got = ad.grad(lambda M: xp.sum(xp.tanh(xp.matmul(M, const_v))))(wrap(A))
    np.testing.assert_allclose(value(got), np.outer(dv, v), atol=1e-14)
    du = 1 - np.tanh(u @ A) ** 2
    got = ad.grad(lambda M: xp.sum(xp.tanh(xp.matmul(const_u, M))))(wrap(A))
    np.testing.assert_allclose(value(got), np.outer(u, du), atol=1e-14)
    got = ad.grad(lambda x: xp.sum(xp.tanh(xp.matmul(x, const_a))))(wrap(u))
    np.testing.assert_allclose(value(got), A @ du, atol=1e-14)
    got = ad.grad(lambda x: xp.tanh(xp.matmul(x, const_v)))(wrap(v))  # 1-D @ 1-D
    np.testing.assert_allclose(value(got), (1 - np.tanh(v @ v) ** 2) * v, atol=1e-14)
