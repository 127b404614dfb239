"""CuPy fast paths of the kernels (imported only when cupy is the backend).

Each mirrors ``numpy_fast`` with CuPy's calls: every result stays on the device
of its input and nothing is read back to the host.
"""

from __future__ import annotations

import contextlib

import cupy as cp
import cupyx

from . import generic

ARRAY_TYPE = cp.ndarray
# CuPy returns 0-d arrays, never scalars, from reductions and ufuncs.
SCALAR_TYPES = ()

# dtypes with a CUDA atomicAdd, which scatter_add needs; others take the generic path.
_ATOMIC = frozenset(("float16", "float32", "float64", "int32", "uint32", "uint64"))


def _on(x):
    """The device of ``x`` as a context, so new arrays land beside it (not on the current one)."""
    device = getattr(x, "device", None)
    return device if hasattr(device, "__enter__") else contextlib.nullcontext()


def index_add(xp, x, indices, values, axis=0):
    """``cupyx.scatter_add`` on a copy: duplicates accumulate (see generic.index_add)."""
    if x.dtype.name not in _ATOMIC:
        return generic.index_add(xp, x, indices, values, axis=axis)
    with _on(x):
        return index_add_(xp, cp.array(x, copy=True), indices, values, axis=axis)


def index_add_(xp, x, indices, values, axis=0):
    """``cupyx.scatter_add`` into ``x`` itself (the caller's own array; use the result)."""
    if x.dtype.name not in _ATOMIC:
        return generic.index_add(xp, x, indices, values, axis=axis)
    axis = axis % x.ndim
    with _on(x):
        key = (slice(None),) * axis + (cp.reshape(indices, (-1,)),)
        try:
            # scatter_add adds values of the target's dtype; numpy.add.at casts, so cast too.
            cupyx.scatter_add(x, key, cp.asarray(values, dtype=x.dtype))
        except TypeError:  # an older CuPy, without scatter_add for this dtype
            return generic.index_add(xp, x, indices, values, axis=axis)
    return x


def own(xp, x):
    """A copy only when ``x`` is a view (of another gradient, or a broadcast)."""
    # CuPy arrays have no read-only flag: broadcasts and strided windows are views, so
    # owning the memory (no base) is what makes in-place accumulation safe.
    if x.base is None:
        return x
    with _on(x):
        return cp.array(x, copy=True)


def apply_(xp, name, x):
    """``cupy.<name>(x, out=x)``: no new array (``x`` is the caller's temporary)."""
    with _on(x):
        if x.dtype.kind in "fc":
            return getattr(cp, name)(x, out=x)
        return getattr(cp, name)(x)


def matmul_stack(xp, pairs, axis, perm):
    """``generic.matmul_stack`` with each product computed into its place of the result."""
    with _on(pairs[0][0]):
        return generic.matmul_stack_out(cp, pairs, axis, perm)


_rng = None


def bernoulli(xp, shape, keep, seed=None):
    """A device array of 0.0 and 1.0, 1 with probability ``keep``, drawn by CuPy's RNG.

    ``seed`` makes it reproducible on CuPy, but the mask differs from the NumPy
    backend's for the same seed (a different generator).
    """
    global _rng
    if seed is None:
        # One generator for the process, as generic.bernoulli: unseeded calls differ.
        if _rng is None:
            _rng = cp.random.RandomState()
        gen = _rng
    else:
        gen = cp.random.RandomState(seed)
    return (gen.random_sample(shape) < keep).astype(cp.float64)


def pad2d(xp, x, pads, value=0.0):
    """``cupy.pad`` of the last two axes with a constant."""
    with _on(x):
        return generic.pad2d_library(cp, x, pads, value)


def windows2d(xp, x, kernel, stride, dilation, out):
    """Sliding windows as a strided view (no copy): (..., kh, kw, oh, ow)."""
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, stride, dilation, out
    *lead, s_h, s_w = x.strides
    shape = tuple(x.shape[:-2]) + (kh, kw, oh, ow)
    strides = tuple(lead) + (s_h * dh, s_w * dw, s_h * sh, s_w * sw)
    return cp.lib.stride_tricks.as_strided(x, shape=shape, strides=strides)


def col2im2d(xp, cols, size, stride, dilation):
    """Adjoint of ``windows2d``: in-place adds of each kernel offset's plane."""
    with _on(cols):
        return generic.col2im2d_views(cp, cols, size, stride, dilation)


def col2im2d_rows(xp, cols, size, dilation):
    """Stride-1 col2im as long shifted adds (see generic.col2im2d_rows_views)."""
    with _on(cols):
        return generic.col2im2d_rows_views(cp, cols, size, dilation)


def may_share_memory(xp, a, b):
    return cp.may_share_memory(a, b)
