"""dask_logistic: one full-batch gradient of the mean logistic loss on chunked Dask
arrays, ``ad.grad`` against the closed form ``X.T @ (sigmoid(X w) - y) / n`` written
with ``dask.array`` by hand.

Two settings, reported separately: a ``LocalCluster`` of 2 worker processes with 1
thread each, on data generated lazily per chunk (every step makes the chunks again:
the data need not fit in memory); and the synchronous scheduler on a smaller dataset
held in memory. A step builds the graph and computes the gradient. A third row,
the closed form times a ``broadcast_to`` of ``1/n`` (the cotangent that our ``mean``
rule makes, one chunk of the full length), shows what that broadcast costs. The task
counts of each graph are given before and after ``dask.optimize``."""

from __future__ import annotations

import logging
import statistics

import numpy as np

from ._timing import interleave, table

AUTODIFF, HAND, HAND_BC = "autodiff (dask)", "hand-written dask", "hand-written + broadcast_to"
# (n_chunks, rows per chunk, features); the test makes them small
CLUSTER = (30, 50_000, 50)
IN_MEMORY = (10, 20_000, 50)
MEMORY_LIMIT = "512MiB"


def data(n_chunks, rows, d, seed=0):
    """Lazy (X, y, w): uniform features, 0/1 labels, small weights."""
    import dask.array as da

    n = n_chunks * rows
    X = da.random.default_rng(seed).random((n, d), chunks=(rows, d)) - 0.5
    y = (da.random.default_rng(seed + 1).random(n, chunks=rows) < 0.5).astype(np.float64)
    w = da.from_array(np.linspace(-1.0, 1.0, d))
    return X, y, w


def loss(w, X, y):
    """Mean logistic loss ``mean(log(1 + e^z) - y z)`` of the logits ``z = X @ w``."""
    from array_api_compat import array_namespace

    xp = array_namespace(X, y)
    z = X @ w
    return xp.mean(xp.logaddexp(0.0, z) - y * z)


def gradients(X, y, w):
    """The graphs of the three implementations' gradients: {name: a function making it}."""
    import dask.array as da

    import autodiff as ad

    n = X.shape[0]
    grad = ad.grad(loss)

    def hand():
        return X.T @ (1 / (1 + da.exp(-(X @ w))) - y) / n

    def hand_bc():
        scale = da.broadcast_to(da.reshape(da.ones(()) / n, (1,)), (n,))
        return X.T @ ((1 / (1 + da.exp(-(X @ w))) - y) * scale)

    return {AUTODIFF: lambda: grad(w, X, y), HAND: hand, HAND_BC: hand_bc}


def tasks(make):
    """Task counts of the graph ``make()`` builds: (as built, after dask.optimize)."""
    import dask

    g = make()
    return len(g.__dask_graph__()), len(dask.optimize(g)[0].__dask_graph__())


def measure(title, X, y, w, repeats):
    """Check the gradients agree, time them interleaved; the report of one setting."""
    makes = gradients(X, y, w)
    steps = {name: (lambda make=make: make().compute()) for name, make in makes.items()}
    ref = steps[HAND]()
    for name, step in steps.items():
        np.testing.assert_allclose(step(), ref, rtol=1e-12, atol=1e-15, err_msg=name)
    times = interleave(steps, repeats, warmup=1)
    counts = {name: tasks(make) for name, make in makes.items()}
    ratio = statistics.median(a / b for a, b in zip(times[AUTODIFF], times[HAND]))
    lines = [f"{title}; {repeats} interleaved runs", "", table(times, 1e3, "ms", HAND), "",
             "| implementation | tasks | tasks after dask.optimize |", "|---|---|---|"]  # fmt: skip
    lines += [f"| {name} | {a} | {b} |" for name, (a, b) in counts.items()]
    lines.append(f"\nautodiff / hand-written, paired median: {ratio:.2f}")
    return "\n".join(lines)


def main(repeats: int = 50) -> str:
    """Both settings; the cluster runs ``max(2, repeats // 5)`` rounds (a step is
    seconds there)."""
    import dask
    from dask.distributed import Client, LocalCluster

    k, rows, d = IN_MEMORY
    X, y, w = data(k, rows, d)
    with dask.config.set(scheduler="sync"):
        X, y = dask.persist(X, y)
        reports = [measure(f"synchronous scheduler, {k * rows:,} x {d} float64 in memory "
                           f"({k} chunks)", X, y, w, repeats)]  # fmt: skip
    k, rows, d = CLUSTER
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=MEMORY_LIMIT,
                           host="127.0.0.1", dashboard_address=None,
                           silence_logs=logging.ERROR)  # fmt: skip
    with cluster, Client(cluster):
        X, y, w = data(k, rows, d)
        gb = k * rows * d * 8 / 2**30
        title = (f"LocalCluster (2 workers x 1 thread, {MEMORY_LIMIT} each), {k * rows:,} x "
                 f"{d} float64 ({gb:.2f} GiB) made lazily per chunk ({k} chunks)")  # fmt: skip
        reports.append(measure(title, X, y, w, max(2, repeats // 5)))
    return "\n\n".join(reports)


if __name__ == "__main__":
    print(main())
