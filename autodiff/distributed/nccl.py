"""The NCCL world on CUDA GPUs, through ``cupyx.distributed`` (one GPU per process).

Written from CuPy's documentation of ``cupyx.distributed.init_process_group`` and
``NCCLBackend`` (``all_reduce(in_array, out_array, op)``, ``broadcast(array, root)``,
``barrier()``); the tests check its wiring with a stand-in module, not on GPUs.
Under ``mpiexec`` the rank and size come from MPI and NCCL's rendezvous goes through it
(``use_mpi=True``); otherwise from ``rank``/``world_size`` or torchrun's variables, the
rendezvous at ``init_method`` (``tcp://host:port``) or ``$MASTER_ADDR:$MASTER_PORT``.
"""

from __future__ import annotations

import os
import sys

from .base import World, launched_by_mpi
from .torch_gloo import _env_int

_LOCAL_RANK_VARS = ("LOCAL_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK")


def _host_port(init_method):
    """(host, port) of ``tcp://host:port``, or of $MASTER_ADDR/$MASTER_PORT (None: CuPy's
    defaults)."""
    if init_method is None:
        port = os.environ.get("MASTER_PORT")
        return os.environ.get("MASTER_ADDR"), None if port is None else int(port)
    if not isinstance(init_method, str) or not init_method.startswith("tcp://"):
        raise ValueError(
            f"distributed.init: init_method must be 'tcp://host:port' for backend 'nccl', "
            f"got {init_method!r}"
        )
    host, _, port = init_method[len("tcp://") :].rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"distributed.init: init_method {init_method!r} lacks a host:port")
    return host, int(port)


def _local_rank(rank: int) -> int:
    for key in _LOCAL_RANK_VARS:
        if key in os.environ:
            return int(os.environ[key])
    return rank


class NCCLWorld(World):
    """A ``cupyx.distributed`` NCCL communicator; each process uses GPU ``local rank %
    device count`` (set it yourself beforehand with ``cupy.cuda.Device(i).use()`` to
    choose another: pass ``rank``, ``world_size``)."""

    backend = "nccl"

    def __init__(self, rank=None, world_size=None, init_method=None):
        try:
            import cupy
            import cupyx.distributed
        except ImportError as exc:
            raise ImportError("distributed.init(backend='nccl') needs CuPy with NCCL") from exc
        self.mpi = None
        if launched_by_mpi() and rank is None and world_size is None:
            from .mpi import MPIWorld

            self.mpi = MPIWorld()
            rank, world_size = self.mpi.rank, self.mpi.size
            host = port = None
        else:
            rank = _env_int("rank", "RANK") if rank is None else rank
            world_size = _env_int("world_size", "WORLD_SIZE") if world_size is None else world_size
            host, port = _host_port(init_method)
        self.rank, self.size = rank, world_size
        cupy.cuda.Device(_local_rank(rank) % cupy.cuda.runtime.getDeviceCount()).use()
        options = {"backend": "nccl", "use_mpi": self.mpi is not None}
        if host is not None:
            options["host"] = host
        if port is not None:
            options["port"] = port
        self.comm = cupyx.distributed.init_process_group(world_size, rank, **options)

    def allreduce_(self, buf):
        if self.size > 1:
            self.comm.all_reduce(buf, buf, op="sum")  # NCCL reduces in place
        return buf

    def broadcast_(self, buf, root: int):
        if self.size > 1:
            self.comm.broadcast(buf, root)
        return buf

    def barrier(self) -> None:
        if self.size > 1:
            self.comm.barrier()

    def abort(self, code: int = 1) -> None:
        if self.mpi is not None:
            self.mpi.abort(code)
        sys.stderr.flush()
        os._exit(code)
