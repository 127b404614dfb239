"""autodiff.distributed: 2-rank data-parallel training (MPI through mpiexec, torch's gloo
through a launcher of our own on 127.0.0.1) ends with the parameters of 1-process training
on the same global batches; a rank that raises ends the run; the one-process world needs
no MPI; sharding, bucketing and the NCCL wiring checked in one process against
hand-derived values."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
import types

import numpy as np
import pytest

import autodiff as ad
import autodiff.distributed as dist
from autodiff import nn, optim
from autodiff.distributed import group as world_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCH_VARS = ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "RANK", "WORLD_SIZE")

# 20 SGD-with-momentum steps of a 6-16-3 MLP on float32 batches of 32, each split over the
# ranks by shard(); small buckets so that several all-reduces run per step. The ranks start
# from different weights: DataParallel's broadcast gives them rank 0's.
TRAIN = """
import sys
import numpy as np
import autodiff as ad
import autodiff.distributed as dist
from autodiff import nn, optim
from autodiff.nn import functional as F

backend, out = sys.argv[1], sys.argv[2]
dist.init(None if backend == "auto" else backend)
xp = ad.Autodiff(np)
nn.init.manual_seed(dist.rank())
model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
opt = dist.DataParallel(optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                        bucket_cap_mb=1e-4)
rng = np.random.default_rng(0)
X = rng.standard_normal((20, 32, 6)).astype(np.float32)
Y = rng.integers(0, 3, (20, 32))
for x, y in zip(X, Y):
    x, y = dist.shard(xp.asarray(x), xp.asarray(y))
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
assert model[0].weight.dtype == xp.float32 and len(opt._buckets or [0, 0]) > 1
dist.save(model.state_dict(), out)
print("modules:", sorted(m for m in ("mpi4py", "torch", "cupy") if m in sys.modules))
"""

RAISE = """
import numpy as np
import autodiff.distributed as dist

dist.init()
if dist.rank() == 1:
    raise RuntimeError("boom on rank 1")
dist.world().allreduce_(np.ones(3))  # without the abort, rank 0 would wait here forever
"""


@pytest.fixture(autouse=True)
def _fresh_world():
    dist.shutdown()
    yield
    dist.shutdown()


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"] = "1"
    env.update(extra)
    return env


def _script(tmp_path, text, name="script.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def _run(cmd, timeout=60):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env=_env())  # fmt: skip


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    """Parameters after 1-process training (no launcher: the one-process world), and what
    it printed."""
    tmp = tmp_path_factory.mktemp("one")
    path = str(tmp / "one.npz")
    out = _run([sys.executable, _script(tmp, TRAIN, "train.py"), "auto", path])
    assert out.returncode == 0, out.stderr
    return ad.load(path), out.stdout


def _assert_same(got, want):
    assert sorted(got) == sorted(want)
    for k in want:
        assert got[k].dtype == np.float32
        np.testing.assert_allclose(got[k], want[k], rtol=0, atol=1e-6, err_msg=k)


def _needs_mpi():
    pytest.importorskip("mpi4py", reason="the MPI backend needs mpi4py")
    if dist.find_mpiexec() is None:
        pytest.skip("no mpiexec on PATH or beside this Python (pip install mpich)")


# -- multi-process runs -------------------------------------------------------------------------


def test_one_process_world_trains_without_mpi_or_torch(one_process):
    params, stdout = one_process
    assert "modules: []" in stdout  # nothing imported mpi4py, torch or cupy
    assert params["0.weight"].shape == (16, 6)


def test_two_mpi_ranks_train_as_one_process_on_the_global_batch(tmp_path, one_process):
    _needs_mpi()
    want, _ = one_process
    path = str(tmp_path / "two.npz")
    train = _script(tmp_path, TRAIN, "train.py")
    out = _run([dist.find_mpiexec(), "-n", "2", sys.executable, train, "auto", path])
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("mpi4py") == 2  # both ranks ran on MPI
    _assert_same(ad.load(path), want)


def test_a_rank_that_raises_ends_the_mpi_run(tmp_path):
    _needs_mpi()
    start = time.monotonic()
    out = _run(
        [dist.find_mpiexec(), "-n", "2", sys.executable, _script(tmp_path, RAISE)], timeout=30
    )
    assert out.returncode != 0
    assert time.monotonic() - start < 30
    assert "boom on rank 1" in out.stderr and "aborting all 2 ranks" in out.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch_torch(cmd, n=2, timeout=60):
    """torchrun's environment for ``n`` processes on 127.0.0.1; their exit codes."""
    # GLOO_SOCKET_IFNAME: the ranks talk over the loopback interface only
    where = dict(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), GLOO_SOCKET_IFNAME="lo")
    pipe = subprocess.PIPE
    procs = [
        subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=pipe,
            stderr=pipe,
            text=True,
            env=_env(RANK=str(r), WORLD_SIZE=str(n), **where),
        )
        for r in range(n)
    ]
    deadline = time.monotonic() + timeout
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
            results.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return results


