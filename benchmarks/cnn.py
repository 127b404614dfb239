"""cnn: a small LeNet-style network on MNIST-sized images, one SGD step.

Batch 32 of 1x28x28 float32 images: conv3x3 1->16 (padding 1), ReLU, max-pool 2x2,
conv3x3 16->32 (padding 1), ReLU, max-pool 2x2, flatten, linear 1568->10, mean
cross-entropy with integer labels, one SGD step (lr 0.01).

All three implementations start from the same weights, drawn once in ``_data`` in
torch's layouts and with torch's default bounds (U(-1/sqrt(fan_in), 1/sqrt(fan_in))):

- autodiff: ``autodiff.nn.Sequential`` of the torch-like layers, ``optim.SGD``;
- hand-written NumPy, the floor: only the arithmetic. It works channels-last (NHWC),
  where the convolution matmul lands: each convolution is one im2col copy of a
  ``sliding_window_view`` of a zero-padded buffer, ordered (kh, kw, C) so the copy
  runs over contiguous channels, and one BLAS matmul; the weights are permuted to that
  layout once at setup (the linear weight to the NHWC flatten order) and updated in
  place. Max-pool 2x2 is a reshape (N, H/2, 2, W/2, 2, C) with a mask of the first
  maximum of each window (as torch); the ReLU backward is fused into the pool backward
  (the chosen input is positive iff the pooled value is). The second convolution's
  input gradient is one matmul to columns, then col2im as 9 shifted slice-adds; the
  first convolution computes no input gradient;
- PyTorch CPU: ``torch.nn`` with the same layers and weights, ``torch.optim.SGD``.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ._case import AUTODIFF, NUMPY, TORCH, classifier_step, cross_entropy_by_hand, run

BATCH, LR = 32, 0.01
C1, C2, CLASSES = 16, 32, 10
FLAT = C2 * 7 * 7  # 1568


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, CLASSES, BATCH)
    params = {}
    for name, wshape, fan_in in (
        ("0", (C1, 1, 3, 3), 9),
        ("3", (C2, C1, 3, 3), C1 * 9),
        ("7", (CLASSES, FLAT), FLAT),
    ):
        bound = 1 / np.sqrt(fan_in)
        params[f"{name}.weight"] = rng.uniform(-bound, bound, wshape).astype(np.float32)
        params[f"{name}.bias"] = rng.uniform(-bound, bound, wshape[0]).astype(np.float32)
    return x, y, params


def model(nn):
    """The network, from ``autodiff.nn`` or ``torch.nn`` (same names, same layout)."""
    return nn.Sequential(nn.Conv2d(1, C1, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(C1, C2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(FLAT, CLASSES))  # fmt: skip


def autodiff_step():
    return classifier_step("autodiff", _data, model, LR)


def _pool_forward(a):
    """2x2 max-pool of NHWC ``a``: the pooled values and the first-maximum masks of
    the window positions (0, 0), (0, 1), (1, 0), (1, 1)."""
    n, h, w, c = a.shape
    r = a.reshape(n, h // 2, 2, w // 2, 2, c)
    q = [r[:, :, i, :, j, :] for i in (0, 1) for j in (0, 1)]
    m = np.maximum(np.maximum(q[0], q[1]), np.maximum(q[2], q[3]))
    first = q[0] == m
    masks, seen = [first], first.copy()
    for k in (1, 2):
        hit = q[k] == m
        hit &= ~seen
        seen |= hit
        masks.append(hit)
    masks.append(~seen)
    return m, masks


def _pool_relu_backward(g, m, masks):
    """Gradient at the (pre-ReLU) input of ReLU + 2x2 max-pool, given the gradient
    ``g`` at the pooled output: the first maximum of a window gets it if positive."""
    n, h2, w2, c = g.shape
    g = g * (m > 0)
    out = np.empty((n, h2, 2, w2, 2, c), dtype=g.dtype)
    for k, mask in enumerate(masks):
        np.multiply(g, mask, out=out[:, :, k // 2, :, k % 2, :])
    return out.reshape(n * h2 * 2 * w2 * 2, c)


def numpy_step():
    x, y, params = _data()
    # weights in the channels-last / (kh, kw, C) column layouts, updated in place
    W1 = params["0.weight"].transpose(0, 2, 3, 1).reshape(C1, 9).copy()
    W2 = params["3.weight"].transpose(0, 2, 3, 1).reshape(C2, 9 * C1).copy()
    W3 = params["7.weight"].reshape(CLASSES, C2, 7, 7).transpose(0, 2, 3, 1)
    W3 = W3.reshape(CLASSES, FLAT).copy()
    b1, b2, b3 = (params[f"{k}.bias"].copy() for k in "037")
    pad1 = np.zeros((BATCH, 30, 30), np.float32)  # borders stay zero
    pad2 = np.zeros((BATCH, 16, 16, C1), np.float32)

    def step():
        # conv1 (C = 1): im2col (N*28*28, 9), one matmul -> NHWC
        pad1[:, 1:29, 1:29] = x[:, 0]
        cols1 = sliding_window_view(pad1, (3, 3), axis=(1, 2)).reshape(-1, 9)
        z1 = cols1 @ W1.T
        z1 += b1
        np.maximum(z1, 0, out=z1)
        p1, masks1 = _pool_forward(z1.reshape(BATCH, 28, 28, C1))
        # conv2: im2col (N*14*14, 3*3*16), one matmul
        pad2[:, 1:15, 1:15] = p1
        win = sliding_window_view(pad2, (3, 3), axis=(1, 2))  # (N, 14, 14, C, 3, 3)
        cols2 = win.transpose(0, 1, 2, 4, 5, 3).reshape(-1, 9 * C1)
        z2 = cols2 @ W2.T
        z2 += b2
        np.maximum(z2, 0, out=z2)
        p2, masks2 = _pool_forward(z2.reshape(BATCH, 14, 14, C2))
        flat = p2.reshape(BATCH, FLAT)
        a = flat @ W3.T
        a += b3
        loss, g = cross_entropy_by_hand(a, y)
        # backward
        gW3 = g.T @ flat
        gb3 = g.sum(axis=0)
        gflat = g @ W3
        gz2 = _pool_relu_backward(gflat.reshape(BATCH, 7, 7, C2), p2, masks2)
        gW2 = gz2.T @ cols2
        gb2 = gz2.sum(axis=0)
        gcols = (gz2 @ W2).reshape(BATCH, 14, 14, 3, 3, C1)
        gpad = np.zeros((BATCH, 16, 16, C1), np.float32)
        for i in range(3):  # col2im
            for j in range(3):
                gpad[:, i : i + 14, j : j + 14] += gcols[:, :, :, i, j]
        gz1 = _pool_relu_backward(gpad[:, 1:15, 1:15], p1, masks1)
        gW1 = gz1.T @ cols1
        gb1 = gz1.sum(axis=0)
        for p, gp in ((W1, gW1), (b1, gb1), (W2, gW2), (b2, gb2), (W3, gW3), (b3, gb3)):
            p -= LR * gp
        return loss

    return step


def torch_step():
    return classifier_step("torch", _data, model, LR)


def main(repeats: int = 20) -> str:
    title = (
        "cnn: batch 32 of 1x28x28, conv3x3 1->16, ReLU, maxpool 2, conv3x3 16->32, ReLU, "
        "maxpool 2, linear 1568->10, cross-entropy, one SGD step"
    )
    return run(title, {AUTODIFF: autodiff_step, NUMPY: numpy_step, TORCH: torch_step}, repeats)


if __name__ == "__main__":
    print(main())
