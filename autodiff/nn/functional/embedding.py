"""Embedding lookup: one registered op."""

from __future__ import annotations

from ... import checks
from ...backends import device_of
from ...engine.namespace import recorder_of
from ...engine.registry import defop
from ._dtypes import dtype_facts

__all__ = ["embedding"]

CH = "nn.normalization"  # its chapter (gradcheck --list groups it with the norms)


def _embedding(B, weight, indices):
    flat = B.take(weight, B.reshape(indices, (-1,)), axis=0)
    return B.reshape(flat, tuple(indices.shape) + (weight.shape[1],))


def _embedding_rule(xp, g, ans, weight, indices, *, padding_idx):
    """Scatter-add the rows of g into the used rows (duplicates accumulate);
    the padding row gets nothing."""
    idx = xp.reshape(indices, (-1,))
    rows = xp.reshape(g, (-1, weight.shape[1]))
    if padding_idx is not None:
        rows = xp.where(xp.expand_dims(idx != padding_idx, axis=1), rows, xp.zeros_like(rows))
    z = xp.zeros(weight.shape, dtype=g.dtype, device=device_of(g))
    return xp.index_add(z, idx, rows, axis=0)


def _embedding_jvp(xp, ts, ans, weight, indices, *, padding_idx):
    """The tangent's rows at the indices; none at the padding row (it gets no gradient)."""
    rows = _embedding(xp, ts[0], indices)
    if padding_idx is None:
        return rows
    keep = xp.expand_dims(indices != padding_idx, axis=-1)
    return xp.where(keep, rows, xp.zeros_like(rows))


def _embedding_batch(c, weight, indices, *, padding_idx):
    """Shared table: the op itself. Per-example tables: stacked into one table of
    n * rows rows, example j's indices offset by j * rows."""
    xp, n = c.xp, c.n
    bw, bi = c.bd
    if not bw:
        return c.f(weight, indices, padding_idx=padding_idx)
    indices = c.lift(indices, bi)
    rows = weight.shape[1]
    table = xp.reshape(weight, (n * rows, weight.shape[2]))
    offsets = xp.arange(n, dtype=indices.dtype, device=device_of(indices)) * rows
    offsets = xp.reshape(offsets, (n,) + (1,) * (indices.ndim - 1))
    out = c.f(table, indices + offsets, padding_idx=None)
    if padding_idx is None:
        return out
    # the padding row's values, but no gradient to it (as the op's rule masks it)
    pad = xp.expand_dims(indices == padding_idx, axis=-1)
    return xp.where(pad, xp.stop_gradient(out), out)


defop(
    "nn.embedding",
    _embedding_rule,
    None,
    chapter=CH,
    impl=lambda B: lambda weight, indices, *, padding_idx: _embedding(B, weight, indices),
    saves=(1,),
    jvp=_embedding_jvp,
    batch=_embedding_batch,
    doc="rows of weight at integer indices; duplicates accumulate in the gradient",
)


def embedding(input, weight, padding_idx=None):
    """``weight[input]``: rows of the (num_embeddings, dim) ``weight`` at the integer
    indices ``input`` (any shape); ``padding_idx``'s row gets no gradient (as torch).

    Out-of-range indices raise ``IndexError`` on CPU backends; on GPU backends they
    are not checked (no device-to-host read), as torch's CUDA kernels assert
    asynchronously; CuPy wraps them around, as in its integer indexing."""
    if padding_idx is not None:
        padding_idx = int(checks.integer("embedding", "padding_idx", padding_idx))
    return _embedding_checked(input, weight, padding_idx)


def _embedding_checked(input, weight, padding_idx):
    """``embedding`` with ``padding_idx`` None or an int: the rest is checked here."""
    rec = recorder_of(weight, input)
    xp = rec.namespace
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-D (num_embeddings, dim), got {weight.shape}")
    input = xp.asarray(input)
    if not dtype_facts(xp, input.dtype).integral:
        raise TypeError(f"embedding: indices must be integers, got {input.dtype}")
    n = weight.shape[0]
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise ValueError(f"embedding: padding_idx {padding_idx} out of range for {n} rows")
        padding_idx %= n
    # The check reads a bool back to the host: a stream sync on a GPU, so skipped there.
    if rec.backend.checks_on_host(input.data) and bool(xp.any((input < 0) | (input >= n))):
        raise IndexError(f"embedding: index out of range: rows are 0..{n - 1}")
    return rec.xp.nn.embedding(weight, input, padding_idx=padding_idx)
