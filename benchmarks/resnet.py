"""resnet: a small residual CNN, one forward + backward in training mode.

Batch 32 of 16x16x16 float32 images through two basic residual blocks of 16 channels,
each ``relu(bn2(conv2(relu(bn1(conv1(x))))) + x)`` with conv3x3 (padding 1, no bias)
and ``BatchNorm2d`` in training mode (batch statistics; the running statistics are
updated too), loss = mean(out^2), no optimizer step.

autodiff's ``nn`` modules against ``torch.nn``'s, loaded with the same weights
(torch's initialisation, seeded, through the state dict; the BatchNorms' weights and
biases drawn at random instead of 1 and 0), and a hand-written NumPy forward and
backward of the same network: convolutions as im2col and one GEMM each (the
gradients as the two transposed GEMMs and col2im's nine shifted adds), BatchNorm's
fused formulas on per-channel sums, ReLU masks. That floor is what NumPy and its BLAS
can do with whole-array operations; PyTorch's oneDNN convolutions are direct kernels
that no sequence of NumPy calls matches. The loss and every parameter's gradient of
each are checked against PyTorch's before timing.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ._case import AUTODIFF, NUMPY, TORCH
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


def _conv(x, w):
    """conv3x3 (padding 1, no bias) and its windows (C * 9, N * H * W)."""
    n, c, h, wd = x.shape
    v = sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))
    p = np.ascontiguousarray(v.transpose(1, 4, 5, 0, 2, 3)).reshape(c * 9, n * h * wd)
    y = (w.reshape(w.shape[0], -1) @ p).reshape(-1, n, h, wd).transpose(1, 0, 2, 3).copy()
    return y, p


def _conv_back(g, p, w, need_dx):
    """(dx or None, dw) of ``_conv``: dw = G P^T; dx = col2im(W^T G)."""
    o, c = w.shape[:2]
    n, _, h, wd = g.shape
    gm = np.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(o, -1)
    dw = (p @ gm.T).T.reshape(w.shape)
    if not need_dx:
        return None, dw
    dp = (w.reshape(o, -1).T @ gm).reshape(c, 3, 3, n, h, wd)
    dx = np.zeros((c, n, h + 2, wd + 2), g.dtype)
    for i in range(3):
        for j in range(3):
            dx[:, :, i : i + h, j : j + wd] += dp[:, i, j]
    return np.ascontiguousarray(dx[:, :, 1:-1, 1:-1].transpose(1, 0, 2, 3)), dw


def _sum(a):
    """Per channel, over (N, H, W): the batch axis first, then the rest."""
    return a.reshape(a.shape[0], a.shape[1], -1).sum(0).sum(-1)


def _bn(x, w, b, running, momentum=0.1, eps=1e-5):
    """Training-mode BatchNorm2d: the output, x-hat and 1/std; running stats updated."""
    n = x.size // x.shape[1]
    mu = _sum(x) / n
    xc = x - mu[:, None, None]
    var = _sum(xc * xc) / n
    rstd = 1 / np.sqrt(var + np.float32(eps))
    xhat = xc * rstd[:, None, None]
    running[0] = (1 - momentum) * running[0] + momentum * mu
    running[1] = (1 - momentum) * running[1] + momentum * var * (n / (n - 1))
    return xhat * w[:, None, None] + b[:, None, None], xhat, rstd


def _bn_back(g, xhat, rstd, w):
    """(dx, dw, db): dx = rstd w (g - mean(g) - xhat mean(g xhat))."""
    n = g.size // g.shape[1]
    db, dw = _sum(g), _sum(g * xhat)
    c = (rstd * w)[:, None, None]
    return c * (g - (db / n)[:, None, None] - xhat * (dw / n)[:, None, None]), dw, db


def numpy_step():
    """The network's training step by hand (forward, loss, backward), from the same data."""
    x, params = _data()
    running = {k[: -len(".weight")]: [np.zeros(CHANNELS, np.float32),
                                      np.ones(CHANNELS, np.float32)]
               for k in params if ".bn" in k and k.endswith("weight")}  # fmt: skip
    grads = {}

    def step():
        h, saved = x, []
        for b in range(BLOCKS):
            k = f"{b}."
            c1, p1 = _conv(h, params[k + "conv1.weight"])
            a1, xh1, r1 = _bn(c1, params[k + "bn1.weight"], params[k + "bn1.bias"],
                              running[k + "bn1"])  # fmt: skip
            m1 = a1 > 0
            c2, p2 = _conv(a1 * m1, params[k + "conv2.weight"])
            a2, xh2, r2 = _bn(c2, params[k + "bn2.weight"], params[k + "bn2.bias"],
                              running[k + "bn2"])  # fmt: skip
            s = a2 + h
            m2 = s > 0
            saved.append((p1, xh1, r1, m1, p2, xh2, r2, m2))
            h = s * m2
        loss = float(np.mean(h * h))
        g = h * np.float32(2 / h.size)
        for b in reversed(range(BLOCKS)):
            k = f"{b}."
            p1, xh1, r1, m1, p2, xh2, r2, m2 = saved[b]
            gs = g * m2
            gc2, grads[k + "bn2.weight"], grads[k + "bn2.bias"] = _bn_back(
                gs, xh2, r2, params[k + "bn2.weight"]
            )
            ga1, grads[k + "conv2.weight"] = _conv_back(gc2, p2, params[k + "conv2.weight"], True)
            gc1, grads[k + "bn1.weight"], grads[k + "bn1.bias"] = _bn_back(
                ga1 * m1, xh1, r1, params[k + "bn1.weight"]
            )
            gx, grads[k + "conv1.weight"] = _conv_back(gc1, p1, params[k + "conv1.weight"],
                                                       b > 0)  # fmt: skip
            g = gs if gx is None else gs + gx
        return loss

    step.grads = lambda: {k: v.copy() for k, v in grads.items()}
    return step


def main(repeats: int = 20) -> str:
    title = (
        f"resnet: batch {BATCH} of {CHANNELS}x{SIZE}x{SIZE}, {BLOCKS} residual blocks "
        "(conv3x3, BatchNorm2d, ReLU, conv3x3, BatchNorm2d, + x, ReLU), training mode, "
        "loss mean(out^2), forward + backward"
    )
    factories = {AUTODIFF: autodiff_step, NUMPY: numpy_step, TORCH: torch_step}
    return run_against_torch(title, factories, repeats)


if __name__ == "__main__":
    print(main())