def test_two_torch_gloo_ranks_train_as_one_process(tmp_path, one_process):
    pytest.importorskip("torch", reason="the torch backend needs PyTorch")
    want, _ = one_process
    path = str(tmp_path / "two.npz")
    train = _script(tmp_path, TRAIN, "train.py")
    results = _launch_torch([sys.executable, train, "auto", path])
    for code, out, err in results:
        assert code == 0, err
        assert "torch" in out and "mpi4py" not in out
    _assert_same(ad.load(path), want)


def test_a_rank_that_raises_ends_the_torch_run(tmp_path):
    pytest.importorskip("torch", reason="the torch backend needs PyTorch")
    start = time.monotonic()
    results = _launch_torch([sys.executable, _script(tmp_path, RAISE)], timeout=30)
    assert time.monotonic() - start < 30
    assert [code for code, _, _ in results] == [1, 1]
    assert "boom on rank 1" in results[1][2]
    assert "rank 0 raised RuntimeError; aborting all 2 ranks" in results[0][2]


# -- one process: sharding, buckets, errors -----------------------------------------------------


class FakeWorld(dist.World):
    """Rank ``rank`` of ``size``; the other ranks' contribution to an all-reduce is
    ``others(buf)`` (a sum over them)."""

    def __init__(self, rank, size, others=None):
        self.rank, self.size, self.others = rank, size, others
        self.calls = []

    def allreduce_(self, buf):
        self.calls.append(buf.shape[0])
        buf += self.others(buf)
        return buf

    def barrier(self):
        self.calls.append("barrier")


def _use(w):
    world_module._WORLD[:] = [w]
    return w


@pytest.mark.parametrize("drop_last, want", [
    (True, [[0, 1, 2], [3, 4, 5], [6, 7, 8]]),          # 10 rows, 3 ranks: row 9 dropped
    (False, [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]),      # as numpy.array_split
])  # fmt: skip
def test_shard_cuts_the_first_axis_in_blocks(drop_last, want):
    x, y = np.arange(10), np.arange(10) * 10
    for r in range(3):
        _use(FakeWorld(r, 3))
        a, b = dist.shard(x, y, drop_last=drop_last)
        assert a.tolist() == want[r] and b.tolist() == [10 * i for i in want[r]]
        assert dist.shard(x, drop_last=drop_last).tolist() == want[r]


def test_shard_of_an_iterable_takes_every_size_th_item_in_full_rounds():
    for r, want in enumerate([[0, 3], [1, 4], [2, 5]]):  # 8 items, 3 ranks: 6 and 7 dropped
        _use(FakeWorld(r, 3))
        assert list(dist.shard(iter(range(8)))) == want


def test_one_process_world_is_the_identity():
    w = dist.init()
    assert w.backend == dist.get_backend() == "single"
    assert (dist.rank(), dist.world_size()) == (0, 1)
    x = np.arange(5)
    assert dist.shard(x) is not None and dist.shard(x).tolist() == x.tolist()
    assert list(dist.shard([1, 2])) == [1, 2]


