"""Buffers written on a lazy backend (dask) that the next optimizer step persists.

A module's running statistics (BatchNorm's mean, variance and batch count) are no
optimizer's state, yet on a lazy backend each update adds that batch's graph to theirs,
step after step. They are registered here when written, and the next
``Optimizer.step()`` persists them in the same ``persist`` as the parameters: the batch's
statistics are then computed once, with the gradients, and the graph stays one step
deep. Eager backends never register anything.
"""

from __future__ import annotations

import weakref

# by id: a Tensor's == is element-wise, so it can't be a set's member; weakly, so a
# model dropped before the next step isn't kept
_pending: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def written(t) -> None:
    """Remember the Tensor ``t`` (a buffer just rebound to a lazy value)."""
    _pending[id(t)] = t


def take(backend) -> list:
    """The pending buffers of ``backend`` (a Backend), no longer pending."""
    mine = [(k, t) for k, t in list(_pending.items()) if t._rec.backend is backend]
    for k, _ in mine:
        _pending.pop(k, None)
    return [t for _, t in mine]
