"""Piecewise code: 100 steps of ``x = where(x > 0, x * 0.9, x * 0.5) + 0.01`` on a
(4096,) float64 array, then ``sum``, forward and backward: 501 ops.

What ``where`` costs in the backward pass: its rules hand the untaken branch's
positions over as structural zeros (graph.Zeros), which the element-wise rules
upstream keep exactly zero (one more ``where`` each). Compares autodiff on numpy
with hand-written NumPy forward + backward (which needs no such masking: it knows
both branches are finite) and with PyTorch eager on the CPU (if installed).
"""

from __future__ import annotations

import numpy as np

import autodiff as ad

from ._case import AUTODIFF, NUMPY, TORCH, per_op

STEPS = 100
N = 4096
OPS = 5 * STEPS + 1


def _x0():
    return np.linspace(-1.0, 1.0, N)


def autodiff_step():
    xp = ad.Autodiff(np)
    x0 = xp.asarray(_x0(), requires_grad=True)

    def run():
        x0.grad = None
        x = x0
        for _ in range(STEPS):
            x = xp.where(x > 0, x * 0.9, x * 0.5) + 0.01
        xp.sum(x).backward()
        return x0.grad.data

    return run


def numpy_step():
    x0 = _x0()

    def run():
        x = x0
        masks = []
        for _ in range(STEPS):
            m = x > 0
            x = np.where(m, x * 0.9, x * 0.5) + 0.01
            masks.append(m)
        g = np.ones_like(x)
        for m in reversed(masks):
            g = np.where(m, g, 0.0) * 0.9 + np.where(m, 0.0, g) * 0.5
        return g

    return run


def torch_step():
    import torch

    torch.set_num_threads(1)
    x0 = torch.tensor(_x0(), requires_grad=True)

    def run():
        x0.grad = None
        x = x0
        for _ in range(STEPS):
            x = torch.where(x > 0, x * 0.9, x * 0.5) + 0.01
        x.sum().backward()
        return x0.grad.numpy()

    return run


def main(repeats: int = 50) -> str:
    factories = {AUTODIFF: autodiff_step, NUMPY: numpy_step, TORCH: torch_step}
    title = (f"where: {STEPS} x where(x > 0, x*0.9, x*0.5) + 0.01 on ({N},) float64, then "
             f"sum; forward + backward, {OPS} ops")  # fmt: skip
    return per_op(title, factories, repeats, OPS)[1]


if __name__ == "__main__":
    print(main())
