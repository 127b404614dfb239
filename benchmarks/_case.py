"""One training-step case: the implementations agree on the loss, then run
interleaved; medians, min/max, ratios to hand-written NumPy and to PyTorch, and
the peak memory of one step (tracemalloc sees NumPy's arrays, not PyTorch's)."""

from __future__ import annotations

import statistics
import tracemalloc

import numpy as np

from ._timing import ALONE, table, timed
from .threads import limit_threads

AUTODIFF, NUMPY, TORCH = "autodiff (numpy)", "hand-written NumPy", "PyTorch CPU"
JIT = "autodiff jit (numpy)"
SKIP: set = set()  # implementations left out (``--without torch``)


def sgd_step(model, opt, cross_entropy, X, Y, jit=False):
    """One training step (zero_grad, cross-entropy, backward, SGD step) of either
    library: autodiff's and PyTorch's modules and optimizers have the same API. With
    ``jit``, the step is autodiff's ``ad.jit`` of it (traced twice, then replayed)."""

    def inner(X, Y):
        opt.zero_grad()
        loss = cross_entropy(model(X), Y)
        loss.backward()
        opt.step()
        return loss

    if jit:
        import autodiff as ad

        inner = ad.jit(inner)

    def step():
        return float(inner(X, Y).detach())

    return step


def cross_entropy_by_hand(a, y):
    """The hand-written floors' softmax cross-entropy of logits ``a`` (N, C) against
    labels ``y``: the mean loss as a float, and its gradient (softmax - onehot) / N."""
    n = a.shape[0]
    rows = np.arange(n)
    m = a.max(axis=1, keepdims=True)
    e = np.exp(a - m)
    s = e.sum(axis=1, keepdims=True)
    loss = float(np.mean(np.log(s[:, 0]) + m[:, 0] - a[rows, y]))
    g = e / s
    g[rows, y] -= 1
    g /= n
    return loss, g


def torch_model(model, params):
    """``model(torch.nn)`` loaded with ``params`` (NumPy arrays, torch's state-dict keys)."""
    import torch

    net = model(torch.nn)
    net.load_state_dict({k: torch.tensor(v) for k, v in params.items()})
    return net


def classifier_step(library, data, model, lr):
    """One SGD step of the classifier ``model(nn)`` on ``data()``'s batch and weights,
    with ``library`` "autodiff" (on NumPy), "autodiff jit" (replayed by ``ad.jit``) or
    "torch": the same modules, optimizer and loss, from the same builder."""
    x, y, params = data()
    if library == "torch":
        import torch

        net, optim = torch_model(model, params), torch.optim
        loss, to = torch.nn.functional.cross_entropy, torch.tensor
    else:
        import autodiff as ad
        from autodiff import nn, optim
        from autodiff.nn import functional as F

        net = model(nn)
        net.load_state_dict(params)
        loss, to = F.cross_entropy, ad.Autodiff(np).asarray
    opt = optim.SGD(net.parameters(), lr=lr)
    return sgd_step(net, opt, loss, to(x), to(y), jit=library == "autodiff jit")


def peak_bytes(step) -> int:
    """Peak memory allocated during one call of ``step``, beyond what was live before."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        step()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def run(title: str, factories: dict, repeats: int, *, rtol=1e-4, scale=1e3, unit="ms") -> str:
    """Build each implementation (``factories[name]()`` -> a step returning the loss
    as a float), check the losses of two steps agree, then time them interleaved (or
    each alone, in blocks, with ``--alone``)."""
    limit_threads(2)
    impls = {}
    for name, make in factories.items():
        if name in SKIP or (TORCH in SKIP and name.startswith("PyTorch")):
            continue
        try:
            impls[name] = make()
        except ImportError:
            pass
    losses = {name: [step(), step()] for name, step in impls.items()}
    for name, got in losses.items():
        np.testing.assert_allclose(got, losses[NUMPY], rtol=rtol,
                                   err_msg=f"{name}: loss of steps 1 and 2")  # fmt: skip
    memory = {name: peak_bytes(step) for name, step in impls.items() if "PyTorch" not in name}
    times, how = timed(impls, repeats)
    med = {k: statistics.median(v) for k, v in times.items()}
    lines = [
        f"{title}; {repeats} {how}, 2 threads, float32",
        f"loss after steps 1 and 2: {losses[NUMPY][0]:.6g}, {losses[NUMPY][1]:.6g} "
        f"(all agree to rtol {rtol:g})",
        "",
        f"| implementation | median {unit} | min | max | / NumPy | / PyTorch | paired / NumPy "
        "| peak MB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k, v in times.items():
        vs_torch = f"{med[k] / med[TORCH]:.2f}" if TORCH in med else "-"
        mb = f"{memory[k] / 2**20:.1f}" if k in memory else "-"
        # the median over rounds of this implementation's time over NumPy's in the same
        # round: neighbours in time share the machine's state (interleaved runs only)
        paired = "-"
        if not ALONE:
            paired = f"{statistics.median(a / b for a, b in zip(v, times[NUMPY])):.2f}"
        lines.append(
            f"| {k} | {med[k] * scale:.2f} | {min(v) * scale:.2f} | {max(v) * scale:.2f} "
            f"| {med[k] / med[NUMPY]:.2f} | {vs_torch} | {paired} | {mb} |"
        )
    if AUTODIFF in memory and memory[NUMPY]:
        lines.append(f"\npeak memory autodiff / NumPy: {memory[AUTODIFF] / memory[NUMPY]:.2f}")
    return "\n".join(lines)


def per_op(title: str, factories: dict, repeats: int, ops: int) -> tuple[dict, str]:
    """A per-op case (chain, where): build each implementation (``factories[name]()`` ->
    a forward and backward returning the input's gradient), check they agree with
    hand-written NumPy's to 1e-12, time them; (times, the report in µs per op)."""
    impls = {}
    for name, make in factories.items():
        if name in SKIP:
            continue
        try:
            impls[name] = make()
        except ImportError:
            pass
    ref = impls[NUMPY]()
    for name, f in impls.items():
        np.testing.assert_allclose(f(), ref, rtol=1e-12, err_msg=name)
    times, how = timed(impls, repeats)
    report = f"{title}; {repeats} {how}\n\n" + table(times, 1e6 / ops, "µs per op", NUMPY)
    return times, report


def check_grads(factories: dict, rtol: float = 1e-3) -> None:
    """One step of each implementation; their weight gradients agree with NumPy's to
    ``rtol`` times the largest |gradient| of each weight."""
    got = {}
    for name, make in factories.items():
        if name in SKIP or (TORCH in SKIP and name.startswith("PyTorch")):
            continue
        try:
            step = make()
        except ImportError:
            continue
        step()
        got[name] = step.grads()
    ref = got[NUMPY]
    for name, grads in got.items():
        assert sorted(grads) == sorted(ref), f"{name}: gradients of {sorted(grads)}"
        for k, g in grads.items():
            tol = rtol * float(np.abs(ref[k]).max())
            np.testing.assert_allclose(g, ref[k], rtol=0, atol=tol, err_msg=f"{name}: d {k}")
