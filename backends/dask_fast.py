"""Dask fast paths (imported only when dask is the backend): every result stays lazy.

What array-api-compat's dask namespace lacks or gets wrong, filled here:

- ``linalg.det``, ``slogdet``, ``eigh``, ``eigvalsh``, ``eig``, ``eigvals``, ``pinv``,
  ``cholesky``, ``qr``, ``svd``, ``svdvals``, ``inv`` and ``solve`` run NumPy's
  function on each block of whole matrices (``map_blocks``): each matrix must lie in
  one chunk (the last two axes unchunked; the leading axes may be chunked), else a
  ``ValueError`` says how to rechunk. array-api-compat's dask namespace lacks the first
  six; its ``cholesky`` returns the upper factor; dask's ``qr``, ``svd``, ``inv`` and
  ``solve`` take one matrix only, and neither ``mode="complete"`` nor
  ``full_matrices=True``. A single chunked matrix keeps dask's own blocked algorithm
  where it has one (``inv``, ``solve``, reduced ``qr`` and ``svd``, ``svdvals``).
  ``matrix_norm``'s 2, -2 and nuclear norms are reduced from ``svdvals``.
- ``linalg.matrix_power`` (repeated squaring with ``matmul``) and ``linalg.cross`` (its
  component formula) are written with dask's array functions and keep any chunking.
- ``index_add`` (the scatter-add of gradients): a single task running ``numpy.add.at``
  over the whole arrays, split back into ``x``'s chunks; it also takes the operands of
  unknown (NaN) chunk sizes that a boolean mask makes, without computing them.
- ``repeat`` with ``axis=None`` (dask's needs an axis).
- ``eye`` of any shape (dask's fails to compute a non-square one).
- ``broadcast_to`` also takes a shape with unknown sizes equal to the array's own.
- ``persist``: ``dask.persist`` of the list, so an optimizer's next step starts from
  computed values.
"""

from __future__ import annotations

import collections
import math

import dask
import dask.array as da
import numpy as np
from array_api_compat.dask.array import linalg as _compat_linalg

ARRAY_TYPE = da.Array
# dask reductions return 0-d arrays, never scalars.
SCALAR_TYPES = ()


def _unknown(n):
    return isinstance(n, float) and math.isnan(n)


def broadcast_to(x, /, shape):
    """dask's ``broadcast_to``, which also takes a shape with unknown (NaN) sizes where
    ``x`` has unknown sizes too (a boolean mask's gradient meeting its own shape)."""
    shape = tuple(shape)
    if any(map(_unknown, shape)) and len(shape) == x.ndim:
        same = all(a == b or (_unknown(a) and _unknown(b)) for a, b in zip(x.shape, shape))
        if same:
            return x
    return da.broadcast_to(x, shape)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    """The identity (ones on diagonal ``k``) as a comparison of two ranges: dask's own
    ``eye`` of a non-square shape lists blocks its graph doesn't build (dask 2026.8)."""
    m = n_rows if n_cols is None else n_cols
    rows = da.arange(n_rows)[:, None] + k
    return (rows == da.arange(m)[None, :]).astype(np.float64 if dtype is None else dtype)


def repeat(x, repeats, /, *, axis=None):
    """dask's ``repeat``, also of a flattened array (``axis=None``)."""
    if axis is None:
        x, axis = da.reshape(x, (-1,)), 0
    return da.repeat(x, repeats, axis=axis)


FUNCTIONS = {"broadcast_to": broadcast_to, "eye": eye, "repeat": repeat}


def _add_at(x, indices, values, axis):
    out = np.array(x, copy=True)
    np.add.at(out, (slice(None),) * axis + (np.reshape(indices, (-1,)),), values)
    return out


def index_add(xp, x, indices, values, axis=0):
    """``numpy.add.at`` on a copy of ``x`` in one task: duplicates accumulate."""
    task = dask.delayed(_add_at, pure=True)(x, indices, values, axis % x.ndim)
    out = da.from_delayed(task, shape=x.shape, dtype=x.dtype, meta=x._meta)
    return out.rechunk(x.chunks)


def index_add_(xp, x, indices, values, axis=0):
    """``index_add``: a dask array can't be written in place."""
    return index_add(xp, x, indices, values, axis=axis)


def persist(xp, arrays):
    """The arrays with their values computed and kept (``dask.persist``), as a list."""
    return list(dask.persist(*arrays))


# -- linalg ---------------------------------------------------------------------------
def _matrices(name, x):
    """Check that every matrix of ``x`` lies in one chunk."""
    if x.ndim < 2:
        raise ValueError(
            f"linalg.{name}: expected a matrix or a stack of them, got shape {x.shape}"
        )
    if x.numblocks[-2] != 1 or x.numblocks[-1] != 1:
        raise ValueError(
            f"linalg.{name}: on dask each matrix must lie in one chunk (the last two axes "
            f"unchunked), got chunks {x.chunksize}; rechunk with "
            "x.rechunk({-2: -1, -1: -1})"
        )
    return x


