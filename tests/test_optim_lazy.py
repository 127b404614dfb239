"""autodiff.optim on a lazy backend (dask): each step persists the parameters and the
optimizer state, so the task graph stays the same size step after step, nothing else
is computed, and the trajectory is NumPy's."""

import numpy as np
import pytest

import autodiff as ad
from autodiff import optim
from autodiff.engine.namespace import recorder_of

dask = pytest.importorskip("dask", reason="the lazy backend needs dask")
da = pytest.importorskip("array_api_compat.dask.array", reason="needs array-api-compat's dask")

# A dask step costs ~30 ms of graph building: 100 steps for AdamW (the lazy case of the
# issue), 10 for LBFGS (a step is a few evaluations), 25 for the others.
STEPS = {"AdamW": 100, "LBFGS": 10}
OPTIMIZERS = {
    "SGD": lambda p: optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
    "Adam": lambda p: optim.Adam(p, lr=0.05, amsgrad=True, weight_decay=1e-3),
    "AdamW": lambda p: optim.AdamW(p, lr=0.05, weight_decay=1e-2),
    "RMSprop": lambda p: optim.RMSprop(p, lr=0.01, momentum=0.5, centered=True),
    "Adagrad": lambda p: optim.Adagrad(p, lr=0.1, lr_decay=1e-3, weight_decay=1e-3),
    "Adamax": lambda p: optim.Adamax(p, lr=0.05),
    "NAdam": lambda p: optim.NAdam(p, lr=0.05, weight_decay=1e-2, decoupled_weight_decay=True),
    "RAdam": lambda p: optim.RAdam(p, lr=0.05),
    "LBFGS": lambda p: optim.LBFGS(p, lr=0.5, max_iter=2, history_size=4),
}


@pytest.fixture
def computes():
    """Count the computations dask runs (its synchronous scheduler, counted)."""
    count = []

    def scheduler(dsk, keys, **kwargs):
        count.append(1)
        return dask.get(dsk, keys, **kwargs)

    with dask.config.set(scheduler=scheduler):
        yield count


def _lazy_backend():
    B = recorder_of(ad.Autodiff(da).asarray(0.0)).backend
    if B.kernel_source["persist"] == "generic":
        pytest.skip("the dask backend has no persist kernel yet (backends/dask_fast.py)")


def _tasks(a) -> int:
    return len(a.__dask_graph__())


