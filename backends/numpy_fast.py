"""NumPy fast paths of the kernels (imported only when numpy is the backend)."""

from __future__ import annotations

import operator

import numpy as np

from . import generic

ARRAY_TYPE = np.ndarray
SCALAR_TYPES = (np.generic,)


def _direct():
    """Standard functions taken from NumPy itself rather than array-api-compat's
    wrappers: since NumPy 2.1 these have the standard's signature and semantics
    (``device=``, ``matrix_transpose``, ``permute_dims``), and skipping the wrapper
    saves a Python call on every use (they are on every layer's hot path).
    ``matrix_transpose`` is the ``.mT`` attribute read in C (numpy's function is two
    Python calls deep: a microsecond on every linear layer and every rule's transpose)."""
    major, minor = (int(p) for p in np.__version__.split(".")[:2])
    if (major, minor) < (2, 1):
        return {}
    names = ("asarray", "arange", "astype", "matmul", "permute_dims", "zeros", "ones", "empty",
             "zeros_like", "ones_like", "empty_like", "full_like")  # fmt: skip
    direct = {name: getattr(np, name) for name in names}
    direct["matrix_transpose"] = operator.attrgetter("mT")
    direct.update(reshape=_reshape, permute_dims=_permute_dims, sum=_sum)
    return direct


# The array methods, where numpy's functions are Python wrappers around them (a few
# tenths of a microsecond each, on every reshape and transpose of every layer and rule).
def _reshape(x, /, shape, *, copy=None):
    return x.reshape(shape) if copy is None else np.reshape(x, shape, copy=copy)


def _permute_dims(x, /, axes):
    return x.transpose(axes)


def _sum(x, /, *, axis=None, dtype=None, keepdims=False):
    # numpy.sum promotes small integers to the default integer (as the standard asks);
    # for floating inputs it is add.reduce, a microsecond of Python wrappers later.
    if dtype is None and x.dtype.kind not in "fc":
        return np.sum(x, axis=axis, keepdims=keepdims)
    return np.add.reduce(x, axis=axis, dtype=dtype, keepdims=keepdims)


FUNCTIONS = _direct()

# Python's operators on arrays, as the ufuncs they call (which take ``out=``)
_UFUNC_OF = {
    operator.add: np.add, operator.sub: np.subtract, operator.mul: np.multiply,
    operator.truediv: np.true_divide, operator.neg: np.negative, operator.lt: np.less,
    operator.le: np.less_equal, operator.gt: np.greater, operator.ge: np.greater_equal,
    operator.eq: np.equal, operator.ne: np.not_equal,
}  # fmt: skip


def into(fn):
    """``fn`` as a function that writes its result into ``out=`` (a ufunc of one output),
    or None: ``ad.jit``'s replay writes into an input's buffer where that input dies at
    the call, as hand-written NumPy reuses its temporaries."""
    if type(fn) is np.ufunc:
        return fn if fn.nout == 1 else None
    return _UFUNC_OF.get(fn)


def index_add(xp, x, indices, values, axis=0):
    """``numpy.add.at`` on a copy: duplicates accumulate (see generic.index_add)."""
    return index_add_(xp, np.array(x, copy=True), indices, values, axis=axis)


def index_add_(xp, x, indices, values, axis=0):
    """``numpy.add.at`` into ``x`` itself (the caller's own array)."""
    key = (slice(None),) * (axis % x.ndim) + (np.reshape(indices, (-1,)),)
    np.add.at(x, key, values)
    return x


def own(xp, x):
    """A copy only when ``x`` is a view (of another gradient, or a read-only broadcast)."""
    if x.base is None and x.flags.writeable:
        return x
    return np.array(x, copy=True)


def apply_(xp, name, x):
    """``numpy.<name>(x, out=x)``: no new array (``x`` is the caller's temporary), unless
    ``x`` holds integers (the result is floating) or is a NumPy scalar (0-d arithmetic
    gives one; it has no buffer to write into)."""
    if x.dtype.kind in "fc" and isinstance(x, np.ndarray):
        return getattr(np, name)(x, out=x)
    return np.asarray(getattr(np, name)(x))


def matmul_stack(xp, pairs, axis, perm):
    """``generic.matmul_stack`` with each product computed into its place of the result
    (``numpy.matmul(out=)`` into a permuted view): no temporaries, no stack copy."""
    return generic.matmul_stack_out(np, pairs, axis, perm)


def windows2d(xp, x, kernel, stride, dilation, out):
    """Sliding windows as a strided view (no copy): (..., kh, kw, oh, ow)."""
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, stride, dilation, out
    span = ((kh - 1) * dh + 1, (kw - 1) * dw + 1)
    v = np.lib.stride_tricks.sliding_window_view(x, span, axis=(-2, -1))
    v = v[..., : (oh - 1) * sh + 1 : sh, : (ow - 1) * sw + 1 : sw, ::dh, ::dw]
    return np.moveaxis(v, (-2, -1), (-4, -3))


def col2im2d(xp, cols, size, stride, dilation):
    """Adjoint of ``windows2d``: in-place adds of each kernel offset's plane."""
    return generic.col2im2d_views(np, cols, size, stride, dilation)


def col2im2d_rows(xp, cols, size, dilation):
    """Stride-1 col2im as long shifted adds (see generic.col2im2d_rows_views)."""
    return generic.col2im2d_rows_views(np, cols, size, dilation)


def may_share_memory(xp, a, b):
    return np.may_share_memory(a, b)  # bounds only: cheap, and exact for a copy
