"""Cross-entropy over 50,000 classes, batch 64, float32: peak extra memory of
forward + backward as a multiple of the logits' size (tracemalloc sees NumPy's
allocations), and time side by side with PyTorch CPU (if installed)."""

from __future__ import annotations

import statistics
import tracemalloc

import numpy as np

import autodiff as ad
from autodiff.nn import functional as F

from ._timing import table, timed

N, C = 64, 50_000


def _data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((N, C)).astype(np.float32), rng.integers(0, C, N)


def autodiff_step(z, t):
    xp = ad.Autodiff(np)
    logits = xp.asarray(z, requires_grad=True)
    target = xp.asarray(t)

    def run():
        logits.grad = None
        loss = F.cross_entropy(logits, target)
        loss.backward()
        return float(loss), logits.grad.data

    return run


def torch_step(z, t):
    import torch

    torch.set_num_threads(2)
    logits = torch.tensor(z, requires_grad=True)
    target = torch.tensor(t)

    def run():
        logits.grad = None
        loss = torch.nn.functional.cross_entropy(logits, target)
        loss.backward()
        return float(loss.detach()), logits.grad.numpy()

    return run


def peak_memory_ratio(z, t):
    """Peak bytes allocated during forward + backward, over the logits' bytes.
    The gradient itself (one logits-sized array) is part of the peak."""
    step = autodiff_step(z, t)
    step()  # warm-up: first-call allocations are not the steady state
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    step()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak / z.nbytes


def main(repeats: int = 20) -> str:
    z, t = _data()
    impls = {"autodiff (numpy)": autodiff_step(z, t)}
    try:
        impls["PyTorch CPU"] = torch_step(z, t)
    except ImportError:
        pass
    ref = impls["autodiff (numpy)"]()
    for name, f in impls.items():
        loss, grad = f()
        np.testing.assert_allclose(loss, ref[0], rtol=1e-5, err_msg=name)
        np.testing.assert_allclose(grad, ref[1], rtol=1e-4, atol=1e-9, err_msg=name)
    ratio = peak_memory_ratio(z, t)
    times, how = timed(impls, repeats)
    out = [f"cross_entropy: logits ({N}, {C}) float32, forward + backward, {repeats} {how}", ""]
    if "PyTorch CPU" in times:
        out.append(table(times, 1e3, "ms", "PyTorch CPU"))
    else:
        out.append(f"autodiff: {statistics.median(times['autodiff (numpy)']) * 1e3:.2f} ms")
    out.append(f"\npeak extra memory of forward + backward: {ratio:.2f} x the logits (target < 3)")
    return "\n".join(out)


if __name__ == "__main__":
    print(main())
