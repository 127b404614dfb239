"""Layer normalization, embedding lookup and dropout: one registered op each."""

from __future__ import annotations

import threading

from .. import checks
from ..namespace import recorder_of
from ..registry import defop
from ._dtypes import dtype_facts

__all__ = ["layer_norm", "embedding", "dropout"]

CH = "nn.normalization"


# -- layer norm ---------------------------------------------------------------------
def _normalized(xp, x, k, eps):
    """(x - mean) / sqrt(var + eps) over the last ``k`` axes, and 1 / sqrt(var + eps)."""
    axes = tuple(range(x.ndim - k, x.ndim))
    centered = x - xp.mean(x, axis=axes, keepdims=True)
    rstd = 1 / xp.sqrt(xp.mean(centered * centered, axis=axes, keepdims=True) + eps)
    return centered * rstd, rstd, axes


def _layer_norm(xp, x, weight, bias, k, eps):
    y, _, _ = _normalized(xp, x, k, eps)
    if weight is not None:
        y = y * weight
    return y if bias is None else y + bias


def _layer_norm_rule(xp, g, ans, x, weight, bias, *, k, eps):
    """dx = rstd (gh - mean(gh) - xhat mean(gh xhat)), gh = g w; dw = g xhat, db = g
    (summed over the leading axes by the graph)."""
    xhat, rstd, axes = _normalized(xp, x, k, eps)
    gh = g if weight is None else g * weight
    mean_g = xp.mean(gh, axis=axes, keepdims=True)
    mean_gx = xp.mean(gh * xhat, axis=axes, keepdims=True)
    gx = rstd * (gh - mean_g - xhat * mean_gx)
    return gx, (None if weight is None else g * xhat), (None if bias is None else g)


defop(
    "nn.layer_norm",
    vjp=_layer_norm_rule,
    chapter=CH,
    impl=lambda B: lambda x, w, b, *, k, eps: _layer_norm(B, x, w, b, k, eps),
    saves=(0, 1),
    doc="(x - mean) / sqrt(var + eps) * weight + bias over the trailing axes",
)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the trailing ``normalized_shape`` axes (biased variance, as
    torch), then scale by ``weight`` and shift by ``bias`` (both of that shape); ``eps``
    >= 0."""
    shape = checks.integers("layer_norm", "normalized_shape", normalized_shape, low=0)
    shape = tuple(int(n) for n in shape)
    checks.number("layer_norm", "eps", eps, low=0)
    return _layer_norm_checked(input, shape, weight, bias, float(eps))


def _layer_norm_checked(input, shape, weight, bias, eps):
    """``layer_norm`` of checked arguments (a tuple of ints, a float): the shapes are
    checked here."""
    k = len(shape)
    if k == 0 or tuple(input.shape[input.ndim - k :]) != shape:
        raise ValueError(
            f"layer_norm: normalized_shape {shape} doesn't match the trailing axes of the "
            f"input, shape {tuple(input.shape)}"
        )
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != shape:
            raise ValueError(f"layer_norm: {name} has shape {tuple(p.shape)}, expected {shape}")
    return recorder_of(input, weight, bias).xp.nn.layer_norm(input, weight, bias, k=k, eps=eps)


# -- embedding ----------------------------------------------------------------------
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
    z = xp.zeros(weight.shape, dtype=g.dtype, device=g.device)
    return xp.index_add(z, idx, rows, axis=0)


def _embedding_jvp(xp, ts, ans, weight, indices, *, padding_idx):
    """The tangent's rows at the indices; none at the padding row (it gets no gradient)."""
    rows = _embedding(xp, ts[0], indices)
    if padding_idx is None:
        return rows
    keep = xp.expand_dims(indices != padding_idx, axis=-1)
    return xp.where(keep, rows, xp.zeros_like(rows))


defop(
    "nn.embedding",
    _embedding_rule,
    None,
    chapter=CH,
    impl=lambda B: lambda weight, indices, *, padding_idx: _embedding(B, weight, indices),
    saves=(1,),
    jvp=_embedding_jvp,
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


# -- dropout --------------------------------------------------------------------------
def _dropout_rule(xp, g, ans, x, scale):
    return g * scale


defop(
    "nn.dropout",
    _dropout_rule,
    None,
    chapter=CH,
    impl=lambda B: lambda x, scale: x * scale,
    saves=(1,),
    linear=True,  # the saved mask times the tangent
    doc="x times a saved mask of 0 and 1 / (1 - p)",
)


def dropout(input, p=0.5, training=True, seed=None):
    """Zero each element with probability ``p`` and scale the rest by 1 / (1 - p)
    (inverted dropout); the identity when not ``training`` or ``p == 0``.

    ``seed`` (an int) makes the mask reproducible; without it each call draws a
    new one. The standard has no random numbers: the mask comes from the backend's
    ``bernoulli`` kernel: drawn by NumPy on the host and copied to the device once
    (never back), or on the device by CuPy's generator (the same seed then gives
    another mask than on NumPy).
    """
    checks.number("dropout", "p", p, 0.0, 1.0)
    checks.flag("dropout", "training", training)
    if seed is not None:
        seed = int(checks.integer("dropout", "seed", seed, low=0))
    if not training or p == 0.0:
        return input
    return _dropout(input, p, seed)


class _Masks(threading.local):
    """Where this thread's dropout masks come from: the backend's ``bernoulli``, or, while
    a checkpointed function runs (autodiff/checkpoint.py), ``draw(B, shape, keep, seed)``,
    which logs each mask's seed in its forward and draws the same mask again when it is
    recomputed."""

    draw = None


masks = _Masks()


def _dropout(input, p, seed):
    """``dropout`` while training, of checked arguments (0 < p <= 1, seed None or an int)."""
    rec = recorder_of(input)
    xp = rec.namespace
    draw = masks.draw
    shape = tuple(input.shape)
    if draw is None:
        keep = rec.backend.bernoulli(shape, 1.0 - p, seed)
    else:
        keep = draw(rec.backend, shape, 1.0 - p, seed)
    scale = xp.asarray(keep, dtype=input.dtype, device=input.device)
    if p < 1.0:
        scale = scale * (1.0 / (1.0 - p))
    return rec.xp.nn.dropout(input, scale)
