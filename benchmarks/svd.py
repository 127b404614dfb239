"""``linalg.svd``'s backward against its forward: a 256x256 float64 matrix, the loss
``sum(S * q) + sum((U @ Vh) * R)`` (fixed random weights; it doesn't depend on the
singular vectors' signs, so libraries agree), so the backward pass is the SVD rule
plus a matmul's. Timed interleaved in one process:
the forward (the recorded svd and the loss), the backward (``loss.backward()`` on a
graph made untimed just before), and NumPy's own ``svd`` (the floor of the
forward); PyTorch's ratio for comparison, if installed (2 threads each).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import autodiff as ad

from .threads import limit_threads

N = 256


def _data():
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s) for s in ((N, N), (N,), (N, N))]


def _autodiff(a, q, r):
    xp = ad.Autodiff(np)
    x = xp.asarray(a, requires_grad=True)
    q_, R = xp.asarray(q), xp.asarray(r)

    def forward():
        u, s, vh = xp.linalg.svd(x, full_matrices=False)
        return xp.sum(s * q_) + xp.sum((u @ vh) * R)

    return x, forward


def _torch(a, q, r):
    import torch

    x = torch.tensor(a, requires_grad=True)
    q_, R = torch.tensor(q), torch.tensor(r)

    def forward():
        u, s, vh = torch.linalg.svd(x, full_matrices=False)
        return (s * q_).sum() + ((u @ vh) * R).sum()

    return x, forward


def _ratios(x, forward, repeats):
    fwd, bwd = [], []
    for _ in range(repeats + 2):
        x.grad = None
        t0 = time.perf_counter()
        loss = forward()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        fwd.append(t1 - t0)
        bwd.append(t2 - t1)
    return fwd[2:], bwd[2:]


def main(repeats: int = 20) -> str:
    limit_threads(2)
    data = _data()
    libs = {"autodiff (numpy)": _autodiff(*data)}
    try:
        libs["PyTorch CPU"] = _torch(*data)
    except ImportError:
        pass
    out = [f"svd: {N}x{N} float64, full_matrices=False, loss sum(S q) + sum((U Vh) R); "
           f"{repeats} runs each, 2 threads", "",
           "| implementation | forward ms (median) | backward ms (median) | backward / forward "
           "(paired median) |", "|---|---|---|---|"]  # fmt: skip
    grads = {}
    for name, (x, forward) in libs.items():
        fwd, bwd = _ratios(x, forward, repeats)
        grads[name] = np.asarray(x.grad.detach() if hasattr(x.grad, "detach") else x.grad)
        paired = statistics.median(b / f for f, b in zip(fwd, bwd))
        out.append(f"| {name} | {statistics.median(fwd) * 1e3:.1f} | "
                   f"{statistics.median(bwd) * 1e3:.1f} | {paired:.2f} |")  # fmt: skip
    if len(grads) == 2:
        a, b = grads.values()
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9 * np.abs(b).max())
    floor = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.linalg.svd(data[0], full_matrices=False)
        floor.append(time.perf_counter() - t0)
    out.append(f"\nNumPy's svd alone: {statistics.median(floor) * 1e3:.1f} ms (median)")
    return "\n".join(out)


if __name__ == "__main__":
    print(main())
