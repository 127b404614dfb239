"""Kernels in the Array API alone: they run on every conforming namespace and
device. Each takes the namespace first; a kernel written with another kernel
calls it through that namespace (``xp.index_add``), so that on autodiff's
recording namespace it is the differentiable op of that name."""

from __future__ import annotations


def device_of(x, /):
    """The device of the array or Tensor ``x``: its ``.device``, or array-api-compat's
    answer for a library whose arrays have none (dask's)."""
    d = getattr(x, "device", None)
    if d is None:
        import array_api_compat

        d = array_api_compat.device(x)
    return d


def index_add(xp, x, indices, values, axis=0):
    """``out = copy(x); out[..., indices[j], ...] += values[..., j, ...]`` along ``axis``.

    Duplicate indices accumulate. The standard has no scatter, so the sums are
    read from a cumulative sum over the values sorted by index (a gather at
    the segment ends): O(len(indices) + x.shape[axis]) memory, no one-hot
    matrix. Accumulation is in float64 where the device has it, so float32
    sums don't lose the small segments to cancellation.
    """
    axis = axis % x.ndim
    m = x.shape[axis]
    device = device_of(x)
    indices = xp.reshape(indices, (-1,))
    if not hasattr(xp, "argsort"):  # the standard lets a library lack sorting (cubed)
        return x + _one_hot_sums(xp, indices, values, axis, m, x.dtype)
    order = xp.argsort(indices, stable=True)
    sorted_idx = xp.take(indices, order)
    v = xp.take(values, order, axis=axis)
    acc = _accumulator_dtype(xp, v.dtype, device)
    if acc != v.dtype:
        v = xp.astype(v, acc)
    csum = xp.cumulative_sum(v, axis=axis, include_initial=True)
    targets = xp.arange(m, dtype=sorted_idx.dtype, device=device)
    lo = xp.searchsorted(sorted_idx, targets, side="left")
    hi = xp.searchsorted(sorted_idx, targets, side="right")
    sums = xp.take(csum, hi, axis=axis) - xp.take(csum, lo, axis=axis)
    if sums.dtype != x.dtype:
        sums = xp.astype(sums, x.dtype)
    return x + sums


def _one_hot_sums(xp, indices, values, axis, m, dtype):
    """``index_add``'s sums with no sort: ``values`` contracted with the one-hot matrix
    of ``indices`` (len(indices) x m memory)."""
    targets = xp.arange(m, dtype=indices.dtype, device=device_of(values))
    one_hot = xp.astype(xp.reshape(indices, (-1, 1)) == targets, values.dtype)
    sums = xp.tensordot(xp.moveaxis(values, axis, -1), one_hot, axes=1)
    sums = xp.moveaxis(sums, -1, axis)
    return sums if sums.dtype == dtype else xp.astype(sums, dtype)


def index_add_(xp, x, indices, values, axis=0):
    """``index_add`` into ``x`` itself where the library can (``x`` must be the caller's
    own array; use the result). Here, in the standard alone, a new array."""
    return xp.index_add(x, indices, values, axis=axis)


def _parts(key, ndim):
    """The basic ``key`` as a tuple with its ``...`` spelt out as full slices."""
    parts = key if isinstance(key, tuple) else (key,)
    used = sum(1 for k in parts if k is not None and k is not Ellipsis)
    out = []
    for k in parts:
        if k is Ellipsis:
            out += [slice(None)] * (ndim - used)
        else:
            out.append(k)
    if Ellipsis not in parts:
        out += [slice(None)] * (ndim - used)
    return out


def _place(xp, g, axis, n, start, step, k):
    """``g`` (``k`` long along ``axis``) laid at ``start, start+step, ...`` of a zero axis
    of length ``n`` without item assignment: zeros concatenated around it (a step of 1)
    or a gather masked by ``where``."""
    device = device_of(g)

    def zeros(m):
        shape = tuple(g.shape[:axis]) + (m,) + tuple(g.shape[axis + 1 :])
        return xp.zeros(shape, dtype=g.dtype, device=device)

    if k == 0:
        return zeros(n)
    if k > 1 and abs(step) > 1:  # a gather: element j of g lands at start + j*step
        d = xp.arange(n, device=device)
        d = d - start if step > 0 else start - d
        j = d // abs(step)
        valid = (d >= 0) & (d % abs(step) == 0) & (j < k)
        out = xp.take(g, xp.where(valid, j, xp.zeros_like(j)), axis=axis)
        shape = [1] * g.ndim
        shape[axis] = n
        return xp.where(xp.reshape(valid, tuple(shape)), out, xp.zeros_like(out))
    if step < 0:  # the same positions, walked forwards
        g = xp.flip(g, axis=axis)
        start = start + (k - 1) * step
    span = g.shape[axis]
    pieces = ([zeros(start)] if start else []) + [g]
    if n - start - span:
        pieces.append(zeros(n - start - span))
    return xp.concat(pieces, axis=axis) if len(pieces) > 1 else g


