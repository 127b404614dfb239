"""checkpoint: a 16-layer MLP (each layer Linear 512 -> 512, LayerNorm, GELU, Dropout 0.1;
batch 512, float64; loss mean(h^2)), forward + backward, plain and with every layer
wrapped in ``ad.checkpoint``: the peak memory of one step (tracemalloc, started before
the forward) and the time, interleaved. The two gradients are checked bit-identical
first (the same dropout masks: the default generator is seeded before each step)."""

from __future__ import annotations

import statistics

import numpy as np

from ._case import peak_bytes
from ._timing import table, timed

LAYERS, WIDTH, BATCH = 16, 512, 512
PLAIN, CHECKPOINTED = "autodiff (numpy), plain", "autodiff (numpy), checkpointed"


def _layers():
    from autodiff import nn

    nn.init.manual_seed(0)
    D = dict(dtype="float64")
    return [
        nn.Sequential(nn.Linear(WIDTH, WIDTH, **D), nn.LayerNorm(WIDTH, **D), nn.GELU(),
                      nn.Dropout(0.1))
        for _ in range(LAYERS)
    ]  # fmt: skip


def steps():
    """(plain step, checkpointed step, the gradients of the last step): one forward and
    backward of the same layers on the same batch."""
    import autodiff as ad
    from autodiff import nn

    xp = ad.Autodiff(np)
    layers = _layers()
    x = xp.asarray(np.random.default_rng(0).standard_normal((BATCH, WIDTH)))
    wrapped = [ad.checkpoint(layer) for layer in layers]

    def make(fs):
        def step():
            nn.init.manual_seed(1)  # the same dropout masks in both
            for layer in layers:
                layer.zero_grad()
            h = x
            for f in fs:
                h = f(h)
            loss = xp.mean(h * h)
            loss.backward()
            return float(loss)

        return step

    def grads():
        return [np.asarray(p.grad.data) for layer in layers for p in layer.parameters()]

    return make(layers), make(wrapped), grads


def main(repeats: int = 10) -> str:
    plain, checkpointed, grads = steps()
    losses = [plain()]
    expected = grads()
    losses.append(checkpointed())
    for g, e in zip(grads(), expected):
        np.testing.assert_array_equal(g, e, err_msg="checkpointed gradients")
    assert losses[0] == losses[1], losses
    memory = {PLAIN: peak_bytes(plain), CHECKPOINTED: peak_bytes(checkpointed)}
    impls = {PLAIN: plain, CHECKPOINTED: checkpointed}
    times, how = timed(impls, repeats)
    paired = statistics.median(a / b for a, b in zip(times[CHECKPOINTED], times[PLAIN]))
    return "\n".join([
        f"checkpoint: {LAYERS} layers (Linear {WIDTH}, LayerNorm, GELU, Dropout 0.1), batch "
        f"{BATCH}, float64, forward + backward; {repeats} {how}",
        f"loss {losses[0]:.6g} in both; gradients bit-identical",
        "",
        table(times, 1e3, "ms", PLAIN),
        "",
        f"peak MB: plain {memory[PLAIN] / 2**20:.1f}, checkpointed "
        f"{memory[CHECKPOINTED] / 2**20:.1f}; memory checkpointed / plain "
        f"{memory[CHECKPOINTED] / memory[PLAIN]:.2f}; time {paired:.2f} (paired)",
    ])  # fmt: skip


if __name__ == "__main__":
    print(main())