def _train(xp, make, steps, on_step=None):
    """A full-batch linear regression ``y ~ X @ w + b``: ``steps`` steps; returns
    (w, b, the optimizer)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((32, 4))
    y = X @ np.array([1.0, -2.0, 0.5, 3.0]) + 0.1 * rng.standard_normal(32)
    X, y = xp.asarray(X), xp.asarray(y)
    w = xp.asarray(np.zeros(4), requires_grad=True)
    b = xp.asarray(np.zeros(()), requires_grad=True)
    opt = make([w, b])

    def closure():
        opt.zero_grad()
        loss = xp.mean((X @ w + b - y) ** 2)
        loss.backward()
        return loss

    for _ in range(steps):
        if isinstance(opt, optim.LBFGS):
            opt.step(closure)
        else:
            closure()
            opt.step()
        if on_step is not None:
            on_step(w, b, opt)
    return w, b, opt


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_steps_persist_and_follow_numpy(name, computes):
    _lazy_backend()
    tasks = []  # per step: the tasks of w and b, and whether every array has one a chunk

    def on_step(w, b, opt):
        state = [v for s in opt.state.values() for v in s.values()]
        state += [a for v in state if isinstance(v, list) for a in v]  # LBFGS's history
        state = [v for v in state if hasattr(v, "__dask_graph__")]
        persisted = all(_tasks(a) == a.npartitions for a in state)
        tasks.append((_tasks(w.data), _tasks(b.data), persisted, len(state)))

    steps = STEPS.get(name, 25)
    w, b, opt = _train(ad.Autodiff(da), OPTIMIZERS[name], steps, on_step)
    run = len(computes)
    wn, bn, _ = _train(ad.Autodiff(np), OPTIMIZERS[name], steps)
    # One task a chunk, every step: the graph doesn't grow by a step's worth of tasks.
    assert all(t[:3] == (1, 1, True) and t[3] > 0 for t in tasks), tasks
    if name != "LBFGS":  # LBFGS reads the loss back by design; the others only persist
        assert run == steps
    np.testing.assert_allclose(np.asarray(w.data), wn.data, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(b.data), bn.data, rtol=1e-12, atol=1e-12)
    w_true = np.array([1.0, -2.0, 0.5, 3.0])
    assert np.linalg.norm(wn.data - w_true) < 0.9 * np.linalg.norm(w_true)  # it learns


def test_a_complex_parameter_persists_and_follows_numpy(computes):
    """A complex parameter steps as (real, imaginary) pairs: those state arrays persist too."""
    _lazy_backend()
    out = {}
    for lib in (np, da):
        xp = ad.Autodiff(lib)
        z = xp.asarray(np.array([1 + 2j, -0.5 + 0.1j]), requires_grad=True)
        opt = optim.Adam([z], lr=0.1, amsgrad=True)
        for _ in range(10):
            opt.zero_grad()
            xp.sum(xp.real(z * xp.conj(z))).backward()  # |z|^2: its gradient is 2z
            opt.step()
        if lib is da:
            state = [v for v in opt.state[z].values() if hasattr(v, "__dask_graph__")]
            arrays = [z.data] + state
            assert len(state) == 3  # exp_avg, exp_avg_sq, max_exp_avg_sq
            assert all(_tasks(a) == a.npartitions for a in arrays)
            assert len(computes) == 10
        out[lib] = np.asarray(z.data)
    np.testing.assert_allclose(out[da], out[np], rtol=1e-12, atol=1e-12)
    assert np.all(np.abs(out[np]) < np.abs(np.array([1 + 2j, -0.5 + 0.1j])))  # it descends


def test_clip_persists_the_gradients(computes):
    _lazy_backend()
    grads = {}
    for lib in (np, da):
        xp = ad.Autodiff(lib)
        w = xp.asarray(np.array([3.0, -4.0, 1.0]), requires_grad=True)
        v = xp.asarray(np.array([[0.5, 2.0]]), requires_grad=True)
        (xp.sum(w * w * w) + xp.sum(xp.exp(v))).backward()
        total = optim.clip_grad_norm_([w, v], 1.0)
        optim.clip_grad_value_([w, v], 0.2)
        grads[lib] = (float(total), np.asarray(w.grad.data), np.asarray(v.grad.data))
        if lib is da:
            # one persist per clip, then float(total) and the two reads above
            assert len(computes) == 2 + 1 + 2
            assert all(_tasks(t.data) == 1 for t in (total, w.grad, v.grad))
    (tn, wn, vn), (td, wd, vd) = grads[np], grads[da]
    g = np.array([27.0, 48.0, 3.0, np.exp(0.5), np.exp(2.0)])
    assert tn == pytest.approx(np.linalg.norm(g), rel=1e-14)
    assert td == pytest.approx(tn, rel=1e-14)
    np.testing.assert_allclose(wd, wn, rtol=1e-14)
    np.testing.assert_allclose(vd, vn, rtol=1e-14)
    clipped = np.minimum(g * (1.0 / (tn + 1e-6)), 0.2)  # coef = max_norm / (total + 1e-6)
    np.testing.assert_allclose(np.concatenate([wn, vn.ravel()]), clipped, rtol=1e-12)


def _bn_run(xp_mod, steps=30):
    """An MLP with BatchNorm1d trained by SGD: its state dict and, on dask, the task
    count of the running statistics after each step."""
    import autodiff.nn.functional as F
    from autodiff import nn

    xp = ad.Autodiff(xp_mod)
    nn.init.manual_seed(0)
    kw = {"xp": xp, "dtype": xp.float64}
    model = nn.Sequential(nn.Linear(4, 8, **kw), nn.BatchNorm1d(8, **kw), nn.ReLU(),
                          nn.Linear(8, 1, **kw))  # fmt: skip
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(1)
    sizes = []
    for _ in range(steps):
        x, y = xp.asarray(rng.standard_normal((16, 4))), xp.asarray(rng.standard_normal((16, 1)))
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
        bn = model[1]
        if hasattr(bn.running_mean.data, "__dask_graph__"):
            sizes.append(sum(len(b.data.__dask_graph__()) for b in bn.buffers()))
    state = {k: np.asarray(dask.compute(v.data)[0]) for k, v in model.state_dict().items()}
    return state, sizes


def test_batchnorm_running_statistics_are_persisted_with_the_step():
    """BatchNorm's buffers are no optimizer state, but the step persists them too: their
    graph stays one step deep, and the run equals numpy's."""
    want, _ = _bn_run(np)
    got, sizes = _bn_run(da)
    assert len(set(sizes)) == 1, sizes  # the same task count after every step
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-14, err_msg=k)
