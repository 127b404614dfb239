# %% [markdown]
# # Data-parallel training over MPI
#
# Every process (a *rank*) holds the whole model; each takes its share of every batch,
# computes its gradients, and `autodiff.distributed.DataParallel` averages them over the
# ranks (one all-reduce per ~25 MB bucket) before the optimizer's step, so all ranks take
# the same step: the run trains exactly as one process would on the whole batch.
#
# The script runs alone (`python examples/data_parallel.py`, one process, no MPI needed)
# or on several processes: `mpiexec -n 2 python examples/data_parallel.py`. The data are
# scikit-learn's bundled digits (no download); the model a 64-256-256-10 MLP.

# %%
import os
import time

# Under an MPI launcher the ranks are the parallelism: one BLAS thread each (set before
# NumPy loads its BLAS), else each rank's threads compete for the same cores.
if any(v in os.environ for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")):
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

import autodiff as ad  # noqa: E402
import autodiff.distributed as dist  # noqa: E402
from autodiff import nn, optim  # noqa: E402
from autodiff.nn import functional as F  # noqa: E402
from autodiff.training import batches  # noqa: E402

start = time.perf_counter()
dist.init()  # MPI under mpiexec, else a one-process world
rank, size = dist.rank(), dist.world_size()
xp = ad.Autodiff(np)


def say(*args):
    """Print on rank 0 only (every rank runs this script)."""
    if rank == 0:
        print(*args)


say(f"{size} rank(s), backend {dist.get_backend()!r}")

# %% [markdown]
# ## Data: every rank loads the same split, then takes its rows of each batch

# %%
digits = load_digits()
x_train, x_test, y_train, y_test = train_test_split(
    (digits.data / 16.0).astype(np.float32),
    digits.target,
    test_size=0.25,
    random_state=0,
    stratify=digits.target,
)
X_train, Y_train = xp.asarray(x_train), xp.asarray(y_train)
X_test, Y_test = xp.asarray(x_test), xp.asarray(y_test)

# %% [markdown]
# ## Model and optimizer
#
# The ranks start from different random weights on purpose: `DataParallel` broadcasts
# rank 0's parameters when it is made, so they all start from the same ones.

# %%
EPOCHS = 20
nn.init.manual_seed(rank)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                      nn.Linear(256, 10))  # fmt: skip
opt = dist.DataParallel(optim.Adam(model.parameters(), lr=2e-3))
sched = optim.CosineAnnealingLR(opt, T_max=EPOCHS)

# %% [markdown]
# ## Training: the same global batches of 64 on every rank (one seed), split by `shard`


# %%
def accuracy(X, Y):
    with ad.no_grad():
        return float(xp.mean(xp.astype(xp.argmax(model(X), axis=1) == Y, xp.float32)))


data = batches(X_train, Y_train, batch_size=64, seed=0, drop_last=True)
steps = 0
for epoch in range(EPOCHS):
    for x, y in data:
        x, y = dist.shard(x, y)  # 64 / size rows on each rank
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        steps += 1
    sched.step()
    if epoch % 5 == 4:
        say(f"epoch {epoch + 1}: loss on rank 0's rows {float(loss):.4f}")

# %% [markdown]
# ## Per-rank figures, gathered on rank 0
#
# Each rank writes its figures into its own row of a zero matrix; an all-reduce (a sum)
# gives every rank the whole table. The ranks' parameters must be the same.

# %%
table = np.zeros((size, 3))
table[rank] = [x.shape[0], opt.comm_seconds, sum(float(xp.sum(p * p)) for p in model.parameters())]
dist.world().allreduce_(table)
for r, (rows, comm, norm) in enumerate(table):
    say(f"rank {r}: {int(rows)} rows per step, {comm:.2f} s in all-reduce, |w|^2 = {norm:.6f}")
assert np.allclose(table[:, 2], table[0, 2], rtol=1e-6), "the ranks' parameters differ"

test_accuracy = accuracy(X_test, Y_test)
say(f"{steps} steps, test accuracy {test_accuracy:.2%} ({time.perf_counter() - start:.1f} s)")
assert test_accuracy >= 0.96

# %% [markdown]
# ## Checkpoint: written by rank 0, read by every rank

# %%
import tempfile  # noqa: E402

# one name that every rank computes alike (the ranks share this machine's filesystem)
path = os.path.join(tempfile.gettempdir(), "autodiff_data_parallel_example.npz")
dist.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, path)
restored = ad.load(path)["model"]
assert all(np.array_equal(restored[k], v.data) for k, v in model.state_dict().items())
say("checkpoint written by rank 0 and read back on every rank")
dist.barrier()  # every rank has read it before rank 0 removes it
if rank == 0:
    os.remove(path)