def _per_matrix(name, fn, x, dtype, tail=None):
    """NumPy's ``fn`` on each block of whole matrices of ``x``; each matrix's result has
    shape ``tail`` (by default the matrix's own: ``()`` for a number, ``(k,)`` a vector)."""
    _matrices(name, x)
    tail = tuple(x.shape[-2:]) if tail is None else tuple(tail)
    chunks = x.chunks[:-2] + tuple((s,) for s in tail)
    drop = tuple(range(x.ndim - 2 + len(tail), x.ndim))
    meta = np.empty((0,) * len(chunks), dtype)
    return da.map_blocks(fn, x, dtype=dtype, chunks=chunks, drop_axis=drop, meta=meta)


def _chunked_matrix(x):
    """A single matrix split into several chunks: dask's own blocked algorithm applies."""
    return x.ndim == 2 and x.numblocks != (1, 1)


def inv(x, /):
    """The inverse of each matrix (dask's blocked LU for one chunked matrix)."""
    if _chunked_matrix(x):
        return _compat_linalg.inv(x)
    return _per_matrix("inv", np.linalg.inv, x, x.dtype)


def solve(x1, x2, /):
    """``x1 @ out = x2`` for each matrix of ``x1`` (``x2`` a vector if 1-D, else a stack of
    matrices; the stacks broadcast). One chunked matrix: dask's blocked LU."""
    if _chunked_matrix(x1) and x2.ndim <= 2:
        return _compat_linalg.solve(x1, x2)
    _matrices("solve", x1)
    vector = x2.ndim == 1
    b = x2[:, None] if vector else x2
    batch = np.broadcast_shapes(x1.shape[:-2], b.shape[:-2])
    a = da.broadcast_to(x1, batch + x1.shape[-2:])
    b = da.broadcast_to(b, batch + b.shape[-2:]).rechunk(
        a.chunks[:-2] + ((b.shape[-2],), (b.shape[-1],))
    )
    dtype = np.result_type(x1.dtype, x2.dtype)
    out = da.map_blocks(np.linalg.solve, a, b, dtype=dtype, chunks=b.chunks)
    return out[..., 0] if vector else out


def _complex(dtype):
    return np.result_type(dtype, np.complex64)


def det(x, /):
    """The determinant of each matrix (NumPy's LU per matrix)."""
    return _per_matrix("det", np.linalg.det, x, x.dtype, ())


def slogdet(x, /):
    """(sign, log|det|) of each matrix; log|det| is real."""
    real = np.empty((), x.dtype).real.dtype
    sign = _per_matrix("slogdet", lambda b: np.linalg.slogdet(b)[0], x, x.dtype, ())
    log = _per_matrix("slogdet", lambda b: np.linalg.slogdet(b)[1], x, real, ())
    return _compat_linalg.SlogdetResult(sign, log)


def eigh(x, /):
    """(eigenvalues ascending, eigenvectors) of each Hermitian matrix (its lower triangle)."""
    real = np.empty((), x.dtype).real.dtype
    w = _per_matrix("eigh", lambda b: np.linalg.eigh(b)[0], x, real, x.shape[-1:])
    v = _per_matrix("eigh", lambda b: np.linalg.eigh(b)[1], x, x.dtype)
    return _compat_linalg.EighResult(w, v)


def eigvalsh(x, /):
    real = np.empty((), x.dtype).real.dtype
    return _per_matrix("eigvalsh", np.linalg.eigvalsh, x, real, x.shape[-1:])


def eig(x, /):
    """(eigenvalues, eigenvectors) of each square matrix, complex (NumPy's order)."""
    c = _complex(x.dtype)
    w = _per_matrix("eig", lambda b: np.linalg.eig(b)[0].astype(c, copy=False), x, c, x.shape[-1:])
    v = _per_matrix("eig", lambda b: np.linalg.eig(b)[1].astype(c, copy=False), x, c)
    return _EigResult(w, v)


_EigResult = getattr(_compat_linalg, "EigResult", None) or collections.namedtuple(
    "EigResult", ["eigenvalues", "eigenvectors"]
)


def eigvals(x, /):
    c = _complex(x.dtype)
    return _per_matrix(
        "eigvals", lambda b: np.linalg.eigvals(b).astype(c, copy=False), x, c, x.shape[-1:]
    )


