"""gru: a GRU cell (input 64, hidden 128, batch 32) unrolled over 50 steps of a random
input sequence from h_0 = 0, loss = mean(h_T^2); forward + backward (backpropagation
through time) for the four weights, no optimizer step.

autodiff loops ``nn.GRUCell`` (one fused op per step); hand-written NumPy is the floor
a careful programmer writes: x @ W_ih^T for all steps in one matmul (the inputs need no
gradient), the gates kept from the forward pass, and the weight gradients from the
stacked per-step gate gradients in one matmul each; PyTorch loops ``torch.nn.GRUCell``.
The weight gradients of the three are checked equal before timing."""

from __future__ import annotations

import numpy as np

from ._case import AUTODIFF, JIT, NUMPY, TORCH, check_grads, run, torch_model

STEPS, BATCH, N_IN, HIDDEN = 50, 32, 64, 128
NAMES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((STEPS, BATCH, N_IN)).astype(np.float32)
    bound, g = 1 / np.sqrt(HIDDEN), 3 * HIDDEN
    shapes = {"weight_ih": (g, N_IN), "weight_hh": (g, HIDDEN), "bias_ih": (g,), "bias_hh": (g,)}
    params = {k: rng.uniform(-bound, bound, s).astype(np.float32) for k, s in shapes.items()}
    return x, params


def model(nn):
    """The cell, from ``autodiff.nn`` or ``torch.nn``."""
    return nn.GRUCell(N_IN, HIDDEN)


def autodiff_step(jit=False):
    """autodiff's step; with ``jit``, replayed by ``ad.jit`` (traced twice first)."""
    import autodiff as ad
    from autodiff import nn

    x, params = _data()
    xp = ad.Autodiff(np)
    cell = model(nn)
    cell.load_state_dict(params)
    X = xp.asarray(x)
    h0 = xp.zeros((BATCH, HIDDEN), dtype=xp.float32)

    def inner(X):
        cell.zero_grad()
        h = h0
        for t in range(STEPS):
            h = cell(X[t], h)
        loss = xp.mean(h * h)
        loss.backward()
        return loss

    run = ad.jit(inner) if jit else inner

    def step():
        return float(run(X).detach())

    step.grads = lambda: {k: np.asarray(p.grad.data) for k, p in cell.named_parameters()}
    return step


def numpy_step():
    x, params = _data()
    w_ih, w_hh, b_ih, b_hh = (params[k] for k in NAMES)
    H, T, B = HIDDEN, STEPS, BATCH
    x2 = x.reshape(T * B, N_IN)
    w_hh_t = np.ascontiguousarray(w_hh.T)
    grads = {}

    def step():
        # Buffers are made in the step, so that its peak memory counts them.
        hs = np.zeros((T + 1, B, H), np.float32)  # h_0 .. h_T
        rz = np.empty((T, B, 2 * H), np.float32)  # sigmoid gates r, z
        ns = np.empty((T, B, H), np.float32)  # tanh gate n
        hn = np.empty((T, B, H), np.float32)  # W_hn h + b_hn
        dgi = np.empty((T, B, 3 * H), np.float32)  # d pre-activations, input side
        dgh = np.empty((T, B, 3 * H), np.float32)  # hidden side (n part times r)
        gi = (x2 @ w_ih.T).reshape(T, B, 3 * H)
        gi += b_ih
        for t in range(T):
            h = hs[t]
            gh = h @ w_hh_t
            gh += b_hh
            a = rz[t]
            np.add(gi[t, :, : 2 * H], gh[:, : 2 * H], out=a)
            np.negative(a, out=a)  # sigmoid = 1 / (1 + exp(-a))
            np.exp(a, out=a)
            a += 1
            np.reciprocal(a, out=a)
            hn[t] = gh[:, 2 * H :]
            n = np.multiply(a[:, :H], hn[t], out=ns[t])
            n += gi[t, :, 2 * H :]
            np.tanh(n, out=n)
            nxt = np.subtract(h, n, out=hs[t + 1])  # h' = n + z (h - n)
            nxt *= a[:, H:]
            nxt += n
        hT = hs[T]
        loss = float(np.mean(hT * hT))
        dh = hT * (2.0 / hT.size)
        for t in reversed(range(T)):
            r, z, n = rz[t, :, :H], rz[t, :, H:], ns[t]
            d = dgi[t]
            dn = np.multiply(dh, 1 - z, out=d[:, 2 * H :])
            dn *= 1 - n * n  # d pre-n
            dz = np.subtract(hs[t], n, out=d[:, H : 2 * H])
            dz *= dh
            dz *= z * (1 - z)
            dr = np.multiply(dn, hn[t], out=d[:, :H])
            dr *= r * (1 - r)
            e = dgh[t]
            e[:, : 2 * H] = d[:, : 2 * H]
            np.multiply(dn, r, out=e[:, 2 * H :])
            dh *= z
            dh += e @ w_hh
        dgi2, dgh2 = dgi.reshape(T * B, 3 * H), dgh.reshape(T * B, 3 * H)
        grads["weight_ih"] = dgi2.T @ x2
        grads["weight_hh"] = dgh2.T @ hs[:T].reshape(T * B, H)
        grads["bias_ih"] = dgi2.sum(axis=0)
        grads["bias_hh"] = dgh2.sum(axis=0)
        return loss

    step.grads = lambda: dict(grads)
    return step


