"""Data-parallel training: every rank holds the whole model, runs its share of the batch,
and the gradients are averaged before each optimizer step, so every rank takes the same
step (torch's ``DistributedDataParallel``, Horovod's ``DistributedOptimizer``).

Gradients are packed into flat buffers of ``bucket_cap_mb`` (one backend, dtype and
device each), one in-place all-reduce per buffer, then unpacked and scaled by
``1 / world_size``. Communication starts after the backward pass (it does not overlap
with it).
"""

from __future__ import annotations

import time

from .. import checks
from ..engine.grad_mode import enable_grad
from ..engine.tensor import Tensor
from ..optim import Optimizer
from . import buckets
from .group import world

__all__ = ["DataParallel", "broadcast_parameters"]


def _tensors(owner, model_or_params) -> list:
    """The Tensors of a Module (parameters, then buffers), a state dict, or an iterable."""
    if hasattr(model_or_params, "parameters") and hasattr(model_or_params, "buffers"):
        items = list(model_or_params.parameters()) + list(model_or_params.buffers())
    elif isinstance(model_or_params, Tensor):
        items = [model_or_params]
    elif isinstance(model_or_params, dict):
        items = list(model_or_params.values())
    else:
        try:
            items = list(model_or_params)
        except TypeError:
            raise TypeError(
                f"{owner}: expected a Module, a dict or an iterable of Tensors, "
                f"got {type(model_or_params).__name__}"
            ) from None
    seen, out = set(), []
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"{owner}: item {i} is a {type(t).__name__}, not an autodiff Tensor")
        if id(t) not in seen:
            seen.add(id(t))
            out.append(t)
    return out


def broadcast_parameters(model_or_params, root: int = 0) -> None:
    """Overwrite, on every rank, the values of a module's parameters and buffers (or of a
    state dict's, or a list's Tensors) with rank ``root``'s, in place: a common start."""
    owner = "broadcast_parameters"
    w = world()
    checks.integer(owner, "root", root, 0, w.size - 1)
    tensors = _tensors(owner, model_or_params)
    if w.size == 1 or not tensors:
        return
    for bucket in buckets.plan(tensors, 25 * 2**20, flags=False):
        bucket.pack_values()
        bucket.buffer = w.broadcast_(bucket.buffer, root)
        bucket.unpack_values()


class DataParallel:
    """``optimizer`` (any ``autodiff.optim`` optimizer) whose :meth:`step` first averages
    each parameter's gradient over the ranks.

    ``bucket_cap_mb``: the size of each flat buffer (torch's default, 25 MB). With
    ``broadcast`` (the default) the parameters start from rank 0's values. ``zero_grad``,
    ``state_dict``, ``load_state_dict``, ``param_groups``, ``state`` and ``defaults`` are
    the optimizer's (give it, or this, to a schedule). ``comm_seconds`` adds up the time
    spent packing, all-reducing and unpacking.
    """

    def __init__(self, optimizer, *, bucket_cap_mb: float = 25.0, broadcast: bool = True):
        owner = "DataParallel"
        if not isinstance(optimizer, Optimizer):
            raise TypeError(
                f"{owner}: optimizer must be an autodiff.optim optimizer, "
                f"got {type(optimizer).__name__}"
            )
        checks.number(owner, "bucket_cap_mb", bucket_cap_mb, 0, open_low=True)
        checks.flag(owner, "broadcast", broadcast)
        self.optimizer = optimizer
        self.bucket_cap_mb = bucket_cap_mb
        self.world = world()
        self.comm_seconds = 0.0
        self._buckets = None
        self._synchronized = False
        if broadcast:
            broadcast_parameters(self._params())

    def _params(self) -> list:
        return [p for group in self.optimizer.param_groups for p in group["params"]]

    # -- the optimizer's interface --------------------------------------------------------
    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @property
    def state(self):
        return self.optimizer.state

    @property
    def defaults(self):
        return self.optimizer.defaults

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none)

    def state_dict(self) -> dict:
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        self.optimizer.load_state_dict(state_dict)
        self._buckets = None

    def add_param_group(self, param_group: dict) -> None:
        self.optimizer.add_param_group(param_group)
        self._buckets = None

    def __repr__(self):
        return f"DataParallel({self.optimizer!r}, world of {self.world.size})"

    # -- communication ----------------------------------------------------------------------
    def synchronize(self) -> None:
        """Average the gradients over the ranks now (e.g. to clip them before
        :meth:`step`, which then doesn't average again)."""
        start = time.perf_counter()
        w = self.world
        if w.size > 1:
            if self._buckets is None:
                self._buckets = buckets.plan(self._params(), self.bucket_cap_mb * 2**20, True)
            for bucket in self._buckets:
                bucket.pack_grads()
                bucket.buffer = w.allreduce_(bucket.buffer)
                bucket.unpack_grads(1.0 / w.size)
        self._synchronized = True
        self.comm_seconds += time.perf_counter() - start

    def step(self, closure=None):
        """Average the gradients (unless :meth:`synchronize` ran since the last step),
        then step the optimizer. A ``closure`` (LBFGS) is wrapped so that each of its
        evaluations averages the gradients and the loss too."""
        if closure is None:
            if not self._synchronized:
                self.synchronize()
            self._synchronized = False
            return self.optimizer.step()
        checks.function("DataParallel.step", "closure", closure)

        def averaged():
            with enable_grad():
                loss = closure()
            self.synchronize()
            return self._average_loss(loss)

        self._synchronized = False
        return self.optimizer.step(averaged)

    def _average_loss(self, loss):
        """The loss averaged over the ranks (a Tensor without history, or a float)."""
        if self.world.size == 1:
            return loss
        data = loss.data if isinstance(loss, Tensor) else None
        if data is None:  # a Python number: reduced on the parameters' backend
            B = self._params()[0]._rec.backend
            buf = self.world.allreduce_(B.asarray([float(loss)]))
            return float(buf[0]) / self.world.size
        rec = loss._rec
        buf = rec.backend.reshape(rec.backend.asarray(data, copy=True), (1,))
        buf = self.world.allreduce_(buf)
        return rec.wrap(rec.backend.reshape(buf, ()) / self.world.size)
