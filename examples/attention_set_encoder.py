# %% [markdown]
# # A set encoder with self-attention
#
# Each sample is a *set*: S vectors of dimension D with no order. The network
# reads the set and returns the set's per-dimension mean. That target is easy to
# write down but a useful test of a set model: the answer must not depend on
# the order of the vectors, and it depends on every one of them.
#
# The model is a small transformer encoder written as in PyTorch
# (`nn.Linear`, `nn.MultiheadAttention`, `nn.LayerNorm`) followed by a mean over
# the set axis, trained with Adam on `autodiff.Autodiff(numpy)` with
# `autodiff.training.fit`. It runs in about ten seconds on a laptop CPU.
#
# Run as a script (`python examples/attention_set_encoder.py`) or as the notebook
# `examples/attention_set_encoder.ipynb`; the two hold the same code.

# %%
import time

import numpy as np

import autodiff as ad
from autodiff import nn, optim
from autodiff.nn import functional as F
from autodiff.training import batches, fit

start = time.perf_counter()
xp = ad.Autodiff(np)
nn.init.manual_seed(0)
rng = np.random.default_rng(0)

# %% [markdown]
# ## Data: sets drawn around a mean of their own
#
# Every set has its own centre `mu ~ U(-1, 1)^D` and spread `sigma ~ U(0.5, 1.5)`,
# and holds `S` points `mu + sigma * noise`. The target is the *empirical* mean of
# the points, not `mu`: it is a function of the input alone, so a perfect model
# reaches zero error.

# %%
S, D = 16, 8  # set size, vector dimension


def make_sets(n):
    mu = rng.uniform(-1.0, 1.0, size=(n, 1, D))
    sigma = rng.uniform(0.5, 1.5, size=(n, 1, 1))
    points = (mu + sigma * rng.standard_normal((n, S, D))).astype(np.float32)
    return points, points.mean(axis=1)


x_train, y_train = make_sets(4096)
x_test, y_test = make_sets(1024)
X_train, Y_train = xp.asarray(x_train), xp.asarray(y_train)
X_test, Y_test = xp.asarray(x_test), xp.asarray(y_test)
print(f"train {tuple(X_train.shape)} -> {tuple(Y_train.shape)}, test {tuple(X_test.shape)}")

# %% [markdown]
# ## The model
#
# A point-wise input projection to width `E`, two pre-norm self-attention blocks
# (`h = h + attention(LayerNorm(h))`), a mean over the set axis and a linear read-out.
#
# - Self-attention treats its inputs as a set: with no position embedding, permuting
#   the points permutes the outputs the same way, and the mean over the set then
#   forgets the order altogether. The whole model is permutation invariant by
#   construction, not by training.
# - Pre-norm keeps a straight residual path from the projection to the pooling, so
#   the linear map "project, average, read out" is available from the start and
#   attention only has to learn corrections; a post-norm block would put a
#   `LayerNorm` (which divides by each point's scale) on that path.


# %%
class SetEncoder(nn.Module):
    def __init__(self, dim, embed_dim=32, num_heads=4, num_blocks=2):
        super().__init__()
        self.embed = nn.Linear(dim, embed_dim)
        self.norms = nn.ModuleList([nn.LayerNorm(embed_dim) for _ in range(num_blocks)])
        self.attns = nn.ModuleList(
            [
                nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)
                for _ in range(num_blocks)
            ]
        )
        self.head = nn.Linear(embed_dim, dim)

    def forward(self, x):  # x: (N, S, D)
        h = self.embed(x)
        for norm, attn in zip(self.norms, self.attns):
            z = norm(h)
            # need_weights=False: one fused attention op, no attention map to build
            h = h + attn(z, z, z, need_weights=False)[0]
        return self.head(xp.mean(h, axis=1))  # (N, E) -> (N, D)


model = SetEncoder(D)
print(model)
print("parameters:", sum(p.size for p in model.parameters()))

# %% [markdown]
# ## Baselines
#
# Two answers that ignore the points: always 0 (the centre of the prior), and the
# mean target of the training set. The model has to beat both by a wide margin.


# %%
def mse(pred, Y):
    with ad.no_grad():
        return float(F.mse_loss(pred, Y))


zero_mse = mse(xp.zeros_like(Y_test), Y_test)
global_mse = mse(xp.broadcast_to(xp.mean(Y_train, axis=0), Y_test.shape), Y_test)
print(f"baseline MSE: predict 0 {zero_mse:.4f}, predict the training mean {global_mse:.4f}")

# %% [markdown]
# ## Training: Adam, a short linear warm-up, then a cosine decay
#
# Attention from random weights can produce large updates in the first steps; a
# warm-up of two epochs keeps them small, and the cosine decay settles the weights
# at the end. `fit` steps the scheduler once per epoch; `LambdaLR` with one function
# gives both phases (warm-up, then cosine) in a single schedule. `jit=True` replays
# each step with `ad.jit` (the same numbers as eager).

# %%
import math  # noqa: E402

epochs, warmup = 12, 2
opt = optim.Adam(model.parameters(), lr=3e-3)


def lr_factor(epoch):
    if epoch < warmup:
        return (epoch + 1) / (warmup + 1)
    return 0.5 * (1.0 + math.cos(math.pi * (epoch - warmup) / (epochs - warmup)))


sched = optim.LambdaLR(opt, lr_factor)
history = fit(
    model,
    F.mse_loss,
    opt,
    batches(X_train, Y_train, batch_size=64),
    epochs=epochs,
    scheduler=sched,
    jit=True,
    evaluate=lambda m: {"test MSE": mse(m(X_test), Y_test)},
)
print(history)

# %% [markdown]
# ## Result

# %%
model.eval()
with ad.no_grad():
    pred_test = model(X_test)
test_mse = mse(pred_test, Y_test)
print(f"test MSE: {test_mse:.5f} (predict 0: {zero_mse:.4f}, {zero_mse / test_mse:.0f}x worse)")
print(f"{time.perf_counter() - start:.1f} s")

# %% [markdown]
# The loss of every step, the mean of each epoch and the test MSE:

# %%
import matplotlib.pyplot as plt  # noqa: E402

ax = history.plot()
ax.set_title("attention set encoder")
plt.tight_layout()

# %% [markdown]
# ## Permutation invariance
#
# Shuffle the order of the points inside every test set (a different order per
# set) and predict again: the answers agree to float32 rounding, because only the
# order in which the mean adds the points up changes.

# %%
order = np.argsort(rng.random((X_test.shape[0], S)), axis=1)
x_shuffled = np.take_along_axis(x_test, order[:, :, None], axis=1)
with ad.no_grad():
    pred_shuffled = model(xp.asarray(x_shuffled))
diff = float(xp.max(xp.abs(pred_shuffled - pred_test)))
print(f"largest change after shuffling the sets: {diff:.2e}")
assert diff < 1e-5

# %%
assert test_mse < 0.01
