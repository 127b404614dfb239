"""mlp: 784-512-512-10 with ReLU, softmax cross-entropy, batch 128, one SGD step."""

from __future__ import annotations

import numpy as np

from ._case import AUTODIFF, JIT, NUMPY, TORCH, classifier_step, cross_entropy_by_hand, run

SIZES = (784, 512, 512, 10)
BATCH, LR = 128, 0.01


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], BATCH)
    params = {}
    for i, (n_in, n_out) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        bound = 1 / np.sqrt(n_in)
        params[f"{2 * i}.weight"] = rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32)
        params[f"{2 * i}.bias"] = rng.uniform(-bound, bound, n_out).astype(np.float32)
    return x, y, params


def model(nn):
    """The network, from ``autodiff.nn`` or ``torch.nn`` (same names, same layout)."""
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))  # fmt: skip


def autodiff_step():
    return classifier_step("autodiff", _data, model, LR)


def jit_step():
    return classifier_step("autodiff jit", _data, model, LR)


def numpy_step():
    x, y, params = _data()
    Ws = [params[f"{2 * i}.weight"] for i in range(3)]
    bs = [params[f"{2 * i}.bias"] for i in range(3)]

    def step():
        acts, a = [x], x
        for i in range(3):  # forward; keep each layer's input
            z = a @ Ws[i].T
            z += bs[i]
            if i < 2:
                np.maximum(z, 0, out=z)
                acts.append(z)
            a = z
        loss, g = cross_entropy_by_hand(a, y)
        for i in reversed(range(3)):
            gw = g.T @ acts[i]
            gb = g.sum(axis=0)
            if i > 0:
                g = g @ Ws[i]
                g *= acts[i] > 0
            Ws[i] -= LR * gw
            bs[i] -= LR * gb
        return loss

    return step


def torch_step():
    return classifier_step("torch", _data, model, LR)


def main(repeats: int = 50) -> str:
    title = "mlp: 784-512-512-10, ReLU, cross-entropy, batch 128, one SGD step"
    factories = {AUTODIFF: autodiff_step, JIT: jit_step, NUMPY: numpy_step, TORCH: torch_step}
    return run(title, factories, repeats)


if __name__ == "__main__":
    print(main())
