"""Per-op overhead: 200 steps of ``x = tanh(x * 1.01 + 0.1)`` on a (16,) float64
array, then ``sum``, forward and backward: 601 primitive ops.

Compares autodiff on numpy, eager and under ``ad.jit`` (the recorded backend calls
replayed), with hand-written NumPy forward + backward (the floor: only the arithmetic)
and with PyTorch eager on the CPU (if installed).
The step builders take a dtype: ``complex_chain`` runs the same chain on complex128.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import autodiff as ad

from ._case import AUTODIFF, NUMPY, TORCH, per_op

STEPS = 200
OPS = 3 * STEPS + 1
JIT = "autodiff jit (numpy)"


def start(dtype="float64"):
    """The input: (16,) values in [-1, 1], off the real axis when complex."""
    x = np.linspace(-1.0, 1.0, 16)
    return (x + 0.5j * x[::-1]).astype(dtype) if dtype.startswith("complex") else x


def autodiff_step(dtype="float64"):
    xp = ad.Autodiff(np)
    x0 = xp.asarray(start(dtype), requires_grad=True)
    real = xp.real if dtype.startswith("complex") else None  # a real loss: sum(real(x))

    def run():
        x0.grad = None
        x = x0
        for _ in range(STEPS):
            x = xp.tanh(x * 1.01 + 0.1)
        xp.sum(real(x) if real else x).backward()
        return x0.grad.data

    return run


def jit_step(dtype="float64"):
    """The chain's gradient under ``ad.jit``: traced on the first call, replayed after."""
    from array_api_compat import array_namespace

    def loss(x):
        a = array_namespace(x)
        for _ in range(STEPS):
            x = a.tanh(x * 1.01 + 0.1)
        return a.sum(a.real(x) if dtype.startswith("complex") else x)

    g = ad.jit(ad.grad(loss))
    x0 = start(dtype)
    g(x0)  # the trace

    def run():
        return g(x0)

    return run


def numpy_step(dtype="float64"):
    x0 = start(dtype)
    cplx = dtype.startswith("complex")

    def run():
        x = x0
        saved = []
        for _ in range(STEPS):
            x = np.tanh(x * 1.01 + 0.1)
            saved.append(x)
        g = np.ones_like(x)
        for y in reversed(saved):  # PyTorch's convention: g * conj(f'(z))
            g = g * (np.conj(1.0 - y * y) if cplx else 1.0 - y * y) * 1.01
        return g

    return run


def torch_step(dtype="float64"):
    import torch

    torch.set_num_threads(1)
    x0 = torch.tensor(start(dtype), requires_grad=True)

    def run():
        x0.grad = None
        x = x0
        for _ in range(STEPS):
            x = torch.tanh(x * 1.01 + 0.1)
        (x.real if x.is_complex() else x).sum().backward()
        return x0.grad.resolve_conj().numpy()

    return run


def main(repeats: int = 50) -> str:
    factories = {AUTODIFF: autodiff_step, JIT: jit_step, NUMPY: numpy_step, TORCH: torch_step}
    title = (f"chain: {STEPS} x tanh(x*1.01 + 0.1) on (16,) float64, then sum; "
             f"forward + backward, {OPS} ops")  # fmt: skip
    times, out = per_op(title, factories, repeats, OPS)
    if TORCH in times:
        a, t = times[AUTODIFF], times[TORCH]
        r = statistics.median(a) / statistics.median(t)
        paired = statistics.median(x / y for x, y in zip(a, t))
        out += f"\n\nautodiff / PyTorch CPU: {r:.2f} (paired: {paired:.2f})"
    return out + "\n\n" + _wide(max(5, repeats // 5))


WIDE, WIDE_STEPS = 100_000, 10


def _wide(repeats):
    """The gradient of a short chain on a (100000,) array under ``ad.jit``, its replay
    writing results into the buffers of inputs that die (jit.REUSE_BUFFERS) or not,
    against hand-written NumPy (new arrays, as the chain's floor above)."""
    import importlib

    from array_api_compat import array_namespace

    jit_module = importlib.import_module("autodiff.transforms.jit")  # the module, not ad.jit

    def loss(x):
        a = array_namespace(x)
        for _ in range(WIDE_STEPS):
            x = a.tanh(x * 1.01 + 0.1)
        return a.sum(x)

    x0 = np.linspace(-1.0, 1.0, WIDE)
    steps = {}
    for reuse in (True, False):
        jit_module.REUSE_BUFFERS = reuse  # read when a trace is compiled
        g = ad.jit(ad.grad(loss))
        g(x0), g(x0)
        steps[reuse] = g
    jit_module.REUSE_BUFFERS = True
    want = steps[False](x0)
    assert np.array_equal(steps[True](x0), want)
    hand = numpy_step_on(x0, WIDE_STEPS)
    np.testing.assert_allclose(hand(), want, rtol=1e-12)
    times = {True: [], False: [], NUMPY: []}
    for _ in range(repeats):
        for key, fn in ((True, lambda: steps[True](x0)), (False, lambda: steps[False](x0)),
                        (NUMPY, hand)):  # fmt: skip
            t0 = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - t0)

    def paired(a, b):
        return statistics.median(x / y for x, y in zip(times[a], times[b]))

    return (
        f"jit on a ({WIDE},) float64 chain of {WIDE_STEPS} steps, gradient, {repeats} "
        f"interleaved runs: writing into dying buffers "
        f"{statistics.median(times[True]) * 1e3:.2f} ms, not "
        f"{statistics.median(times[False]) * 1e3:.2f} ms (paired ratio "
        f"{paired(True, False):.2f}); hand-written NumPy "
        f"{statistics.median(times[NUMPY]) * 1e3:.2f} ms (jit / NumPy, paired: "
        f"{paired(True, NUMPY):.2f})"
    )


def numpy_step_on(x0, steps):
    """The hand-written chain's gradient on ``x0`` (``steps`` steps)."""

    def run():
        x, saved = x0, []
        for _ in range(steps):
            x = np.tanh(x * 1.01 + 0.1)
            saved.append(x)
        g = np.ones_like(x)
        for y in reversed(saved):
            g = g * (1.0 - y * y) * 1.01
        return g

    return run


if __name__ == "__main__":
    print(main())