def embed(xp, g, shape, key):
    """A zero array of ``shape`` with ``g`` written at the basic index ``key`` (slices,
    integers, ``None``, ``...``): the adjoint of ``x[key]``. Where the library has no
    item assignment, each indexed axis is laid out in turn (:func:`_place`)."""
    if xp.mutable:  # the key as it is: the backward of every x[i] takes this path
        # (written for speed: a replayed ad.jit step runs it on every x[i]'s gradient)
        z = xp.zeros(shape if type(shape) is tuple else tuple(shape), dtype=g.dtype,
                     device=device_of(g))  # fmt: skip
        if 0 in g.shape:  # nothing to write (dask refuses an empty write)
            return z
        parts = key if type(key) is tuple else (key,)
        for k in parts:
            if k is None:  # new axes: dropped from the key and from g
                key = tuple(k for k in parts if k is not None)
                g = xp.reshape(g, tuple(z[key].shape))
                break
        z[key] = g
        return z
    parts = _parts(key, len(shape))
    if any(k is None for k in parts):  # new axes: drop them from g
        g = xp.reshape(g, tuple(s for s, k in zip(g.shape, _g_axes(parts)) if k is not None))
        parts = [k for k in parts if k is not None]
    axis = 0  # g's axis matching parts[i]
    for n, k in zip(shape, parts):
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            g = _place(xp, g, axis, n, start, step, len(range(start, stop, step)))
        else:  # an integer: a length-1 axis of g
            g = _place(xp, xp.expand_dims(g, axis=axis), axis, n, k % n, 1, 1)
        axis += 1
    return g


def _g_axes(parts):
    """The key part each axis of ``x[key]`` comes from (integers leave no axis)."""
    return [k for k in parts if not isinstance(k, int) or isinstance(k, bool)]


def set_at(xp, x, key, value):
    """``out = copy(x); out[key] = value`` (numpy's semantics: repeated integer indices,
    the last write wins), without writing into ``x``: on a library without item
    assignment, a ``where`` (basic keys) or a gather of the last write at each position
    (array keys), in the standard alone."""
    if xp.mutable:
        out = xp.asarray(x, copy=True)
        out[key] = value
        return out
    device = device_of(x)
    if not hasattr(value, "shape"):
        value = xp.asarray(value, dtype=x.dtype, device=device)
    if value.dtype != x.dtype:
        value = xp.astype(value, x.dtype)
    if _is_basic(key):
        region = tuple(x[key].shape)
        value = xp.broadcast_to(value, region)
        mask = embed(xp, xp.ones(region, dtype=xp.bool, device=device), x.shape, key)
        return xp.where(mask, embed(xp, value, x.shape, key), x)
    n = 1
    for s in x.shape:
        n *= s
    positions = xp.reshape(xp.arange(n, device=device), tuple(x.shape))[key]
    value = xp.reshape(xp.broadcast_to(value, tuple(positions.shape)), (-1,))
    positions = xp.reshape(positions, (-1,))
    m = positions.shape[0]
    if m == 0:
        return x
    targets = xp.arange(n, dtype=positions.dtype, device=device)
    if hasattr(xp, "argsort"):
        order = xp.argsort(positions, stable=True)
        ranked = xp.take(positions, order)
        last = xp.clip(xp.searchsorted(ranked, targets, side="right") - 1, 0, m - 1)
        covered = xp.take(ranked, last) == targets
        last = xp.take(order, last)
    else:  # no sorting (cubed): the last write of each position from a (m, n) match
        hits = xp.reshape(positions, (-1, 1)) == targets
        written = xp.reshape(xp.arange(m, dtype=positions.dtype, device=device), (-1, 1))
        last = xp.max(xp.where(hits, written, -xp.ones_like(written)), axis=0)
        covered = last >= 0
        last = xp.where(covered, last, xp.zeros_like(last))
    flat = xp.where(covered, xp.take(value, last), xp.reshape(x, (-1,)))
    return xp.reshape(flat, tuple(x.shape))


def set_(xp, x, key, value):
    """``x[key] = value`` into ``x`` itself where the library can (``x`` must be the
    caller's own array; use the result); else :func:`set_at`, a new array."""
    if xp.mutable:
        x[key] = value
        return x
    return xp.set_at(x, key, value)


