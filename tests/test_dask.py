"""Dask as a backend (through array-api-compat): values and gradients against NumPy,
and laziness: nothing computes until the user asks (``float``, ``item``, ``bool``,
``repr``)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import autodiff as ad

dask = pytest.importorskip("dask", reason="the dask backend needs dask")
da_compat = pytest.importorskip("array_api_compat.dask.array", reason="needs array-api-compat")
import dask.array as da  # noqa: E402

F = ad.nn.functional
xp = ad.Autodiff(da_compat)
npx = ad.Autodiff(np)


@contextlib.contextmanager
def computes():
    """Count the graphs dask computes inside the block (``calls[0]``)."""
    calls = [0]

    def counting_get(dsk, keys, **kwargs):
        calls[0] += 1
        return dask.get(dsk, keys, **kwargs)

    with dask.config.set(scheduler=counting_get):
        yield calls


def host(t):
    """The values of a Tensor or dask array, as NumPy (one compute)."""
    return np.asarray(dask.compute(getattr(t, "data", t))[0])


rng = np.random.default_rng(0)


def _grad(f, a):
    x = xp.asarray(a, requires_grad=True)
    f(x).backward()
    return host(x.grad)


# -- the defects of the issue: each against NumPy's values ------------------------------
def test_slicing_take_and_relu_have_gradients():
    a = rng.standard_normal((4, 5))
    g = _grad(lambda x: xp.sum(x[1:, ::2] ** 2), a)
    want = np.zeros_like(a)
    want[1:, ::2] = 2 * a[1:, ::2]
    np.testing.assert_allclose(g, want, rtol=1e-12)
    g = _grad(lambda x: xp.sum(xp.take(x, xp.asarray([0, 2, 2]), axis=0) * 3.0), a)
    np.testing.assert_allclose(g, np.array([3, 0, 6, 0])[:, None] * np.ones((4, 5)))
    g = _grad(lambda x: xp.sum(F.relu(x)), a)
    np.testing.assert_array_equal(g, (a > 0).astype(float))


def test_sort_rule_has_take_along_axis():
    a = rng.standard_normal((3, 6))
    w = np.arange(6.0)
    g = _grad(lambda x: xp.sum(xp.sort(x, axis=1) * xp.asarray(w)), a)
    want = np.zeros_like(a)
    np.put_along_axis(want, np.argsort(a, axis=1), w[None, :], axis=1)
    np.testing.assert_allclose(g, want, rtol=1e-12)


def test_take_along_axis_broadcasts_as_numpy():
    a = rng.standard_normal((2, 3, 5))
    idx = np.array([[[4, 0, -1]]])
    got = host(xp.take_along_axis(xp.asarray(a), xp.asarray(idx), axis=-1))
    np.testing.assert_array_equal(got, np.take_along_axis(a, np.broadcast_to(idx, (2, 3, 3)), -1))


def test_boolean_mask_gradient_with_unknown_chunk_sizes():
    a = rng.standard_normal((4, 5))
    w = rng.standard_normal((4, 5))
    mask = a > 0
    x = xp.asarray(a, requires_grad=True)
    m = x > 0.0
    y = x[m] @ xp.asarray(w)[m]  # a vector of unknown (NaN) size
    assert np.isnan(x[m].shape[0])
    y.backward()
    np.testing.assert_allclose(host(x.grad), np.where(mask, w, 0.0), rtol=1e-12)
    np.testing.assert_allclose(float(y), a[mask] @ w[mask], rtol=1e-12)


MASKED = {
    "rows": lambda ns, x: ns.sum(x[x[:, 0] > 0.0] ** 2),
    "rows, ...": lambda ns, x: ns.sum(ns.sin(x[x[:, 0] > 0.0, ...])),
    "rows broadcast": lambda ns, x: ns.sum(x[x[:, 0] > 0.0] ** 2 * x[0]),
    "rows mean": lambda ns, x: ns.sum(ns.mean(x[x[:, 0] > 0.0], axis=0) ** 2),
    "mask of a computed array": lambda ns, x: ns.sum((x * x)[x[:, 1] < 0.5] * x[0]),
}


@pytest.mark.parametrize("name", sorted(MASKED))
@pytest.mark.parametrize("chunks", [None, 2])
def test_mask_over_leading_axes_gradient(name, chunks):
    """A mask over the leading axes leaves whole rows of unknown number (dask's NaN
    first axis): the gradient is scattered along that axis without reshaping it;
    NumPy's values (float64)."""
    a = np.array([[0.5, -1.0, 0.75, 2.0, 0.1], [-0.3, 0.8, -0.4, -1.5, 0.2],
                  [0.6, 0.2, 0.9, 1.1, -0.7], [0.4, -0.2, 0.3, 0.5, 0.9]])  # fmt: skip
    f = MASKED[name]
    x = xp.asarray(a if chunks is None else da.from_array(a, chunks=chunks), requires_grad=True)
    f(xp, x).backward()
    want = npx.asarray(a, requires_grad=True)
    f(npx, want).backward()
    np.testing.assert_allclose(host(x.grad), want.grad.data, rtol=1e-12, atol=1e-15)


