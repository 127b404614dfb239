"""max_pool2d 2x2 forward + backward on (32, 32, 28, 28) float32, against PyTorch CPU."""

from __future__ import annotations

import numpy as np

import autodiff as ad
from autodiff.nn import functional as F

from ._timing import table, timed
from .threads import limit_threads


def autodiff_step(x):
    xp = ad.Autodiff(np)
    t = xp.asarray(x, requires_grad=True)

    def run():
        t.grad = None
        y = F.max_pool2d(t, 2)
        xp.sum(y * y).backward()
        return t.grad.data

    return run


def torch_step(x):
    import torch

    t = torch.tensor(x, requires_grad=True)

    def run():
        t.grad = None
        y = torch.nn.functional.max_pool2d(t, 2)
        (y * y).sum().backward()
        return t.grad.numpy()

    return run


def main(repeats: int = 20) -> str:
    limit_threads(2)
    x = np.random.default_rng(0).standard_normal((32, 32, 28, 28)).astype(np.float32)
    impls = {"autodiff (numpy)": autodiff_step(x)}
    try:
        impls["PyTorch CPU"] = torch_step(x)
    except ImportError:
        return "maxpool: PyTorch is not installed; nothing to compare with"
    np.testing.assert_allclose(impls["autodiff (numpy)"](), impls["PyTorch CPU"](), rtol=1e-6)
    times, how = timed(impls, repeats)
    head = "max_pool2d 2x2: x (32, 32, 28, 28) float32, forward + backward"
    return head + f", {repeats} {how}, 2 threads\n\n" + table(times, 1e3, "ms", "PyTorch CPU")


if __name__ == "__main__":
    print(main())