def _is_basic(key):
    parts = key if isinstance(key, tuple) else (key,)
    return all(k is None or k is Ellipsis or isinstance(k, (int, slice)) for k in parts)


def take_along_axis(xp, x, indices, /, *, axis=-1):
    """``out[..., j, ...] = x[..., indices[..., j, ...], ...]`` along ``axis`` (the other
    axes broadcast), for namespaces without it: one ``take`` from the flattened ``x``
    at ``row * n + index``."""
    axis = axis % x.ndim
    x = xp.moveaxis(x, axis, -1)
    idx = xp.moveaxis(indices, axis, -1)
    n, k = x.shape[-1], idx.shape[-1]
    lead = _broadcast(x.shape[:-1], idx.shape[:-1])
    x = xp.broadcast_to(x, lead + (n,))
    idx = xp.broadcast_to(idx, lead + (k,))
    idx = xp.where(idx < 0, idx + n, idx)  # negative indices count from the end
    rows = 1
    for s in lead:
        rows *= s
    start = xp.reshape(xp.arange(rows, dtype=idx.dtype, device=device_of(x)) * n, lead + (1,))
    out = xp.take(xp.reshape(x, (-1,)), xp.reshape(idx + start, (-1,)))
    return xp.moveaxis(xp.reshape(out, lead + (k,)), -1, axis)


def _broadcast(a, b):
    """The broadcast of two shapes (tuples of ints)."""
    a, b = (1,) * (len(b) - len(a)) + tuple(a), (1,) * (len(a) - len(b)) + tuple(b)
    out = []
    for m, n in zip(a, b):
        if m != n and 1 not in (m, n):
            raise ValueError(f"take_along_axis: shapes {a} and {b} don't broadcast")
        out.append(n if m == 1 else m)
    return tuple(out)


def matmul_stack(xp, pairs, axis, perm):
    """``stack([permute_dims(a @ b, perm) for a, b in pairs], axis=axis)``: products laid
    out side by side (attention's dq, dk, dv in the packed q|k|v layout). NumPy and
    CuPy compute each product straight into its place (no stack copy)."""
    return xp.stack([xp.permute_dims(a @ b, perm) for a, b in pairs], axis=axis)


def apply_(xp, name, x):
    """``xp.<name>(x)`` for a unary element-wise function, written into ``x``'s buffer
    where the library can (``out=``); ``x`` must be a temporary of the caller. Here, in
    the standard alone, a new array."""
    return getattr(xp, name)(x)


def _accumulator_dtype(xp, dtype, device):
    if dtype == xp.float32 and hasattr(xp, "float64"):
        try:
            dtypes = xp.__array_namespace_info__().dtypes(device=device, kind="real floating")
        except Exception:
            return dtype
        if "float64" in dtypes:
            return xp.float64
    return dtype


def own(xp, x):
    """``x`` as an array nothing else refers to (a leaf's ``.grad`` must not alias
    another gradient or a read-only broadcast view). Without a way to tell, copy."""
    return xp.asarray(x, copy=True)


_rng = None


def bernoulli(xp, shape, keep, seed=None):
    """A host (NumPy) array of 0.0 and 1.0, 1 with probability ``keep``. The standard
    has no random numbers; callers move the result to their device once."""
    import numpy as np

    global _rng
    if seed is None:
        if _rng is None:
            _rng = np.random.default_rng()
        gen = _rng
    else:
        gen = np.random.default_rng(seed)
    return (gen.random(shape) < keep).astype(np.float64)


def pad2d(xp, x, pads, value=0.0):
    """Pad the last two axes: ``pads = (top, bottom, left, right)``, filled with ``value``."""
    top, bottom, left, right = pads
    h, w = x.shape[-2], x.shape[-1]
    shape = tuple(x.shape[:-2]) + (h + top + bottom, w + left + right)
    device = getattr(x, "device", None)
    if value == 0:  # zeros: no fill pass where the library gets zeroed memory
        out = xp.zeros(shape, dtype=x.dtype, device=device)
    else:
        out = xp.full(shape, value, dtype=x.dtype, device=device)
    return xp.set_(out, (..., slice(top, top + h), slice(left, left + w)), x)


def _offset(i, d, s, n):
    """The rows a kernel offset ``i`` reads for ``n`` outputs (stride s, dilation d)."""
    return slice(i * d, i * d + (n - 1) * s + 1, s)


def windows2d(xp, x, kernel, stride, dilation, out):
    """Sliding windows of the last two axes: (..., kh, kw, oh, ow), one strided
    slice per kernel offset (the loop is over kh * kw, never over pixels)."""
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, stride, dilation, out
    rows = [
        x[..., _offset(i, dh, sh, oh), _offset(j, dw, sw, ow)] for i in range(kh) for j in range(kw)
    ]
    stacked = xp.stack(rows, axis=-3)
    return xp.reshape(stacked, tuple(x.shape[:-2]) + (kh, kw, oh, ow))