def test_reduction_of_a_boolean_mask():
    a = rng.standard_normal((4, 5))
    np.testing.assert_allclose(_grad(lambda x: xp.sum(x[x > 0.0]), a), (a > 0) * 1.0)


def test_statistics_of_a_boolean_mask_count_lazily():
    """mean, var and std of a masked pick (a size unknown until computed): the count is
    taken lazily, not NaN (hand-derived gradients)."""
    a = rng.standard_normal((4, 5))
    v, n, m = a[a > 0], int((a > 0).sum()), a > 0
    cases = {
        "mean": (xp.mean, np.where(m, 1 / n, 0.0)),
        "var": (xp.var, np.where(m, 2 * (a - v.mean()) / n, 0.0)),
        "std": (xp.std, np.where(m, (a - v.mean()) / (n * v.std()), 0.0)),
    }
    for name, (f, ref) in cases.items():
        got = _grad(lambda x, f=f: f(x[x > 0.0]), a)
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-15, err_msg=name)


def _spd(n, batch=()):
    b = rng.standard_normal(batch + (n, n))
    return b @ np.swapaxes(b, -1, -2) + n * np.eye(n)


def test_linalg_values_match_numpy():
    a = _spd(4, (2,))
    s = rng.standard_normal((2, 4, 4))
    X, S = xp.asarray(a), xp.asarray(s)
    np.testing.assert_allclose(host(xp.linalg.det(S)), np.linalg.det(s), rtol=1e-12)
    sign, log = xp.linalg.slogdet(S)
    np.testing.assert_allclose(host(sign), np.linalg.slogdet(s)[0])
    np.testing.assert_allclose(host(log), np.linalg.slogdet(s)[1], rtol=1e-12)
    w, v = xp.linalg.eigh(X)
    nw, nv = np.linalg.eigh(a)
    np.testing.assert_allclose(host(w), nw, rtol=1e-12)
    np.testing.assert_allclose(np.abs(host(v)), np.abs(nv), atol=1e-12)
    np.testing.assert_allclose(host(xp.linalg.eigvalsh(X)), nw, rtol=1e-12)
    # array-api-compat's dask cholesky gives the upper factor: ours is the standard's
    np.testing.assert_allclose(host(xp.linalg.cholesky(X)), np.linalg.cholesky(a), rtol=1e-12)
    upper = host(xp.linalg.cholesky(X, upper=True))
    np.testing.assert_allclose(upper, np.swapaxes(np.linalg.cholesky(a), -1, -2), rtol=1e-12)
    np.testing.assert_allclose(host(xp.linalg.pinv(S[:, :, :3])), np.linalg.pinv(s[:, :, :3]))
    for n in (0, 1, 3, -2):
        got = host(xp.linalg.matrix_power(S, n))
        np.testing.assert_allclose(got, np.linalg.matrix_power(s, n), rtol=1e-10, atol=1e-12)
    u, t = rng.standard_normal((2, 5, 3))
    got = host(xp.linalg.cross(xp.asarray(u), xp.asarray(t)))
    np.testing.assert_allclose(got, np.cross(u, t), rtol=1e-12)
    w, v = xp.linalg.eig(S)
    np.testing.assert_allclose(np.sort_complex(host(w)), np.sort_complex(np.linalg.eigvals(s)))


def test_linalg_gradients_match_the_formulas():
    s = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    inv_t = np.linalg.inv(s).T
    np.testing.assert_allclose(_grad(xp.linalg.det, s), np.linalg.det(s) * inv_t, rtol=1e-10)
    np.testing.assert_allclose(_grad(lambda x: xp.linalg.slogdet(x)[1], s), inv_t, rtol=1e-10)
    a = _spd(3)
    c = np.array([1.0, -2.0, 0.5])
    _, v = np.linalg.eigh(a)
    g = _grad(lambda x: xp.sum(xp.linalg.eigh(x)[0] * xp.asarray(c)), a)
    np.testing.assert_allclose(g, v @ np.diag(c) @ v.T, atol=1e-10)
    # d sum(L) / dA, the lower factor's rule, against central differences in NumPy
    g = _grad(lambda x: xp.sum(xp.linalg.cholesky(x)), a)
    eps, num = 1e-6, np.zeros_like(a)
    for i in range(3):
        for j in range(3):
            d = np.zeros_like(a)
            d[i, j] = d[j, i] = eps  # a symmetric direction: cholesky reads one triangle
            f = lambda m: np.linalg.cholesky(m).sum()  # noqa: E731
            num[i, j] = (f(a + d) - f(a - d)) / (2 * eps) / (1 if i == j else 2)
    np.testing.assert_allclose((g + g.T) / 2, num, atol=1e-6)


