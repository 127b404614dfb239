"""What every backend's world shares: the one-process world (the base class) and how to
tell which launcher started this process."""

from __future__ import annotations

import os

__all__ = ["World", "launched_by_mpi", "launched_by_torchrun"]

# Variables that MPI launchers put in each process's environment: MPICH's and Intel MPI's
# hydra (PMI_*), Open MPI (OMPI_*), PMIx launchers (srun --mpi=pmix, prterun).
_MPI_VARS = ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK")
_TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def find_mpiexec() -> str | None:
    """The ``mpiexec`` to launch ranks with: the one on PATH, else the one installed beside
    this Python (the ``mpich`` wheel puts it in the environment's ``bin``, which is not on
    PATH when the environment isn't activated); None if neither exists."""
    import shutil
    import sys

    return (
        shutil.which("mpiexec")
        or shutil.which("mpiexec", path=os.path.dirname(os.path.realpath(sys.executable)))
        or shutil.which("mpiexec", path=os.path.dirname(sys.executable))
    )


def launched_by_mpi() -> bool:
    """Whether this process was started by an MPI launcher (``mpiexec``, ``mpirun``)."""
    return any(v in os.environ for v in _MPI_VARS)


def launched_by_torchrun() -> bool:
    """Whether this process was started by ``torchrun`` (or has its variables set)."""
    return all(v in os.environ for v in _TORCHRUN_VARS)


class World:
    """The one-process world: rank 0 of 1; every collective is a no-op."""

    backend = "single"

    def __init__(self):
        self.rank, self.size = 0, 1

    def allreduce_(self, buf):
        """Sum ``buf`` over the ranks, in place; returns the buffer holding the sum."""
        return buf

    def broadcast_(self, buf, root: int):
        """Overwrite ``buf`` with rank ``root``'s, in place; returns the buffer."""
        return buf

    def barrier(self) -> None:
        """Wait until every rank has reached this call."""

    def abort(self, code: int = 1) -> None:
        """End every process of the run with exit status ``code``."""
        os._exit(code)

    def close(self) -> None:
        """Release the backend's resources (the world can't be used after)."""

    def __repr__(self):
        return (
            f"<autodiff.distributed world: backend {self.backend!r}, "
            f"rank {self.rank} of {self.size}>"
        )
