"""conv2d forward + backward, input (32, 16, 28, 28), weight (32, 16, 3, 3), padding 1,
float32, against PyTorch CPU (2 threads each)."""

from __future__ import annotations

import numpy as np

import autodiff as ad
from autodiff.nn import functional as F

from ._timing import table, timed
from .threads import limit_threads


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 16, 28, 28)).astype(np.float32)
    w = (rng.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32)
    return x, w, rng.standard_normal(32).astype(np.float32)


def autodiff_step(x, w, b):
    xp = ad.Autodiff(np)
    ts = [xp.asarray(a, requires_grad=True) for a in (x, w, b)]

    def run():
        for t in ts:
            t.grad = None
        y = F.conv2d(*ts, padding=1)
        xp.sum(y * y).backward()
        return [t.grad.data for t in ts]

    return run


def torch_step(x, w, b):
    import torch

    ts = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]

    def run():
        for t in ts:
            t.grad = None
        y = torch.nn.functional.conv2d(*ts, padding=1)
        (y * y).sum().backward()
        return [t.grad.numpy() for t in ts]

    return run


def main(repeats: int = 20) -> str:
    limit_threads(2)
    data = _data()
    impls = {"autodiff (numpy)": autodiff_step(*data)}
    try:
        impls["PyTorch CPU"] = torch_step(*data)
    except ImportError:
        return "conv: PyTorch is not installed; nothing to compare with"
    ref = impls["PyTorch CPU"]()
    for g, r in zip(impls["autodiff (numpy)"](), ref):
        np.testing.assert_allclose(g, r, rtol=2e-3, atol=2e-3 * np.abs(r).max())
    times, how = timed(impls, repeats)
    head = "conv2d: x (32, 16, 28, 28), w (32, 16, 3, 3), padding 1, float32, forward + backward"
    return head + f", {repeats} {how}, 2 threads\n\n" + table(times, 1e3, "ms", "PyTorch CPU")


if __name__ == "__main__":
    print(main())
