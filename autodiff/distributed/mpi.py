"""The MPI world, through mpi4py: in-place ``Allreduce`` and ``Bcast`` on the buffers
themselves (NumPy arrays; CuPy arrays with a CUDA-aware MPI), no pickling."""

from __future__ import annotations

from .base import World


class MPIWorld(World):
    """Ranks of an mpi4py communicator (``MPI.COMM_WORLD`` by default)."""

    backend = "mpi"

    def __init__(self, comm=None):
        try:
            from mpi4py import MPI
        except ImportError as exc:
            raise ImportError(
                "distributed.init(backend='mpi') needs mpi4py and an MPI library: "
                "pip install mpi4py mpich (or your cluster's MPI)"
            ) from exc
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD if comm is None else comm
        if not isinstance(self.comm, MPI.Comm):
            raise TypeError(
                f"distributed.init: comm must be an mpi4py communicator, got {type(comm).__name__}"
            )
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()

    def allreduce_(self, buf):
        if self.size > 1:
            _finish_kernels(buf)
            self.comm.Allreduce(self.MPI.IN_PLACE, buf, op=self.MPI.SUM)
        return buf

    def broadcast_(self, buf, root: int):
        if self.size > 1:
            _finish_kernels(buf)
            self.comm.Bcast(buf, root=root)
        return buf

    def barrier(self) -> None:
        self.comm.Barrier()

    def abort(self, code: int = 1) -> None:
        # MPI_Abort makes the launcher kill every rank, wherever it waits
        self.comm.Abort(code)


def _finish_kernels(buf) -> None:
    """A CUDA-aware MPI reads device memory outside CuPy's stream: let the kernels that
    packed ``buf`` finish first."""
    if hasattr(buf, "__cuda_array_interface__"):
        import cupy

        cupy.cuda.get_current_stream().synchronize()
