# %% [markdown]
# # A small GPT: a character language model of Python's own source
#
# A decoder-only transformer, written as in PyTorch: token embeddings, causal
# self-attention blocks with rotary position embeddings (`nn.MultiheadAttention`
# with `rope=True`), pre-norm `nn.LayerNorm`, a GELU MLP (GPT-2's tanh form), trained with AdamW,
# a linear warm-up and a cosine decay. The text ships with Python itself (the
# source of a few standard-library modules), so nothing is downloaded. It trains
# for one to two minutes on two CPU cores and must end well below the unigram
# baseline (the loss of predicting each character by its frequency alone).
#
# Run as a script (`python examples/char_lm.py`) or as the notebook
# `examples/char_lm.ipynb`; the two hold the same code.

# %%
import importlib
import inspect
import math
import time

import numpy as np

import autodiff as ad
from autodiff import nn, optim
from autodiff.nn import functional as F

start = time.perf_counter()
xp = ad.Autodiff(np)
nn.init.manual_seed(0)
rng = np.random.default_rng(0)

# %% [markdown]
# ## Data: the standard library's source, as characters

# %%
MODULES = ["textwrap", "string", "shlex", "fractions", "heapq", "bisect", "calendar",
           "difflib", "argparse", "dataclasses", "functools", "statistics"]  # fmt: skip
text = "\n".join(inspect.getsource(importlib.import_module(m)) for m in MODULES)
text = "".join(c for c in text if c == "\n" or 32 <= ord(c) < 127)
chars = sorted(set(text))
V = len(chars)
index = {c: i for i, c in enumerate(chars)}
data = np.array([index[c] for c in text], dtype=np.int64)
split = int(0.9 * len(data))
train, val = data[:split], data[split:]
print(f"{len(text):,} characters, {V} distinct; train {len(train):,}, validation {len(val):,}")

# The unigram baseline: each character predicted by its training frequency.
freq = np.bincount(train, minlength=V) + 1.0
unigram = float(-np.mean(np.log(freq / freq.sum())[val]))
print(f"unigram baseline: {unigram:.3f} nats per character")

# %% [markdown]
# ## The model

# %%
T, E, HEADS, LAYERS = 48, 64, 4, 2  # context, width, heads, blocks


class Block(nn.Module):
    """x + attention(norm(x)), then x + mlp(norm(x)): a pre-norm transformer block."""

    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(E)
        self.attn = nn.MultiheadAttention(E, HEADS, batch_first=True, rope=True)
        self.norm2 = nn.LayerNorm(E)
        self.up = nn.Linear(E, 4 * E)
        self.down = nn.Linear(4 * E, E)

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False, is_causal=True)[0]
        return x + self.down(F.gelu(self.up(self.norm2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, E)
        self.blocks = nn.Sequential(*[Block() for _ in range(LAYERS)])
        self.norm = nn.LayerNorm(E)
        self.head = nn.Linear(E, V)

    def forward(self, idx):
        return self.head(self.norm(self.blocks(self.embed(idx))))


model = GPT()
print(nn.summary(model, (1, T), dtype=xp.int64))

# %% [markdown]
# ## Training: AdamW, linear warm-up then cosine decay
#
# Each step takes 16 random windows of `T + 1` characters; the loss is the
# cross-entropy of each next character. A budget of 600 steps (not of seconds: the
# loss reached after a number of steps is the same on any machine).

# %%
BATCH, STEPS, WARMUP = 16, 600, 50


def batch(source):
    i = rng.integers(0, len(source) - T - 1, size=BATCH)
    w = np.stack([source[j : j + T + 1] for j in i])
    return xp.asarray(w[:, :-1]), xp.asarray(w[:, 1:])


def loss_of(x, y):
    logits = model(x)
    return F.cross_entropy(xp.reshape(logits, (-1, V)), xp.reshape(y, (-1,)))


def schedule(step):
    if step < WARMUP:
        return (step + 1) / WARMUP
    done = (step - WARMUP) / (STEPS - WARMUP)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * done))  # down to lr / 10


opt = optim.AdamW(model.parameters(), lr=4e-3, weight_decay=0.01)
sched = optim.LambdaLR(opt, schedule)
losses = []
t0 = time.perf_counter()
for step in range(STEPS):
    x, y = batch(train)
    loss = loss_of(x, y)
    opt.zero_grad()
    loss.backward()
    optim.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    losses.append(float(loss))
    if step % 100 == 0:
        print(
            f"step {step:5d}  loss {np.mean(losses[-50:]):.3f}  ({time.perf_counter() - t0:.0f} s)"
        )
print(f"{step + 1} steps in {time.perf_counter() - t0:.0f} s")

# %% [markdown]
# ## Validation loss and samples

# %%
model.eval()
with ad.no_grad():
    val_loss = float(np.mean([float(loss_of(*batch(val))) for _ in range(40)]))
print(f"validation loss {val_loss:.3f} nats per character (unigram {unigram:.3f})")
assert val_loss < 0.7 * unigram, (val_loss, unigram)  # 2.22 after the 600 steps


def sample(prompt, n=300, temperature=0.8):
    idx = [index[c] for c in prompt]
    with ad.no_grad():
        for _ in range(n):
            logits = model(xp.asarray(np.array([idx[-T:]])))
            z = np.asarray(logits[0, -1]) / temperature
            p = np.exp(z - z.max())
            idx.append(int(rng.choice(V, p=p / p.sum())))
    return "".join(chars[i] for i in idx)


print(sample("def "))
print(f"total time {time.perf_counter() - start:.0f} s")

# %% [markdown]
# The training loss (a running mean over 50 steps) against the unigram baseline:

# %%
import matplotlib.pyplot as plt  # noqa: E402

smooth = np.convolve(losses, np.ones(50) / 50, mode="valid")
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(smooth, label="training loss (mean of 50 steps)")
ax.axhline(unigram, color="gray", linestyle="--", label="unigram baseline")
ax.axhline(val_loss, color="C1", linestyle=":", label=f"validation {val_loss:.2f}")
ax.set_xlabel("step")
ax.set_ylabel("nats per character")
ax.legend()
plt.tight_layout()