def cholesky(x, /, *, upper=False):
    """The lower (or, with ``upper``, upper) Cholesky factor of each matrix."""

    def factor(b):
        low = np.linalg.cholesky(b)
        return np.conj(np.swapaxes(low, -1, -2)) if upper else low

    return _per_matrix("cholesky", factor, x, x.dtype)


def pinv(x, /, *, rtol=None):
    """The pseudo-inverse of each matrix (NumPy's, through the SVD): shape (..., n, m)."""
    if rtol is not None and hasattr(rtol, "ndim"):
        raise TypeError("linalg.pinv: on dask rtol must be a Python float")
    m, n = x.shape[-2:]

    def fn(b):
        tol = max(m, n) * np.finfo(b.dtype).eps if rtol is None else rtol
        return np.linalg.pinv(b, rcond=tol)

    return _per_matrix("pinv", fn, x, x.dtype, (n, m))


def qr(x, /, *, mode="reduced"):
    """(Q, R) of each matrix; dask's tall-and-skinny QR for one chunked matrix."""
    if _chunked_matrix(x) and mode == "reduced":
        return _compat_linalg.qr(x)
    m, n = x.shape[-2:]
    k = m if mode == "complete" else min(m, n)
    q = _per_matrix("qr", lambda b: np.linalg.qr(b, mode=mode)[0], x, x.dtype, (m, k))
    r = _per_matrix("qr", lambda b: np.linalg.qr(b, mode=mode)[1], x, x.dtype, (k, n))
    return _compat_linalg.QRResult(q, r)


def svd(x, /, *, full_matrices=True):
    """(U, S, Vh) of each matrix; dask's own SVD for one chunked matrix (reduced only)."""
    if _chunked_matrix(x) and not full_matrices:
        return _compat_linalg.svd(x, full_matrices=False)
    m, n = x.shape[-2:]
    k = min(m, n)
    real = np.empty((), x.dtype).real.dtype
    shapes = ((m, m if full_matrices else k), (k,), (n if full_matrices else k, n))
    parts = [
        _per_matrix(
            "svd",
            lambda b, i=i: np.linalg.svd(b, full_matrices)[i],
            x,
            real if i == 1 else x.dtype,
            shapes[i],
        )  # fmt: skip
        for i in range(3)
    ]
    return _compat_linalg.SVDResult(*parts)


def svdvals(x, /):
    """The singular values of each matrix, descending."""
    if _chunked_matrix(x):
        return _compat_linalg.svd(x, full_matrices=False)[1]
    real = np.empty((), x.dtype).real.dtype
    fn = lambda b: np.linalg.svd(b, compute_uv=False)  # noqa: E731
    return _per_matrix("svdvals", fn, x, real, (min(x.shape[-2:]),))


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """array-api-compat's, with the singular-value norms (2, -2, nuc) of stacks too."""
    if ord not in (2, -2, "nuc"):
        return _compat_linalg.matrix_norm(x, keepdims=keepdims, ord=ord)
    s = svdvals(x)
    out = {2: da.max, -2: da.min, "nuc": da.sum}[ord](s, axis=-1)
    return out[..., None, None] if keepdims else out


def matrix_power(x, n, /):
    """``x`` to the integer power ``n`` by repeated squaring (a negative ``n`` inverts)."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f"linalg.matrix_power: n must be an integer, got {type(n).__name__}")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"linalg.matrix_power: expected square matrices, got shape {x.shape}")
    if n < 0:
        x, n = inv(x), -n
    result = None
    while n:
        if n & 1:
            result = x if result is None else result @ x
        n >>= 1
        if n:
            x = x @ x
    if result is None:
        eye = da.eye(x.shape[-1], dtype=x.dtype)
        result = da.broadcast_to(eye, x.shape).rechunk(x.chunks)
    return result


def _component(x, i, axis):
    after = -1 - axis if axis < 0 else x.ndim - 1 - axis
    return x[(..., i) + (slice(None),) * after]


def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-vectors along ``axis`` (the components' formula)."""
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(
            f"linalg.cross: axis {axis} must have size 3, got shapes {x1.shape} and {x2.shape}"
        )
    a = [_component(x1, i, axis) for i in range(3)]
    b = [_component(x2, i, axis) for i in range(3)]
    parts = [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
    return da.stack(parts, axis=axis if axis < 0 else axis - max(x1.ndim, x2.ndim))


LINALG = {
    "qr": qr,
    "svd": svd,
    "svdvals": svdvals,
    "matrix_norm": matrix_norm,
    "inv": inv,
    "solve": solve,
    "det": det,
    "slogdet": slogdet,
    "eigh": eigh,
    "eigvalsh": eigvalsh,
    "eig": eig,
    "eigvals": eigvals,
    "cholesky": cholesky,
    "pinv": pinv,
    "matrix_power": matrix_power,
    "cross": cross,
}