def pad2d_library(lib, x, pads, value=0.0):
    """``pad2d`` with a library's own ``pad`` (NumPy, CuPy): one call, no slicing."""
    top, bottom, left, right = pads
    width = [(0, 0)] * (x.ndim - 2) + [(top, bottom), (left, right)]
    return lib.pad(x, width, mode="constant", constant_values=value)


def col2im2d_views(xp, cols, size, stride, dilation):
    """``col2im2d`` for libraries whose slices are writable views (NumPy, CuPy): each
    kernel offset's plane is added in place, with no read-back copy."""
    kh, kw, oh, ow = cols.shape[-4:]
    (sh, sw), (dh, dw) = stride, dilation
    out = xp.zeros(tuple(cols.shape[:-4]) + tuple(size), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            view = out[..., _offset(i, dh, sh, oh), _offset(j, dw, sw, ow)]
            view += cols[..., i, j, :, :]
    return out


def matmul_stack_out(lib, pairs, axis, perm):
    """The stacked products of ``pairs`` in library ``lib`` (NumPy or CuPy): views of one
    new array written by ``matmul(out=)``."""
    a, b = pairs[0]
    lead = a.shape[:-2]
    if b.shape[:-2] != lead:  # numpy's broadcast_shapes costs microseconds: only if needed
        import numpy as np

        lead = np.broadcast_shapes(lead, b.shape[:-2])
    product = tuple(lead) + (a.shape[-2], b.shape[-1])
    laid = tuple(product[p] for p in perm)
    dtype = a.dtype if a.dtype == b.dtype else lib.result_type(a, b)
    out = lib.empty(laid[:axis] + (len(pairs),) + laid[axis:], dtype=dtype)
    inverse = tuple(sorted(range(len(perm)), key=perm.__getitem__))
    for i, (a, b) in enumerate(pairs):
        lib.matmul(a, b, out=out[(slice(None),) * axis + (i,)].transpose(inverse))
    return out


def col2im2d(xp, cols, size, stride, dilation):
    """The adjoint of ``windows2d``: add every window back where it was read,
    into an array whose last two axes have ``size``."""
    kh, kw, oh, ow = cols.shape[-4:]
    (sh, sw), (dh, dw) = stride, dilation
    out = xp.zeros(tuple(cols.shape[:-4]) + tuple(size), dtype=cols.dtype,
                   device=getattr(cols, "device", None))  # fmt: skip
    for i in range(kh):
        for j in range(kw):
            key = (..., _offset(i, dh, sh, oh), _offset(j, dw, sw, ow))
            out = xp.set_(out, key, out[key] + cols[..., i, j, :, :])
    return out


def col2im2d_rows(xp, cols, size, dilation):
    """Stride-1 ``col2im2d`` of windows computed on rows as wide as the output:
    ``cols`` is (..., kh, kw, oh, W) with W = size[1], zero beyond the ow valid
    columns of each row. Here, in the standard alone: those columns are cut off."""
    kw = cols.shape[-3]
    ow = size[1] - dilation[1] * (kw - 1)
    return xp.col2im2d(cols[..., :ow], size=size, stride=(1, 1), dilation=dilation)


def col2im2d_rows_views(xp, cols, size, dilation):
    """``col2im2d_rows`` for libraries with writable views (NumPy, CuPy): each kernel
    offset is one add of a long contiguous run, shifted in the flattened output (a
    row's zero tail lands on the next row's start, adding nothing). Rows of 14 or so
    elements made NumPy's strided adds several times slower."""
    kh, kw, oh, w = cols.shape[-4:]
    (dh, dw), lead = dilation, tuple(cols.shape[:-4])
    flat = xp.zeros(lead + (size[0] * w + (kw - 1) * dw,), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            start = i * dh * w + j * dw
            view = flat[..., start : start + oh * w]
            view += xp.reshape(cols[..., i, j, :, :], lead + (oh * w,))
    return xp.reshape(flat[..., : size[0] * w], lead + tuple(size))


def may_share_memory(xp, a, b):
    """Whether ``a`` and ``b`` may be views of one buffer (``a`` a view of ``b``, or a copy
    the library made instead). The standard can't tell: assume they may."""
    return True


def persist(xp, arrays):
    """``arrays`` (a list) with their values computed and kept, for a lazy library, so
    that the next step's graph starts from them and doesn't grow. Eager libraries
    hold values already: the list comes back as it is."""
    return list(arrays)
