"""Shorthands for registering rules, and the few helpers rules share."""

from __future__ import annotations

import math

from ..backends import device_of
from ..engine.registry import CONST, MISSING, defop


def unary(name, rule=None, *, chapter="elementwise", **meta):
    """An elementwise function of one array: ``rule(xp, g, ans, x)``."""
    return defop(name, *((rule,) if rule else ()), chapter=chapter, style="unary", **meta)


def binary(name, rule1=None, rule2=None, *, chapter="elementwise", **meta):
    """An elementwise function of two arrays (either may be a Python scalar)."""
    rules = (rule1, rule2) if (rule1 or rule2) else ()
    return defop(name, *rules, chapter=chapter, style="binary", **meta)


def nondiff(chapter, *names, **meta):
    """Functions whose outputs never carry a gradient (integer, boolean or piecewise
    constant results, or no array result at all)."""
    for name in names:
        defop(name, chapter=chapter, kind=CONST, **meta)


def missing(chapter, *names, **meta):
    """Functions without a rule yet: calling them on a tensor that requires grad
    raises NotImplementedError at once."""
    for name in names:
        defop(name, chapter=chapter, kind=MISSING, **meta)


def axes_of(axis, ndim):
    """``axis`` (None, int or tuple) as a sorted tuple of non-negative axes. A 0-d array
    has none (NumPy takes axis 0 or -1 there, and reduces over nothing)."""
    if axis is None or ndim == 0:
        return tuple(range(ndim))
    if isinstance(axis, int):
        axis = (axis,)
    return tuple(sorted(a % ndim for a in axis))


def keep_shape(shape, axes):
    """``shape`` with the reduced ``axes`` set to 1 (the keepdims shape)."""
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def expand(xp, g, shape, axis, keepdims=False):
    """The cotangent of a reduction, shaped to broadcast against the input's ``shape``
    (the reduced axes kept, of length 1).

    It is not broadcast here: the backward pass does that once where the gradient
    reaches a rule that needs the full shape, and an element-wise rule broadcasts it
    for free. On Dask, a broadcast made here would be one chunk spanning the whole
    reduced axis, re-chunked by every consumer (and held by one worker)."""
    axes = axes_of(axis, len(shape))
    if not keepdims:
        g = xp.reshape(g, keep_shape(shape, axes))
    return g


def reduced_shape(shape, axes, keepdims):
    """The output shape of a reduction of ``shape`` over ``axes``."""
    if keepdims:
        return keep_shape(shape, axes)
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def reduction_jvp(rule, real=True):
    """The JVP of a reduction from its VJP rule: each input element reaches one output
    element, so ``t_out = sum over the reduced axes of rule(ones) * t`` (``rule(ones)``
    holds each element's derivative; its real part for a real output of complex input,
    ``real=False`` for a holomorphic one: ``prod``). For ops
    ``f(x, *, axis=None, keepdims=False, ...)``."""

    def jvp(xp, ts, ans, x, *, axis=None, keepdims=False, **kw):
        axes = axes_of(axis, x.ndim)
        if ans is None:
            dtype = x.dtype
            if real and is_complex(xp, x):
                dtype = xp.float32 if x.dtype == xp.complex64 else xp.float64
            ones = xp.ones(reduced_shape(x.shape, axes, keepdims), dtype=dtype, device=device_of(x))
        else:
            ones = xp.ones_like(ans)
        d = rule(xp, ones, ans, x, axis=axis, keepdims=keepdims, **kw) * ts[0]
        if real and is_complex(xp, d):
            d = xp.real(d)
        return xp.sum(d, axis=axes, keepdims=keepdims)

    return jvp


def count(shape, axis):
    """Number of elements a reduction over ``axis`` combines."""
    return math.prod(shape[a] for a in axes_of(axis, len(shape)))


def count_of(xp, x, axis):
    """``count(x.shape, axis)``, or, where a size is unknown until computed (dask's NaN
    after a boolean mask), that count as a lazy array (kept dims): a NaN would make the
    gradient NaN."""
    sizes = [x.shape[a] for a in axes_of(axis, x.ndim)]
    if all(n == n and n is not None for n in sizes):
        return math.prod(sizes)
    ones = xp.ones_like(x)
    return xp.sum(ones, axis=axes_of(axis, x.ndim), keepdims=True)


def inverse_permutation(axes):
    inv = [0] * len(axes)
    for i, a in enumerate(axes):
        inv[a] = i
    return tuple(inv)


_COMPLEX: dict = {}  # (dtype class, dtype) -> complex floating? (isdtype is slow)


def is_complex(xp, a):
    """Whether the array ``a`` is complex floating."""
    # keyed with the class: two libraries' dtypes may hash alike, and compare with a warning
    key = (type(a.dtype), a.dtype)
    c = _COMPLEX.get(key)
    if c is None:
        c = _COMPLEX[key] = bool(xp.isdtype(a.dtype, "complex floating"))
    return c


def conj(xp, a):
    """``conj(a)``, and ``a`` itself when real (NumPy's conj of a real array copies)."""
    return xp.conj(a) if is_complex(xp, a) else a


def complex_of(xp, a):
    """``a`` as complex (float32 -> complex64, float64 -> complex128), as it is if so."""
    if is_complex(xp, a):
        return a
    return xp.astype(a, xp.complex64 if a.dtype == xp.float32 else xp.complex128)
