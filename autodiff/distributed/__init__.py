"""Data-parallel training over several processes: MPI (mpi4py) by default,
``torch.distributed`` (gloo) or NCCL on GPUs (``cupyx.distributed``) with the same API.

    import autodiff.distributed as dist

    dist.init()                                  # MPI under mpiexec, else one process
    model = make_model()
    opt = dist.DataParallel(optim.Adam(model.parameters(), lr=1e-3))  # starts from rank 0's
    for x, y in batches(X, Y, batch_size=256, seed=0):    # the same global batches on every rank
        x, y = dist.shard(x, y)                  # this rank's rows of each
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()                               # gradients averaged over the ranks, then a step
    dist.save(model.state_dict(), "model.npz")   # written by rank 0

Run it with ``mpiexec -n 4 python train.py``, or ``python train.py`` (one process, no MPI
needed). Names: ``init``, ``rank`` / ``world_size`` (``get_rank`` / ``get_world_size``,
as torch.distributed), ``get_backend``, ``barrier``, ``shutdown``,
``broadcast_parameters``, ``DataParallel``, ``shard``, ``save``. Nothing here imports
mpi4py, torch or cupy until ``init`` chooses that backend.
"""

from .base import find_mpiexec
from .data_parallel import DataParallel, broadcast_parameters
from .group import (
    World,
    barrier,
    get_backend,
    get_rank,
    get_world_size,
    init,
    is_initialized,
    launched_by_mpi,
    rank,
    shutdown,
    world,
    world_size,
)
from .sharding import save, shard

__all__ = [
    "init",
    "is_initialized",
    "rank",
    "world_size",
    "get_rank",
    "get_world_size",
    "get_backend",
    "barrier",
    "shutdown",
    "world",
    "World",
    "launched_by_mpi",
    "find_mpiexec",
    "broadcast_parameters",
    "DataParallel",
    "shard",
    "save",
]