def _model_and_grads(xp):
    nn.init.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2), nn.Linear(2, 2))
    x = xp.asarray(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    xp.sum(model[1](model[0](x)) ** 2).backward()  # model[2] gets no gradient here
    return model


def test_data_parallel_averages_gradients_in_buckets_and_keeps_unused_ones_none():
    xp = ad.Autodiff(np)
    model = _model_and_grads(xp)
    params = list(model.parameters())
    mine = {id(p): None if p.grad is None else np.array(p.grad.data) for p in params}
    # the other rank's gradients: 1 everywhere for model[0], none for model[1] and model[2]
    theirs = {id(model[0].weight), id(model[0].bias)}
    unused = {id(model[2].weight), id(model[2].bias)}

    def others(buf):
        # the flags of the bucket say which of its parameters the other rank has
        n = buf.shape[0]
        out = np.zeros(n, dtype=buf.dtype)
        for bucket in opt._buckets:
            if bucket.buffer is buf:
                for i, p in enumerate(bucket.params):
                    if id(p) in theirs:
                        a = bucket.offsets[i]
                        out[a : a + p.data.size] = 1
                        out[bucket.total + i] = 1
        return out

    w = _use(FakeWorld(0, 2, others))
    opt = dist.DataParallel(optim.SGD(model.parameters(), lr=0.0), bucket_cap_mb=40 / 2**20,
                            broadcast=False)  # fmt: skip
    grad_buffers = {id(p): p.grad.data for p in params if p.grad is not None}
    opt.step()
    # a bucket closes once it holds >= 40 bytes: [48], [16, 32], [8, 16, 8] bytes of float32
    assert [len(b.params) for b in opt._buckets] == [1, 2, 3]
    assert w.calls == [12 + 1, 4 + 8 + 2, 2 + 4 + 2 + 3]  # values, then one flag a parameter
    for p in params:
        if id(p) in unused:
            assert p.grad is None  # no rank had a gradient
            continue
        extra = 1 if id(p) in theirs else 0
        np.testing.assert_array_equal(p.grad.data, (mine[id(p)] + extra) / 2)
        assert p.grad.data is grad_buffers[id(p)]  # written in place


@pytest.mark.parametrize("closure", [False, True])
def test_data_parallel_step_averages_gradients_and_a_closures_loss(closure):
    xp = ad.Autodiff(np)
    model = _model_and_grads(xp)
    x = xp.asarray(np.ones((1, 3), dtype=np.float32))
    model.zero_grad()
    loss = xp.sum(model(x) ** 2)
    loss.backward()
    mine = [np.array(p.grad.data) for p in model.parameters()]
    # the other rank has 3 times this one's gradients and loss: the average is twice ours
    _use(FakeWorld(0, 2, lambda buf: 3 * buf))
    opt = dist.DataParallel(optim.SGD(model.parameters(), lr=0.0), broadcast=False)

    def again():  # the closure's backward makes the same gradients
        opt.zero_grad()
        value = xp.sum(model(x) ** 2)
        value.backward()
        return value

    got = opt.step(again if closure else None)
    for p, g in zip(model.parameters(), mine):
        np.testing.assert_allclose(p.grad.data, 2 * g, rtol=1e-6)
    if closure:
        np.testing.assert_allclose(float(got), 2 * float(loss), rtol=1e-6)


def test_data_parallel_passes_the_optimizer_through():
    xp = ad.Autodiff(np)
    model = _model_and_grads(xp)
    inner = optim.Adam(model.parameters(), lr=0.01)
    opt = dist.DataParallel(inner)
    assert opt.param_groups is inner.param_groups and opt.defaults is inner.defaults
    sched = optim.StepLR(opt, step_size=1, gamma=0.5)
    opt.step()
    sched.step()
    assert inner.param_groups[0]["lr"] == 0.005
    assert opt.state_dict()["state"].keys() == inner.state_dict()["state"].keys()
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_broadcast_parameters_writes_root_values_in_place():
    xp = ad.Autodiff(np)
    p = xp.asarray(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    buffer = p.data
    w = _use(FakeWorld(1, 2))
    w.broadcast_ = lambda buf, root: buf * 0 + 7  # root's values: 7 (a new buffer, as on
    dist.broadcast_parameters([p], root=0)  # a backend without in-place collectives)
    assert p.data is buffer and p.data.tolist() == [7.0, 7.0]


def test_save_writes_on_the_root_rank_only_then_waits(tmp_path):
    path = tmp_path / "state.npz"
    w = _use(FakeWorld(1, 2))
    dist.save({"a": np.ones(2)}, path)
    assert not path.exists() and w.calls == ["barrier"]
    _use(FakeWorld(0, 2))
    dist.save({"a": np.ones(2)}, path)
    assert ad.load(path)["a"].tolist() == [1.0, 1.0]


def test_nccl_world_through_a_stand_in_cupyx(monkeypatch):
    calls = []

    class Comm:
        def all_reduce(self, a, b, op):
            calls.append(("all_reduce", a is b, op))

        def broadcast(self, a, root):
            calls.append(("broadcast", root))

        def barrier(self):
            calls.append("barrier")

    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(
        Device=lambda i: types.SimpleNamespace(use=lambda: calls.append(("device", i))),
        runtime=types.SimpleNamespace(getDeviceCount=lambda: 2),
    )
    cupyx = types.ModuleType("cupyx")
    cupyx.distributed = types.ModuleType("cupyx.distributed")
    cupyx.distributed.init_process_group = lambda n, r, **kw: calls.append((n, r, kw)) or Comm()
    modules = {"cupy": cupy, "cupyx": cupyx, "cupyx.distributed": cupyx.distributed}
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    for var in LAUNCH_VARS + ("LOCAL_RANK", "MPI_LOCALRANKID", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LOCAL_RANK", "3")
    w = dist.init("nccl", rank=3, world_size=4, init_method="tcp://10.0.0.1:29500")
    buf = np.zeros(2)
    w.allreduce_(buf)
    w.broadcast_(buf, 2)
    dist.barrier()
    assert calls == [
        ("device", 1),  # local rank 3 of 2 GPUs
        (4, 3, {"backend": "nccl", "use_mpi": False, "host": "10.0.0.1", "port": 29500}),
        ("all_reduce", True, "sum"),
        ("broadcast", 2),
        "barrier",
    ]
    assert dist.get_backend() == "nccl"


@pytest.mark.parametrize("call, error, match", [
    (lambda: dist.init("gloo"), ValueError, "backend must be one of"),
    (lambda: dist.init("single", rank=0), ValueError, "rank is for backends"),
    (lambda: dist.init("single", comm=object()), ValueError, "comm is for backend 'mpi'"),
    (lambda: dist.init("single", timeout=5), ValueError, "timeout is for backend 'torch'"),
    (lambda: dist.init("torch", world_size=0), ValueError, "world_size must be an int >= 1"),
    (lambda: dist.init(abort_on_error="yes"), TypeError, "abort_on_error must be True"),
    (lambda: dist.DataParallel(object()), TypeError, "optimizer must be an autodiff.optim"),
    (lambda: dist.DataParallel(optim.SGD([_leaf()], lr=0.1), bucket_cap_mb=0), ValueError,
     "bucket_cap_mb must be a number > 0"),
    (lambda: dist.broadcast_parameters([_leaf()], root=1), ValueError, "root must be an int"),
    (lambda: dist.broadcast_parameters([np.ones(2)]), TypeError, "not an autodiff Tensor"),
    (lambda: dist.broadcast_parameters(3), TypeError, "expected a Module"),
    (lambda: dist.shard(np.ones(3), np.ones(4)), ValueError, "share their first axis"),
    (lambda: dist.shard(np.float64(1.0)), ValueError, "0-dimensional"),
    (lambda: dist.shard(3), TypeError, "must be an array or an iterable"),
    (lambda: dist.shard([1, 2], drop_last=False), ValueError, "drop_last=False is for arrays"),
    (lambda: dist.save({}, "x.npz", root=2), ValueError, "root must be an int"),
])  # fmt: skip
def test_bad_arguments_raise_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_init_again_with_another_backend_raises():
    dist.init("single")
    assert dist.init() is dist.world()
    with pytest.raises(RuntimeError, match="already initialized with backend 'single'"):
        dist.init("mpi")


def _leaf():
    return ad.Autodiff(np).asarray(np.ones(2, dtype=np.float32), requires_grad=True)
