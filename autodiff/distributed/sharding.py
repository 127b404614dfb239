"""Each rank's share of the data, and checkpoints written once."""

from __future__ import annotations

import itertools

from .. import checks
from ..io import save as _save
from .group import world

__all__ = ["shard", "save"]


def _rows(n: int, r: int, size: int, drop_last: bool) -> slice:
    if drop_last:
        k = n // size
        return slice(r * k, (r + 1) * k)
    # as numpy.array_split: the first n % size ranks take one row more
    k, extra = divmod(n, size)
    start = r * k + min(r, extra)
    return slice(start, start + k + (r < extra))


def _round_robin(items, r: int, size: int):
    it = iter(items)
    while True:
        chunk = list(itertools.islice(it, size))
        if len(chunk) < size:  # an incomplete last round: no rank takes it
            return
        yield chunk[r]


def shard(data, *more, drop_last: bool = True):
    """This rank's share of ``data``.

    An array or Tensor (anything with a ``shape``): a contiguous block of its first axis,
    rank ``r`` of ``W`` taking rows ``[r * (n // W), (r + 1) * (n // W))``; the last
    ``n % W`` rows are dropped, so every rank has the same count and the mean over the
    ranks of per-rank means is the mean over the rows kept. With ``drop_last=False``
    no row is dropped and the first ``n % W`` ranks take one row more (as
    ``numpy.array_split``). Several arrays (``shard(x, y)``, not ``shard((x, y))``, which
    is an iterable of two items) are cut alike and come back as a tuple.

    Any other iterable (of batches): an iterator over items ``r, r + W, r + 2W, ...``; an
    incomplete last round of fewer than ``W`` items is dropped on every rank, so every
    rank runs the same number of steps (a rank with one step more would wait forever in
    its all-reduce). ``drop_last=False`` is refused there.
    """
    owner = "shard"
    checks.flag(owner, "drop_last", drop_last)
    w = world()
    arrays = (data, *more)
    if all(hasattr(a, "shape") for a in arrays):
        for i, a in enumerate(arrays):
            if len(a.shape) == 0:
                raise ValueError(f"{owner}: argument {i} is 0-dimensional; it has no rows")
        n = arrays[0].shape[0]
        for i, a in enumerate(arrays[1:], 1):
            if a.shape[0] != n:
                raise ValueError(
                    f"{owner}: arguments must share their first axis, got {n} and "
                    f"{a.shape[0]} (argument {i})"
                )
        rows = _rows(n, w.rank, w.size, drop_last)
        out = tuple(a[rows] for a in arrays)
        return out if more else out[0]
    if more:
        raise TypeError(f"{owner}: several arguments must all be arrays (with a shape)")
    try:
        items = iter(data)
    except TypeError:
        raise TypeError(
            f"{owner}: data must be an array or an iterable, got {type(data).__name__}"
        ) from None
    if not drop_last:
        raise ValueError(
            f"{owner}: drop_last=False is for arrays; an iterable's incomplete last round "
            "is always dropped (ranks must run the same number of steps)"
        )
    return _round_robin(items, w.rank, w.size)


def save(state, path, root: int = 0) -> None:
    """``autodiff.save(state, path)`` on rank ``root`` only, then a barrier: when it
    returns, every rank may read the file (on a filesystem they share)."""
    w = world()
    checks.integer("distributed.save", "root", root, 0, w.size - 1)
    if w.rank == root:
        _save(state, path)
    w.barrier()
