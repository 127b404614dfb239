"""The benchmark cases (mlp, cnn, gru, attention) at any batch size and on any
device: autodiff over a given namespace and PyTorch on a given device, both
from the benchmarks' own weights (``_data()`` of each case's module).

A step returns its loss as an array of the device, never as a float: reading it
back would synchronize, and the GPU checks forbid device-to-host copies."""

from __future__ import annotations

import numpy as np

from .. import attention, cnn, gru, mlp

CASES = ("mlp", "cnn", "gru", "attention")
_MODULES = {"mlp": mlp, "cnn": cnn, "gru": gru, "attention": attention}
# Cases with an optimizer step in the benchmarks (the others are forward + backward).
_LR = {"mlp": mlp.LR, "cnn": cnn.LR}


def default_batch(case: str) -> int:
    """The batch size the CPU benchmark of ``case`` uses."""
    return _MODULES[case].BATCH


def weights(case: str) -> dict:
    """The case's weights as float32 numpy arrays, keyed as its torch module's state dict."""
    data = _MODULES[case]._data()
    return data[-1]


def inputs(case: str, batch: int, seed: int = 1):
    """Host inputs of ``case`` at ``batch``: ``(x, labels)`` for mlp and cnn, ``(x,)`` else."""
    rng = np.random.default_rng(seed)
    if case == "mlp":
        x = rng.standard_normal((batch, mlp.SIZES[0]), dtype=np.float32)
        return x, rng.integers(0, mlp.SIZES[-1], batch)
    if case == "cnn":
        x = rng.standard_normal((batch, 1, 28, 28), dtype=np.float32)
        return x, rng.integers(0, cnn.CLASSES, batch)
    if case == "gru":
        return (rng.standard_normal((gru.STEPS, batch, gru.N_IN), dtype=np.float32),)
    if case == "attention":
        return (rng.standard_normal((batch, attention.SEQ, attention.EMBED), dtype=np.float32),)
    raise ValueError(f"unknown case {case!r}; one of {CASES}")


def _loss(case, model, data, cross_entropy, mean, h0):
    """``loss()``: the scalar of one forward pass of ``case`` over ``data`` (on the
    device), written once for both libraries (their functions passed in)."""
    if case in ("mlp", "cnn"):
        x, y = data
        return lambda: cross_entropy(model(x), y)
    (x,) = data
    if case == "gru":

        def loss():
            h = h0
            for t in range(gru.STEPS):
                h = model(x[t, ...], h)
            return mean(h * h)

        return loss

    def loss():
        out = x + model(x, x, x, need_weights=False)[0]
        return mean(out * out)

    return loss


def _step(model, loss, opt):
    """One training step: zero_grad, loss, backward, and the optimizer's step if any."""

    def step():
        (opt or model).zero_grad()
        value = loss()
        value.backward()
        if opt is not None:
            opt.step()
        return value

    return step


def autodiff_case(case: str, xp, batch: int | None = None):
    """``(model, loss)``: the case's model moved to ``Autodiff(xp)`` and ``loss()``, the
    scalar Tensor of one forward pass over inputs already on the device."""
    import autodiff as ad
    from autodiff import nn
    from autodiff.nn import functional as F

    batch = batch or default_batch(case)
    adx = ad.Autodiff(xp)
    data = [adx.asarray(a) for a in inputs(case, batch)]  # host to device, once
    model = _MODULES[case].model(nn)  # the same builder for autodiff.nn and torch.nn
    model.load_state_dict(weights(case))
    model.to(xp)
    h0 = None
    if case == "gru":
        h0 = adx.zeros((batch, gru.HIDDEN), dtype=adx.float32, device=data[0].device)
    return model, _loss(case, model, data, F.cross_entropy, adx.mean, h0)


def autodiff_step(case: str, xp, batch: int | None = None):
    """One training step of ``case`` on ``Autodiff(xp)`` as in the CPU benchmarks (SGD for
    mlp and cnn, forward + backward for gru and attention); returns the loss Tensor."""
    from autodiff import optim

    model, loss = autodiff_case(case, xp, batch)
    opt = optim.SGD(model.parameters(), lr=_LR[case]) if case in _LR else None
    return _step(model, loss, opt)


def torch_step(case: str, device="cuda", batch: int | None = None):
    """The same step with ``torch.nn`` eager on ``device``; returns the loss tensor."""
    import torch

    from .._case import torch_model

    batch = batch or default_batch(case)
    data = [torch.tensor(a, device=device) for a in inputs(case, batch)]
    model = torch_model(_MODULES[case].model, weights(case)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=_LR[case]) if case in _LR else None
    h0 = torch.zeros(batch, gru.HIDDEN, device=device) if case == "gru" else None
    loss = _loss(case, model, data, torch.nn.functional.cross_entropy, torch.mean, h0)
    return _step(model, loss, opt)
