"""attention: one-head self-attention with a residual, out = x + MHA(x) on x of shape
(16, 64, 64) (batch, sequence, embedding), torch.nn.MultiheadAttention(64, 1,
batch_first=True) semantics, no mask, loss = mean(out^2); forward + backward for the
four weights (in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias), no
optimizer step.

autodiff calls ``nn.MultiheadAttention`` with ``need_weights=False`` (one fused
attention op); hand-written NumPy is the floor: q, k, v from one matmul, batched
matmuls for the scores and the output, a max-subtracted softmax, and the backward pass
by hand (softmax backward a * (da - sum(da * a))); PyTorch calls its module with
``need_weights=False``. The weight gradients of the three are checked equal before
timing."""

from __future__ import annotations

import numpy as np

from ._case import AUTODIFF, JIT, NUMPY, TORCH, check_grads, run, torch_model

BATCH, SEQ, EMBED = 16, 64, 64


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, SEQ, EMBED)).astype(np.float32)
    b_in, b_out = np.sqrt(6 / (4 * EMBED)), 1 / np.sqrt(EMBED)  # xavier, Linear
    params = {
        "in_proj_weight": rng.uniform(-b_in, b_in, (3 * EMBED, EMBED)),
        "in_proj_bias": rng.uniform(-0.1, 0.1, 3 * EMBED),
        "out_proj.weight": rng.uniform(-b_out, b_out, (EMBED, EMBED)),
        "out_proj.bias": rng.uniform(-0.1, 0.1, EMBED),
    }
    return x, {k: v.astype(np.float32) for k, v in params.items()}


def model(nn):
    """The attention block, from ``autodiff.nn`` or ``torch.nn``."""
    return nn.MultiheadAttention(EMBED, 1, batch_first=True)


def autodiff_step(jit=False):
    """autodiff's step; with ``jit``, replayed by ``ad.jit`` (traced twice first)."""
    import autodiff as ad
    from autodiff import nn

    x, params = _data()
    xp = ad.Autodiff(np)
    mha = model(nn)
    mha.load_state_dict(params)
    X = xp.asarray(x)

    def inner(X):
        mha.zero_grad()
        out = X + mha(X, X, X, need_weights=False)[0]
        loss = xp.mean(out * out)
        loss.backward()
        return loss

    run = ad.jit(inner) if jit else inner

    def step():
        return float(run(X).detach())

    step.grads = lambda: {k: np.asarray(p.grad.data) for k, p in mha.named_parameters()}
    return step


def numpy_step():
    x, params = _data()
    w_in, b_in = params["in_proj_weight"], params["in_proj_bias"]
    w_out, b_out = params["out_proj.weight"], params["out_proj.bias"]
    N, L, E = BATCH, SEQ, EMBED
    scale = 1 / np.sqrt(E)
    x2 = x.reshape(N * L, E)
    grads = {}

    def step():
        dqkv = np.empty((N, L, 3 * E), np.float32)  # in the step: its peak memory counts it
        qkv = (x2 @ w_in.T).reshape(N, L, 3 * E)
        qkv += b_in
        q, k, v = qkv[..., :E], qkv[..., E : 2 * E], qkv[..., 2 * E :]
        a = q @ k.transpose(0, 2, 1)
        a *= scale
        a -= a.max(axis=-1, keepdims=True)
        np.exp(a, out=a)
        a /= a.sum(axis=-1, keepdims=True)
        o2 = (a @ v).reshape(N * L, E)
        out = o2 @ w_out.T
        out += b_out
        out += x2
        loss = float(np.mean(out * out))
        dout = out
        dout *= 2 / out.size
        grads["out_proj.weight"] = dout.T @ o2
        grads["out_proj.bias"] = dout.sum(axis=0)
        do = (dout @ w_out).reshape(N, L, E)
        da = do @ v.transpose(0, 2, 1)
        np.matmul(a.transpose(0, 2, 1), do, out=dqkv[..., 2 * E :])  # dv
        da -= (da * a).sum(axis=-1, keepdims=True)
        da *= a
        da *= scale  # d scores, scaled
        np.matmul(da, k, out=dqkv[..., :E])  # dq
        np.matmul(da.transpose(0, 2, 1), q, out=dqkv[..., E : 2 * E])  # dk
        d2 = dqkv.reshape(N * L, 3 * E)
        grads["in_proj_weight"] = d2.T @ x2
        grads["in_proj_bias"] = d2.sum(axis=0)
        return loss

    step.grads = lambda: dict(grads)
    return step


def torch_step():
    import torch

    x, params = _data()
    mha = torch_model(model, params)
    X = torch.tensor(x)

    def step():
        mha.zero_grad()
        out = X + mha(X, X, X, need_weights=False)[0]
        loss = (out * out).mean()
        loss.backward()
        return loss.item()

    step.grads = lambda: {k: p.grad.numpy().copy() for k, p in mha.named_parameters()}
    return step


def main(repeats: int = 20) -> str:
    title = (
        f"attention: x + MHA(x), one head, x ({BATCH}, {SEQ}, {EMBED}), loss mean(out^2), "
        "forward + backward"
    )
    factories = {AUTODIFF: autodiff_step, JIT: lambda: autodiff_step(jit=True),
                 NUMPY: numpy_step, TORCH: torch_step}  # fmt: skip
    check_grads(factories)
    return run(title, factories, repeats)


if __name__ == "__main__":
    print(main())
