# %% [markdown]
# # One training script, any backend
#
# The training code below never names a library: it receives an Array API
# namespace, builds its model there with `xp=`, and trains it. The same
# function runs unchanged on NumPy and on `array_api_strict` (and on
# `array_api_compat.torch` when PyTorch is installed, or on CuPy with a GPU),
# and in float64 the loss curves agree to rounding.
#
# Set `BACKENDS` (comma-separated module names) to choose; the default is
# `numpy,array_api_strict`.

# %%
import importlib
import os
import time

import numpy as np

import autodiff as ad
from autodiff import nn, optim
from autodiff.nn import functional as F
from autodiff.training import batches, fit


def spirals(n_per_class=200, classes=3, seed=0):
    """Points on interleaved noisy spirals, one arm per class (a non-linear problem)."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 1.0, n_per_class)
    xs, ys = [], []
    for c in range(classes):
        angle = 4.0 * t + 2 * np.pi * c / classes + rng.normal(0, 0.15, n_per_class)
        xs.append(np.stack([t * np.cos(angle), t * np.sin(angle)], axis=1))
        ys.append(np.full(n_per_class, c))
    return np.concatenate(xs), np.concatenate(ys)


x_np, y_np = spirals()

# %% [markdown]
# ## The training code: nothing in it depends on the backend


# %%
def train(backend, epochs=60, seed=0):
    """Train an MLP classifier on namespace ``backend``; (history, accuracy, seconds)."""
    xp = ad.Autodiff(backend)
    X = xp.asarray(x_np, dtype=xp.float64)
    Y = xp.asarray(y_np)
    nn.init.manual_seed(seed)
    model = nn.Sequential(
        nn.Linear(2, 64, xp=xp, dtype=xp.float64),
        nn.Tanh(),
        nn.Linear(64, 64, xp=xp, dtype=xp.float64),
        nn.Tanh(),
        nn.Linear(64, 3, xp=xp, dtype=xp.float64),
    )
    opt = optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    start = time.perf_counter()
    history = fit(model, F.cross_entropy, opt, batches(X, Y, batch_size=50, seed=seed),
                  epochs=epochs, progress=False)  # fmt: skip
    seconds = time.perf_counter() - start
    with ad.no_grad():
        pred = xp.argmax(model(X), axis=1)
    accuracy = float(xp.mean(xp.astype(pred == Y, xp.float64)))
    return history, accuracy, seconds


# %% [markdown]
# ## Run it on each backend

# %%
names = os.environ.get("BACKENDS", "numpy,array_api_strict").split(",")
results = {}
for name in names:
    backend = importlib.import_module(name)
    history, accuracy, seconds = train(backend)
    results[name] = history
    print(f"{name:>22}: final loss {history.epoch_losses[-1]:.6f}, "
          f"train accuracy {accuracy:.1%}, {seconds:.2f} s")  # fmt: skip
    assert accuracy > 0.95, f"{name} did not learn the spirals"

# %% [markdown]
# Same seeds, same float64 arithmetic: the loss curves agree step by step. The
# backends may sum in different orders (differences of 1e-16 in the first steps),
# and training amplifies those a little; they stay far below anything visible.

# %%
reference = np.array(results[names[0]].losses)
for name in names[1:]:
    other = np.array(results[name].losses)
    gap = np.max(np.abs(other - reference))
    print(f"largest step-loss difference, {name} vs {names[0]}: {gap:.2e}")
    assert gap < 1e-6 * np.max(reference)

# %%
import matplotlib.pyplot as plt  # noqa: E402

from autodiff.training import plot_losses  # noqa: E402

ax = plot_losses({name: h.losses for name, h in results.items()})
ax.set_title("the same training on each backend")
plt.tight_layout()
