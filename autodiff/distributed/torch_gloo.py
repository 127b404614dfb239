"""The ``torch.distributed`` world (gloo, on the CPU): the flat buffers are handed to
torch without a copy (``torch.as_tensor`` shares a NumPy array's memory)."""

from __future__ import annotations

import os

from .base import World


def _env_int(name: str, key: str) -> int:
    value = os.environ.get(key)
    if value is None:
        raise ValueError(
            f"distributed.init: {name} not given and ${key} not set (start the processes "
            "with torchrun, or pass rank=, world_size= and init_method=)"
        )
    return int(value)


class TorchWorld(World):
    """A gloo process group of ``torch.distributed`` (or the group already initialized)."""

    backend = "torch"

    def __init__(self, rank=None, world_size=None, init_method=None, timeout=None):
        try:
            import torch
            import torch.distributed as dist
        except ImportError as exc:
            raise ImportError("distributed.init(backend='torch') needs PyTorch") from exc
        self.torch, self.dist = torch, dist
        self._created = not dist.is_initialized()  # else the user's group, theirs to close
        if not self._created:
            self.rank, self.size = dist.get_rank(), dist.get_world_size()
            return
        self.rank = _env_int("rank", "RANK") if rank is None else rank
        self.size = _env_int("world_size", "WORLD_SIZE") if world_size is None else world_size
        if self.rank >= self.size:
            raise ValueError(f"distributed.init: rank {self.rank} >= world_size {self.size}")
        options = {}
        if timeout is not None:
            import datetime

            options["timeout"] = datetime.timedelta(seconds=timeout)
        dist.init_process_group(
            "gloo", init_method=init_method or "env://", rank=self.rank,
            world_size=self.size, **options,
        )  # fmt: skip

    def _tensor(self, buf):
        return self.torch.as_tensor(buf)  # the same memory: a NumPy array or a torch tensor

    def allreduce_(self, buf):
        if self.size > 1:
            self.dist.all_reduce(self._tensor(buf), op=self.dist.ReduceOp.SUM)
        return buf

    def broadcast_(self, buf, root: int):
        if self.size > 1:
            self.dist.broadcast(self._tensor(buf), src=root)
        return buf

    def barrier(self) -> None:
        if self.size > 1:
            self.dist.barrier()

    def close(self) -> None:
        if self._created and self.dist.is_initialized():
            self.dist.destroy_process_group()
