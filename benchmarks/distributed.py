"""distributed: a data-parallel MLP step (784-1024-1024-10, ReLU, cross-entropy, SGD,
float32) on one process and on two MPI processes with the same global batch of 1024.

Each process is pinned to its own core (``mpiexec -bind-to core``; the one-process run
to core 0 with ``os.sched_setaffinity``) with one BLAS thread, so T1 / (2 T2) measures
the scaling of data parallelism alone: 1.0 is perfect. The model is sized so that
compute dominates: 1.86 M parameters (7.5 MB of gradients, one all-reduce bucket of
25 MB) against 2 x 2.9 GFLOP of matmuls per rank per step. Runs alternate, one process
then two, over rounds; the efficiency is the median over rounds of T1 / (2 T2) in the
same round. The all-reduce share is the time rank 0 spends in ``DataParallel``'s
packing, all-reduce and unpacking over its step time (waiting for the slower rank
included)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SIZES = (784, 1024, 1024, 10)
BATCH, LR, WARMUP = 1024, 0.01, 2
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROW1, ROW2 = "autodiff (numpy), 1 process", "autodiff (numpy), 2 MPI processes"


def _env() -> dict:
    """One BLAS thread per process, glibc's allocator kept from returning memory between
    steps, and the development machines' BLAS overrides removed."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE",
                                                            "OPENBLAS_L2_SIZE")}  # fmt: skip
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    env.update(MALLOC_MMAP_THRESHOLD_="33554432", MALLOC_TRIM_THRESHOLD_="1073741824")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


def worker(steps: int, folder: str) -> None:
    """Run ``WARMUP + steps`` data-parallel steps in this process; write ``rank<r>.json``
    into ``folder``: the seconds of each step, those spent in the all-reduce, the losses."""
    import numpy as np

    import autodiff as ad
    import autodiff.distributed as dist
    from autodiff import nn, optim
    from autodiff.nn import functional as F

    dist.init()
    if dist.world_size() == 1 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})
    xp = ad.Autodiff(np)
    nn.init.manual_seed(0)
    layers = []
    for n_in, n_out in zip(SIZES[:-1], SIZES[1:]):
        layers += [nn.Linear(n_in, n_out), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    opt = dist.DataParallel(optim.SGD(model.parameters(), lr=LR))
    rng = np.random.default_rng(0)
    X = xp.asarray(rng.standard_normal((BATCH, SIZES[0])).astype(np.float32))
    Y = xp.asarray(rng.integers(0, SIZES[-1], BATCH))
    x, y = dist.shard(X, Y)
    times, comm, losses = [], [], []
    for i in range(WARMUP + steps):
        t0, c0 = time.perf_counter(), opt.comm_seconds
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
        if i >= WARMUP:
            times.append(time.perf_counter() - t0)
            comm.append(opt.comm_seconds - c0)
    with open(os.path.join(folder, f"rank{dist.rank()}.json"), "w") as f:
        json.dump({"rank": dist.rank(), "times": times, "comm": comm, "losses": losses}, f)


def _launch(n: int, steps: int) -> list[dict]:
    from autodiff.distributed import find_mpiexec

    with tempfile.TemporaryDirectory() as folder:
        cmd = [sys.executable, "-m", "benchmarks.distributed", "--worker", str(steps), folder]
        if n > 1:
            cmd = [find_mpiexec(), "-n", str(n), "-bind-to", "core"] + cmd
        out = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=ROOT,
                             timeout=600)  # fmt: skip
        if out.returncode != 0:
            raise RuntimeError(f"distributed benchmark: {' '.join(cmd)} failed:\n{out.stderr}")
        ranks = []
        for r in range(n):
            with open(os.path.join(folder, f"rank{r}.json")) as f:
                ranks.append(json.load(f))
    return ranks


def _mpi_available() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    from autodiff.distributed import find_mpiexec

    return find_mpiexec() is not None


def main(repeats: int = 50) -> str:
    rounds = 1 if repeats < 5 else 5
    steps = max(1, repeats // rounds)
    title = (
        f"distributed: data-parallel MLP step {'-'.join(map(str, SIZES))}, global batch "
        f"{BATCH}, float32, SGD; {rounds} round(s) of {steps} steps (+{WARMUP} untimed) "
        "per run, 1 and 2 processes alternating, one core and one BLAS thread each"
    )
    if not _mpi_available():
        t1 = statistics.median(_launch(1, steps)[0]["times"])
        rows = ["| implementation | median ms |", "|---|---|", f"| {ROW1} | {t1 * 1e3:.2f} |"]
        return "\n".join([title, "", *rows, "", "(no mpi4py or mpiexec: 2 processes skipped)"])
    t1s, t2s, shares, least, effs = [], [], [], [], []
    for _ in range(rounds):
        one, two = _launch(1, steps), _launch(2, steps)
        for i, a in enumerate(one[0]["losses"]):  # the same training, step by step
            mean = sum(r["losses"][i] for r in two) / len(two)
            if abs(mean - a) > 1e-4 * abs(a):
                raise AssertionError(f"distributed: step {i}'s loss: 1 process {a}, 2 {mean}")
        t1 = statistics.median(one[0]["times"])
        # a step ends when the slower rank's does
        t2 = statistics.median(max(ts) for ts in zip(*(r["times"] for r in two)))
        t1s.append(t1)
        t2s.append(t2)
        effs.append(t1 / (2 * t2))
        share = [c / t for c, t in zip(two[0]["comm"], two[0]["times"])]
        shares.append(statistics.median(share))
        least.append(min(share))
    lines = [
        title,
        "",
        "| implementation | median ms | min | max | all-reduce share |",
        "|---|---|---|---|---|",
        f"| {ROW1} | {statistics.median(t1s) * 1e3:.2f} | {min(t1s) * 1e3:.2f} "
        f"| {max(t1s) * 1e3:.2f} | - |",
        f"| {ROW2} | {statistics.median(t2s) * 1e3:.2f} | {min(t2s) * 1e3:.2f} "
        f"| {max(t2s) * 1e3:.2f} | {statistics.median(shares):.1%} |",
        "",
        f"scaling efficiency T1 / (2 T2): median {statistics.median(effs):.2f} over "
        f"{rounds} round(s) (min {min(effs):.2f}, max {max(effs):.2f}); all-reduce share "
        f"of rank 0's step: median {statistics.median(shares):.1%}, least {min(least):.1%} "
        "(the median includes waiting for the slower rank)",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(int(sys.argv[2]), sys.argv[3])
    else:
        print(main())