def torch_step():
    import torch

    x, params = _data()
    cell = torch_model(model, params)
    X = torch.tensor(x)
    h0 = torch.zeros(BATCH, HIDDEN)

    def step():
        cell.zero_grad()
        h = h0
        for t in range(STEPS):
            h = cell(X[t], h)
        loss = (h * h).mean()
        loss.backward()
        return loss.item()

    step.grads = lambda: {k: p.grad.numpy().copy() for k, p in cell.named_parameters()}
    return step


def _layer_names(k):
    return k.replace("_l0", "")


def autodiff_layer_step():
    """The same computation with ``nn.GRU`` (one op for the whole sequence)."""
    import autodiff as ad
    from autodiff import nn

    x, params = _data()
    xp = ad.Autodiff(np)
    gru = nn.GRU(N_IN, HIDDEN)
    gru.load_state_dict({f"{k}_l0": v for k, v in params.items()})
    X = xp.asarray(x)

    def step():
        gru.zero_grad()
        out, _ = gru(X)
        h = out[-1]
        loss = xp.mean(h * h)
        loss.backward()
        return float(loss)

    step.grads = lambda: {
        _layer_names(k): np.asarray(p.grad.data) for k, p in gru.named_parameters()
    }
    return step


def torch_layer_step():
    """``torch.nn.GRU`` (PyTorch's fused sequence kernel)."""
    import torch

    x, params = _data()
    gru = torch_model(lambda nn: nn.GRU(N_IN, HIDDEN), {f"{k}_l0": v for k, v in params.items()})
    X = torch.tensor(x)

    def step():
        gru.zero_grad()
        out, _ = gru(X)
        loss = (out[-1] ** 2).mean()
        loss.backward()
        return loss.item()

    step.grads = lambda: {_layer_names(k): p.grad.numpy().copy() for k, p in gru.named_parameters()}
    return step


def main(repeats: int = 20) -> str:
    title = (
        f"gru: GRU cell {N_IN}->{HIDDEN}, batch {BATCH}, {STEPS} steps, loss mean(h_T^2), "
        "forward + backward"
    )
    factories = {AUTODIFF: autodiff_step, JIT: lambda: autodiff_step(jit=True),
                 NUMPY: numpy_step, TORCH: torch_step,
                 "autodiff, nn.GRU": autodiff_layer_step,
                 "PyTorch CPU, nn.GRU": torch_layer_step}  # fmt: skip
    check_grads(factories)
    return run(title, factories, repeats)


if __name__ == "__main__":
    print(main())
