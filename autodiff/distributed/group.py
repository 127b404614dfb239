"""The process group ("world"): which backend carries the messages, this process's rank,
the number of processes, and the fail-fast hook.

A world offers four collectives on flat buffers (1-D arrays of the parameters' backend),
in place: ``allreduce_(buf)`` (sum), ``broadcast_(buf, root)``, ``barrier()``, and
``abort(code)``, which ends every process of the run. The one-process world does nothing
and needs no MPI. Backends are imported when chosen, never at ``import autodiff``.
"""

from __future__ import annotations

import sys

from .. import checks
from .base import World, launched_by_mpi, launched_by_torchrun

__all__ = [
    "World",
    "init",
    "is_initialized",
    "world",
    "rank",
    "world_size",
    "get_rank",
    "get_world_size",
    "get_backend",
    "barrier",
    "shutdown",
    "launched_by_mpi",
    "launched_by_torchrun",
]

BACKENDS = ("mpi", "torch", "nccl", "single")

_WORLD: list = []  # the current World, once init has run
_HOOK: list = []  # the excepthook that was there before ours


def _fail_fast(w: World) -> None:
    """On an uncaught exception, print it as usual, then end every rank: the others would
    otherwise wait forever in their next collective for this one."""
    previous = sys.excepthook
    _HOOK[:] = [previous]

    def hook(kind, value, tb):
        previous(kind, value, tb)
        sys.stdout.flush()
        sys.stderr.write(
            f"autodiff.distributed: rank {w.rank} raised {kind.__name__}; "
            f"aborting all {w.size} ranks\n"
        )
        sys.stderr.flush()
        w.abort(1)

    sys.excepthook = hook


def _detect() -> str:
    if launched_by_mpi():
        return "mpi"
    if launched_by_torchrun():
        return "torch"
    return "single"


def init(backend=None, *, comm=None, rank=None, world_size=None, init_method=None,
         timeout=None, abort_on_error=True) -> World:  # fmt: skip
    """Start the process group and return it (calling it again returns the same world).

    ``backend``: ``"mpi"`` (mpi4py; ``comm`` an mpi4py communicator, COMM_WORLD by
    default), ``"torch"`` (``torch.distributed`` with gloo; ``rank``, ``world_size``,
    ``init_method`` default to torchrun's variables ``RANK``, ``WORLD_SIZE``,
    ``MASTER_ADDR``, ``MASTER_PORT``), ``"nccl"`` (``cupyx.distributed``, one GPU per
    process: under ``mpiexec`` rank and size come from MPI, else as for ``"torch"``),
    ``"single"`` (one process, nothing imported), or None: ``"mpi"`` when an MPI launcher
    started this process, ``"torch"`` under torchrun, else ``"single"``.
    ``timeout`` (seconds, torch only) bounds each collective's wait.
    With ``abort_on_error`` an uncaught exception on any rank ends every rank (exit
    status 1) instead of leaving the others waiting in a collective. Call it before
    making the model: with ``"nccl"`` it chooses this process's GPU.
    """
    name = "distributed.init"
    chosen = _detect() if backend is None else checks.choice(name, "backend", backend, BACKENDS)
    checks.flag(name, "abort_on_error", abort_on_error)
    if comm is not None and chosen != "mpi":
        raise ValueError(f"{name}: comm is for backend 'mpi', got backend {chosen!r}")
    if chosen not in ("torch", "nccl"):
        for key, v in (("rank", rank), ("world_size", world_size), ("init_method", init_method)):
            if v is not None:
                raise ValueError(
                    f"{name}: {key} is for backends 'torch' and 'nccl', got {chosen!r}"
                )
    if timeout is not None:
        if chosen != "torch":
            raise ValueError(f"{name}: timeout is for backend 'torch', got {chosen!r}")
        checks.number(name, "timeout", timeout, 0, open_low=True)
    if world_size is not None:
        checks.integer(name, "world_size", world_size, low=1)
    if rank is not None:
        checks.integer(name, "rank", rank, 0, None if world_size is None else world_size - 1)
    if _WORLD:
        w = _WORLD[0]
        if backend is not None and w.backend != chosen:
            raise RuntimeError(
                f"{name}: already initialized with backend {w.backend!r}; "
                "call shutdown() first to change it"
            )
        return w
    if chosen == "mpi":
        from .mpi import MPIWorld

        w = MPIWorld(comm)
    elif chosen == "torch":
        from .torch_gloo import TorchWorld

        w = TorchWorld(rank, world_size, init_method, timeout)
    elif chosen == "nccl":
        from .nccl import NCCLWorld

        w = NCCLWorld(rank, world_size, init_method)
    else:
        w = World()
    _WORLD[:] = [w]
    if abort_on_error and w.size > 1:
        _fail_fast(w)
    return w


def is_initialized() -> bool:
    """Whether :func:`init` has run (and :func:`shutdown` not since)."""
    return bool(_WORLD)


def world() -> World:
    """The current world; before :func:`init`, ``init()`` is called (with detection)."""
    return _WORLD[0] if _WORLD else init()


def rank() -> int:
    """This process's rank, 0 to ``world_size() - 1``."""
    return world().rank


def world_size() -> int:
    """The number of processes in the world."""
    return world().size


get_rank, get_world_size = rank, world_size  # torch.distributed's names


def get_backend() -> str:
    """The world's backend: ``"mpi"``, ``"torch"``, ``"nccl"`` or ``"single"``."""
    return world().backend


def barrier() -> None:
    """Wait until every rank has reached this call."""
    world().barrier()


def shutdown() -> None:
    """Close the world and remove the fail-fast hook; a later call initializes anew (MPI
    itself stays initialized until the process ends, as mpi4py does)."""
    if _WORLD:
        _WORLD.pop().close()
    if _HOOK:
        sys.excepthook = _HOOK.pop()
