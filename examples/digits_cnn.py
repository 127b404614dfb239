# %% [markdown]
# # Digits with a small CNN
#
# Scikit-learn's bundled digits (1,797 images of 8x8 pixels, no download) and a
# two-layer convolutional network written as in PyTorch, trained with Adam on
# `autodiff.Autodiff(numpy)`. It reaches about 98-99% test accuracy in
# well under a minute on a laptop CPU.
#
# Run as a script (`python examples/digits_cnn.py`) or as the notebook
# `examples/digits_cnn.ipynb`; the two hold the same code.

# %%
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import autodiff as ad
from autodiff import nn, optim
from autodiff.nn import functional as F
from autodiff.training import batches, fit

start = time.perf_counter()
xp = ad.Autodiff(np)
nn.init.manual_seed(0)

# %% [markdown]
# ## Data: pixels scaled to [0, 1], a stratified 75/25 split

# %%
digits = load_digits()
images = (digits.images / 16.0).astype(np.float32)[:, None, :, :]  # (N, 1, 8, 8)
x_train, x_test, y_train, y_test = train_test_split(
    images, digits.target, test_size=0.25, random_state=0, stratify=digits.target
)
X_train, Y_train = xp.asarray(x_train), xp.asarray(y_train)
X_test, Y_test = xp.asarray(x_test), xp.asarray(y_test)
print(f"train {tuple(X_train.shape)}, test {tuple(X_test.shape)}")

# %% [markdown]
# ## The model


# %%
def make_model():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 8x8 -> 4x4
        nn.Flatten(),
        nn.Dropout(0.25),
        nn.Linear(64 * 4 * 4, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )


model = make_model()
print(model)
print("parameters:", sum(p.size for p in model.parameters()))


# %% [markdown]
# ## Training: Adam, a cosine learning-rate schedule, a progress bar
#
# With `jit=True`, `fit` records the first steps with `ad.jit` and then replays only
# the NumPy calls of a step (forward, backward, Adam's update): the same numbers as
# eager, about a third less time here. Dropout's masks are drawn afresh on each replay,
# and the schedule's learning rate is read by each replay.


# %%
def accuracy(model, X, Y):
    """The fraction of images whose largest logit is the true class."""
    with ad.no_grad():
        pred = xp.argmax(model(X), axis=1)
    return float(xp.mean(xp.astype(pred == Y, xp.float32)))


epochs = 12
opt = optim.Adam(model.parameters(), lr=2e-3)
sched = optim.CosineAnnealingLR(opt, T_max=epochs)
history = fit(
    model,
    F.cross_entropy,
    opt,
    batches(X_train, Y_train, batch_size=32),
    epochs=epochs,
    scheduler=sched,
    jit=True,
    evaluate=lambda m: {"test accuracy": accuracy(m, X_test, Y_test)},
)
print(history)

# %% [markdown]
# ## Result

# %%
model.eval()
test_accuracy = accuracy(model, X_test, Y_test)
print(f"test accuracy: {test_accuracy:.2%} ({time.perf_counter() - start:.1f} s)")

# %% [markdown]
# The loss of every step, the mean of each epoch and the test accuracy:

# %%
import matplotlib.pyplot as plt  # noqa: E402

ax = history.plot()
ax.set_title("digits CNN")
plt.tight_layout()

# %% [markdown]
# ## Checkpoint: save, load into a fresh model, same predictions

# %%
import os  # noqa: E402
import tempfile  # noqa: E402

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "digits.npz")
    ad.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epochs}, path)
    state = ad.load(path)
restored = make_model()
restored.load_state_dict(state["model"])
restored.eval()
assert accuracy(restored, X_test, Y_test) == test_accuracy
print("restored from the checkpoint of epoch", state["epoch"], "- same test accuracy")