def test_linalg_needs_each_matrix_in_one_chunk():
    x = da.from_array(_spd(4), chunks=2)
    with pytest.raises(ValueError, match=r"linalg.det: .*one chunk.*rechunk"):
        xp.linalg.det(xp.asarray(x))


def test_cross_entropy_computes_nothing():
    a = rng.standard_normal((5, 4))
    t = np.array([0, 3, 1, 1, 2])
    logits = xp.asarray(a, requires_grad=True)
    with computes() as calls:
        loss = F.cross_entropy(logits, xp.asarray(t))
        loss.backward()
    assert calls[0] == 0
    p = np.exp(a - a.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(float(loss), -np.log(p[range(5), t]).mean(), rtol=1e-12)
    np.testing.assert_allclose(host(logits.grad), (p - np.eye(4)[t]) / 5, rtol=1e-12)


def test_embedding_computes_nothing():
    t = np.array([0, 3, 1, 1, 2])
    emb = ad.nn.Embedding(6, 3)
    emb.to(xp)
    with computes() as calls:
        out = emb(xp.asarray(t))
        xp.sum(out * 2.0).backward()
    assert calls[0] == 0
    np.testing.assert_allclose(
        host(emb.weight.grad), 2.0 * np.bincount(t, minlength=6)[:, None] * np.ones((6, 3))
    )


# -- nothing computes until asked ---------------------------------------------------------
class _Net(ad.nn.Module):
    def __init__(self, embedding):
        super().__init__()
        # without the embedding, tokens are one-hot rows through a linear layer
        # float64: dask's sums may run in another order than NumPy's, which float32
        # would show at 1e-7 (the comparison below is at 1e-12)
        f64 = {"dtype": np.float64}
        self.emb = (ad.nn.Embedding(7, 4, **f64) if embedding
                    else ad.nn.Linear(7, 4, bias=False, **f64))  # fmt: skip
        self.fc1 = ad.nn.Linear(4, 8, **f64)
        self.fc2 = ad.nn.Linear(8, 3, **f64)

    def forward(self, tokens):
        if isinstance(self.emb, ad.nn.Linear):
            tokens = F.one_hot(tokens, num_classes=7)
            ns = ad.engine.namespace.recorder_of(tokens).namespace
            tokens = ns.astype(tokens, self.emb.weight.dtype)
        h = F.relu(self.fc1(self.emb(tokens)))
        return self.fc2(h[:, 1:, :])  # slicing: (batch, seq - 1, classes)


def _net_loss(ns, net, tokens, labels):
    logits = net(tokens)
    loss = F.cross_entropy(ns.reshape(logits, (-1, 3)), ns.reshape(labels, (-1,)))
    h = ns.reshape(logits, (-1,))
    keep = h > 0.0
    return loss + 0.01 * (h[keep] @ h[keep])  # a boolean mask (a vector of unknown size)


def _nets(embedding):
    ad.nn.init.manual_seed(0)
    ref = _Net(embedding)
    lazy = _Net(embedding)
    lazy.load_state_dict(ref.state_dict())
    lazy.to(xp)
    return ref, lazy


NETS = [
    pytest.param(True, id="embedding"),
    pytest.param(False, id="one-hot"),
]


@pytest.mark.parametrize("embedding", NETS)
def test_mlp_forward_and_backward_compute_nothing_until_asked(embedding):
    ref, lazy = _nets(embedding)
    tokens = rng.integers(0, 7, (2, 5))
    labels = rng.integers(0, 3, (2, 4))
    with computes() as calls:
        loss = _net_loss(xp, lazy, xp.asarray(tokens), xp.asarray(labels))
        loss.backward()
        grads = [p.grad for p in lazy.parameters()]
    assert calls[0] == 0
    with computes() as calls:
        values = dask.compute(loss.data, *[g.data for g in grads])
    assert calls[0] == 1
    want = _net_loss(npx, ref, npx.asarray(tokens), npx.asarray(labels))
    want.backward()
    np.testing.assert_allclose(values[0], float(want), rtol=1e-12)
    for got, p in zip(values[1:], ref.parameters()):
        np.testing.assert_allclose(got, p.grad.data, rtol=1e-12, atol=1e-12)
    # the four places that compute, each once
    for ask in (float, lambda t: t.item(), lambda t: bool(t > 0.0), repr):
        with computes() as calls:
            ask(loss)
        assert calls[0] == 1


@pytest.mark.parametrize("embedding", NETS)
def test_mlp_trains_with_sgd_as_on_numpy(embedding):
    ref, lazy = _nets(embedding)
    tokens = rng.integers(0, 7, (2, 5))
    labels = rng.integers(0, 3, (2, 4))
    losses = {}
    for name, ns, net in (("numpy", npx, ref), ("dask", xp, lazy)):
        opt = ad.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        losses[name] = []
        for _ in range(4):
            opt.zero_grad()
            loss = _net_loss(ns, net, ns.asarray(tokens), ns.asarray(labels))
            loss.backward()
            opt.step()
            losses[name].append(float(loss))
    np.testing.assert_allclose(losses["dask"], losses["numpy"], rtol=1e-10)
    assert losses["numpy"][-1] < losses["numpy"][0]


def test_persist_computes_and_keeps_the_values():
    B = ad.engine.namespace.recorder_of(xp.asarray(0.0)).backend
    a = da.from_array(np.arange(6.0), chunks=3) * 2 + 1
    with computes() as calls:
        out = B.persist([a, a - 1])
    assert calls[0] == 1 and isinstance(out, list)
    assert all(len(o.dask) == o.npartitions for o in out)  # no graph left behind
    np.testing.assert_array_equal(host(out[1]), np.arange(6.0) * 2)


def test_index_add_takes_unknown_sizes_and_keeps_the_chunks():
    B = ad.engine.namespace.recorder_of(xp.asarray(0.0)).backend
    x = da.from_array(np.zeros((6, 2)), chunks=(2, 2))
    values = da.from_array(np.arange(10.0).reshape(5, 2), chunks=2)
    keep = da.from_array(np.array([True, False, True, True, True]), chunks=2)
    idx = da.from_array(np.array([0, 5, 0, 3, 5]), chunks=2)
    out = B.index_add(x, idx[keep], values[keep], axis=0)
    assert out.chunks == x.chunks
    want = np.zeros((6, 2))
    np.add.at(want, np.array([0, 0, 3, 5]), np.arange(10.0).reshape(5, 2)[[0, 2, 3, 4]])
    np.testing.assert_array_equal(host(out), want)


# -- the whole registry ------------------------------------------------------------------
# What dask can't run, by (op, sample): outputs whose shape depends on the values, and
# dask's own gaps (nd fancy indexing).
UNSUPPORTED = {
    ("__getitem__", "boolean mask"),
    ("__getitem__", "repeated integer arrays"),
    ("repeat", "array repeats"),
    ("unique_all", "values"),
    ("unique_counts", "values"),
    ("unique_inverse", "values"),
    ("unique_values", "2-D"),
}


@pytest.mark.parametrize("rule", ["vjp", "jvp"])
def test_the_whole_registry_passes_on_dask(rule):
    # first order, VJPs by random projections: the full Jacobians and the second order
    # take ~10x longer on dask (each evaluation builds and computes a new graph); the
    # CLI runs those: gradcheck --backend dask
    from gradcheck.cli import run

    records = list(run("dask", order=1, mode="fast", rules=(rule,)))
    bad = [r for r in records if r["status"] not in ("ok", "nondiff", "unsupported", "real only")]
    assert not bad, bad[:5]
    unsupported = {(r["op"], r["sample"]) for r in records if r["status"] == "unsupported"}
    assert unsupported == UNSUPPORTED
    assert sum(r["status"] == "ok" for r in records) > 650


def test_second_order_on_dask():
    # a few ops whose second-order graphs fan out (gradients accumulate): a sum made in
    # place (``+=``) is a new array on dask, and a lost one showed only at second order
    from gradcheck.cli import run

    ops = ["pow", "nn.hardswish", "nn.normalize", "linalg.slogdet"]
    records = list(run("dask", ops=ops, order=2, mode="fast"))
    assert [r for r in records if r["status"] not in ("ok", "nondiff")] == []
    assert {r["order"] for r in records} == {1, 2}


def test_cli_takes_dask_as_a_backend_name(capsys):
    from gradcheck import cli

    assert cli.main(["--backend", "dask", "--op", "linalg.det", "--order", "1", "-q"]) == 0
    assert "on dask" in capsys.readouterr().out
