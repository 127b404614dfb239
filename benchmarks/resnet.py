"""resnet: a small residual CNN, one forward + backward in training mode.

Batch 32 of 16x16x16 float32 images through two basic residual blocks of 16 channels,
each ``relu(bn2(conv2(relu(bn1(conv1(x))))) + x)`` with conv3x3 (padding 1, no bias)
and ``BatchNorm2d`` in training mode (batch statistics; the running statistics are
updated too), loss = mean(out^2), no optimizer step.

autodiff's ``nn`` modules against ``torch.nn``'s, loaded with the same weights
(torch's initialisation, seeded, through the state dict; the BatchNorms' weights and
biases drawn at random instead of 1 and 0). There is no hand-written NumPy floor (the
``cnn`` and ``conv`` cases have one for convolutions); the ratio is to PyTorch CPU.
The loss and every parameter's gradient are checked against PyTorch's before timing.
"""

from __future__ import annotations

import numpy as np

from ._case import AUTODIFF, TORCH
from .transformer import module_step, run_against_torch

BATCH, CHANNELS, SIZE, BLOCKS = 32, 16, 16, 2


def model(nn):
    """The network, from ``autodiff.nn`` or ``torch.nn`` (same names, same layout)."""

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(CHANNELS, CHANNELS, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(CHANNELS)
            self.conv2 = nn.Conv2d(CHANNELS, CHANNELS, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(CHANNELS)
            self.relu = nn.ReLU()

        def forward(self, x):
            h = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(h)) + x)

    return nn.Sequential(*[Block() for _ in range(BLOCKS)])


def _data():
    import torch

    torch.manual_seed(0)
    params = {k: v.detach().numpy().copy() for k, v in model(torch.nn).state_dict().items()}
    rng = np.random.default_rng(0)
    for k in params:
        if ".bn" in k and k.endswith(("weight", "bias")):
            lo, hi = (0.5, 1.5) if k.endswith("weight") else (-0.5, 0.5)
            params[k] = rng.uniform(lo, hi, CHANNELS).astype(np.float32)
    x = rng.standard_normal((BATCH, CHANNELS, SIZE, SIZE)).astype(np.float32)
    return x, params


def autodiff_step():
    return module_step("autodiff", model, _data)


def torch_step():
    return module_step("torch", model, _data)


def main(repeats: int = 20) -> str:
    title = (
        f"resnet: batch {BATCH} of {CHANNELS}x{SIZE}x{SIZE}, {BLOCKS} residual blocks "
        "(conv3x3, BatchNorm2d, ReLU, conv3x3, BatchNorm2d, + x, ReLU), training mode, "
        "loss mean(out^2), forward + backward"
    )
    return run_against_torch(title, {AUTODIFF: autodiff_step, TORCH: torch_step}, repeats)


if __name__ == "__main__":
    print(main())
