"""transformer: one forward + backward of one ``nn.TransformerEncoderLayer(d_model=64,
nhead=4, dim_feedforward=256, dropout=0.0, batch_first=True)`` (post-norm, ReLU) on x
of shape (16, 32, 64) float32, loss = mean(out^2) (MSE to zero), no optimizer step.

autodiff's ``nn.TransformerEncoderLayer`` against ``torch.nn``'s, loaded with the same
weights (torch's initialisation, seeded, through the state dict; the two LayerNorms'
weights and biases drawn at random instead of torch's 1 and 0, under which mean(out^2)
of a post-norm layer is a constant and its gradients are rounding noise). There is no
hand-written NumPy floor here: the backward of multi-head attention, two LayerNorms
and the feed-forward block by hand would be a second implementation as large as the
module itself; the ratio is to PyTorch CPU. The loss and every parameter's gradient
are checked against PyTorch's before timing."""

from __future__ import annotations

import statistics

import numpy as np

from ._case import AUTODIFF, NUMPY, SKIP, TORCH
from ._timing import table, timed
from .threads import limit_threads

BATCH, SEQ, D_MODEL, NHEAD, D_FF = 16, 32, 64, 4, 256


def _data():
    import torch

    torch.manual_seed(0)
    params = {k: v.detach().numpy().copy() for k, v in model(torch.nn).state_dict().items()}
    rng = np.random.default_rng(0)
    for k in ("norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"):
        # LayerNorm's default (1, 0) makes mean(out^2) of the post-norm output a constant
        # (1 - eps terms): every gradient before norm2 would be rounding noise
        params[k] = (rng.uniform(0.5, 1.5, D_MODEL) if k.endswith("weight")
                     else rng.uniform(-0.5, 0.5, D_MODEL)).astype(np.float32)  # fmt: skip
    x = rng.standard_normal((BATCH, SEQ, D_MODEL)).astype(np.float32)
    return x, params


def model(nn):
    """The encoder layer, from ``autodiff.nn`` or ``torch.nn``."""
    return nn.TransformerEncoderLayer(D_MODEL, NHEAD, dim_feedforward=D_FF, dropout=0.0,
                                      batch_first=True)  # fmt: skip


def module_step(library, module, data, params=None):
    """A step (zero_grad, forward, mean(out^2), backward; returns the loss) of the
    ``module(nn)`` of ``library`` ("autodiff" on NumPy, or "torch") on ``data()``'s
    input and state dict; ``step.grads()`` gives each parameter's gradient."""
    x, params = data()
    if library == "torch":
        import torch

        net = module(torch.nn)
        net.load_state_dict({k: torch.tensor(v) for k, v in params.items()})
        X = torch.tensor(x)
        grad = lambda p: p.grad.numpy().copy()  # noqa: E731
        mean = torch.mean
    else:
        import autodiff as ad
        from autodiff import nn

        net = module(nn)
        net.load_state_dict(params)
        xp = ad.Autodiff(np)
        X, mean = xp.asarray(x), xp.mean
        grad = lambda p: np.asarray(p.grad.data).copy()  # noqa: E731
    net.train()

    def step():
        net.zero_grad()
        out = net(X)
        loss = mean(out * out)
        loss.backward()
        return float(loss.detach())

    step.grads = lambda: {k: grad(p) for k, p in net.named_parameters()}
    return step


def run_against_torch(title: str, factories: dict, repeats: int, rtol=1e-3) -> str:
    """Build each step; check the first step's losses (to 1e-5 relative) and all
    parameter gradients (to ``rtol`` times each parameter's largest |gradient|) of
    autodiff against PyTorch; then time them (interleaved, or ``--alone``)."""
    limit_threads(2)
    impls = {}
    for name, make in factories.items():
        if name in SKIP:
            continue
        try:
            impls[name] = make()
        except ImportError:
            pass
    losses = {name: step() for name, step in impls.items()}
    grads = {name: step.grads() for name, step in impls.items()}
    if TORCH in impls:
        ref = grads[TORCH]
        for name in impls:
            np.testing.assert_allclose(losses[name], losses[TORCH], rtol=1e-5, err_msg=name)
            assert sorted(grads[name]) == sorted(ref), (name, sorted(grads[name]))
            for k, g in grads[name].items():
                tol = rtol * float(np.abs(ref[k]).max())
                np.testing.assert_allclose(g, ref[k], rtol=rtol, atol=tol,
                                           err_msg=f"{name}: d {k}")  # fmt: skip
    times, how = timed(impls, repeats)
    base = TORCH if TORCH in times else AUTODIFF
    report = (f"{title}; {repeats} {how}, 2 threads, float32\n"
              f"loss {losses[AUTODIFF]:.6g}; loss and {len(grads[AUTODIFF])} parameter "
              f"gradients checked against PyTorch\n\n"
              + table(times, 1e3, "ms", base))  # fmt: skip
    if NUMPY in times and base != NUMPY:
        paired = statistics.median(a / b for a, b in zip(times[AUTODIFF], times[NUMPY]))
        report += f"\n\nautodiff / hand-written NumPy: {paired:.2f} (paired median)"
    return report


def autodiff_step():
    return module_step("autodiff", model, _data)


def torch_step():
    return module_step("torch", model, _data)


def main(repeats: int = 20) -> str:
    title = (
        f"transformer: TransformerEncoderLayer({D_MODEL}, {NHEAD}, {D_FF}, dropout 0), "
        f"x ({BATCH}, {SEQ}, {D_MODEL}), loss mean(out^2), forward + backward"
    )
    return run_against_torch(title, {AUTODIFF: autodiff_step, TORCH: torch_step}, repeats)


if __name__ == "__main__":
    print(main())
