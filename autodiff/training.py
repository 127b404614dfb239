"""A training loop for notebooks: ``fit`` with a progress bar, minibatches, the
loss history and its plot.

    from autodiff.training import batches, fit
    history = fit(model, F.cross_entropy, opt, batches(X, y, batch_size=64), epochs=10)
    history.plot()

The loop is the one a PyTorch user writes (zero_grad, forward, loss, backward,
step); losses stay on the device and are read to the host once per
``log_every`` steps and once per epoch, so the GPU is not synchronized every step.
"""

from __future__ import annotations

import math
import time

from .engine.grad_mode import no_grad
from .optim import clip_grad_norm_

__all__ = ["batches", "fit", "History", "plot_losses"]


class batches:
    """Minibatches (tuples, one slice per array) of arrays that share a first axis.

    Iterate it once per epoch: with ``shuffle`` each pass takes a fresh permutation
    (reproducible with ``seed``; else from the generator of
    ``autodiff.nn.init.manual_seed``), drawn on the host and sent to the arrays'
    device once, so batches are taken on the device, never through the host.
    ``len()`` is the number of batches.
    """

    def __init__(self, *arrays, batch_size, shuffle=True, seed=None, drop_last=False):
        import numpy as np

        if not arrays:
            raise ValueError("batches: give at least one array")
        n = arrays[0].shape[0]
        for a in arrays[1:]:
            if a.shape[0] != n:
                raise ValueError(
                    f"batches: arrays must share their first axis, got {n} and {a.shape[0]}"
                )
        if batch_size < 1:
            raise ValueError(f"batches: batch_size must be positive, got {batch_size}")
        self.arrays, self.n, self.batch_size = arrays, n, batch_size
        self.shuffle, self.drop_last = shuffle, drop_last
        self.generator = np.random.default_rng(seed) if seed is not None else None

    def __len__(self):
        full, rest = divmod(self.n, self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def __iter__(self):
        import array_api_compat
        import numpy as np

        from .nn.init import default_generator

        if self.shuffle:
            order = (self.generator or default_generator()).permutation(self.n)
        else:
            order = np.arange(self.n)
        stop = self.n - self.n % self.batch_size if self.drop_last else self.n
        xps = [array_api_compat.array_namespace(a) for a in self.arrays]
        idx = [
            xp.asarray(order, device=array_api_compat.device(a)) for xp, a in zip(xps, self.arrays)
        ]
        for start in range(0, stop, self.batch_size):
            end = min(start + self.batch_size, stop)
            yield tuple(xp.take(a, i[start:end], axis=0) for xp, a, i in zip(xps, self.arrays, idx))


class History:
    """Losses of every step, the mean loss of each epoch, and per-epoch metrics."""

    def __init__(self):
        self.losses = []
        self.epoch_losses = []
        self.metrics = {}
        self.seconds = 0.0

    def __repr__(self):
        last = f"{self.epoch_losses[-1]:.4g}" if self.epoch_losses else "-"
        extra = "".join(f", {k}={v[-1]:.4g}" for k, v in self.metrics.items() if v)
        return f"History(epochs={len(self.epoch_losses)}, loss={last}{extra})"

    def plot(self, ax=None, logy=True):
        """Plot the step losses, the epoch means and the metrics (matplotlib)."""
        ax = plot_losses({"step loss": self.losses}, ax=ax, logy=logy)
        if self.epoch_losses and self.losses:
            per = len(self.losses) / len(self.epoch_losses)
            xs = [per * (i + 1) for i in range(len(self.epoch_losses))]
            ax.plot(xs, self.epoch_losses, "o-", label="epoch mean")
        if self.metrics:
            ax2 = ax.twinx()
            per = len(self.losses) / max(len(self.epoch_losses), 1)
            for name, values in self.metrics.items():
                xs = [per * (i + 1) for i in range(len(values))]
                ax2.plot(xs, values, "s--", label=name, color="tab:green")
            ax2.set_ylabel(", ".join(self.metrics))
            ax2.legend(loc="center right")
        ax.legend(loc="upper right")
        return ax


def plot_losses(curves, ax=None, logy=True):
    """Plot loss curves: ``{name: [loss, ...]}`` (or one list) against the step."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    if not isinstance(curves, dict):
        curves = {"loss": curves}
    for name, values in curves.items():
        ax.plot(range(1, len(values) + 1), list(values), label=name, alpha=0.8)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    if logy and all(v > 0 for vs in curves.values() for v in vs):
        ax.set_yscale("log")
    ax.legend()
    return ax


def _floats(xp, scalars):
    """Host floats of a list of 0-d tensors: one transfer for all of them."""
    if not scalars:
        return []
    values = xp.stack([xp.astype(s, xp.float64) for s in scalars])
    from .io import to_host

    return [float(v) for v in to_host(values.data).tolist()]


def fit(model, loss_fn, optimizer, data, *, epochs=1, scheduler=None, evaluate=None,
        clip_grad_norm=None, progress=True, log_every=10, history=None,
        jit=False):  # fmt: skip
    """Train ``model``: for each batch ``(x, y)``, ``loss = loss_fn(model(x), y)``,
    backward and ``optimizer.step()``.

    ``data`` is iterated once per epoch: ``batches(X, y, batch_size=64)`` (which
    reshuffles each pass), a list of batches, or a function returning an epoch's.
    A scheduler, if given, steps once per epoch. ``clip_grad_norm=c`` rescales the
    gradients to a total 2-norm of at most ``c`` before each step.
    ``evaluate(model)`` may return a dict of metrics, recorded each epoch (in eval
    mode, without gradients). Returns a ``History`` (pass one to continue it).
    The progress bar is ``tqdm.auto``: a widget in notebooks, text in a terminal.
    ``jit=True`` runs each step through ``ad.jit`` (recorded once per batch shape and
    state, then replayed): the same losses and parameters as without.
    """
    from tqdm.auto import tqdm

    def one_step(x, y):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        if clip_grad_norm is not None:
            clip_grad_norm_(model.parameters(), clip_grad_norm)
        optimizer.step()
        return loss

    if jit:
        from .transforms.jit import jit as _jit

        one_step = _jit(one_step)
    history = History() if history is None else history
    start = time.perf_counter()
    for epoch in range(epochs):
        epoch_data = data() if callable(data) else data
        total = len(epoch_data) if hasattr(epoch_data, "__len__") else None
        bar = tqdm(epoch_data, total=total, disable=not progress, leave=True,
                   desc=f"epoch {epoch + 1}/{epochs}")  # fmt: skip
        model.train()
        losses = []
        xp = None
        for step, (x, y) in enumerate(bar):
            loss = one_step(x, y)
            losses.append(loss.detach())
            xp = loss.__array_namespace__()
            if progress and (step + 1) % log_every == 0:
                bar.set_postfix(loss=f"{float(losses[-1]):.4g}")
        values = _floats(xp, losses)
        history.losses.extend(values)
        mean = sum(values) / len(values) if values else math.nan
        history.epoch_losses.append(mean)
        if scheduler is not None:
            scheduler.step()
        post = {"loss": f"{mean:.4g}"}
        if evaluate is not None:
            model.eval()
            with no_grad():
                metrics = evaluate(model) or {}
            model.train()
            for k, v in metrics.items():
                history.metrics.setdefault(k, []).append(float(v))
                post[k] = f"{float(v):.4g}"
        if progress:
            bar.set_postfix(post)
        bar.close()
    history.seconds += time.perf_counter() - start
    return history
