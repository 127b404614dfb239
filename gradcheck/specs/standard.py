"""Specs of the functions of the standard (main namespace, linalg, fft)."""

from __future__ import annotations

import math

import numpy as np

from autodiff.engine.namespace import recorder_of

from .common import PAIRS, SPECS, Sample, _away, _binary, _distinct, _in, _unary, fn, spec

# -- element-wise ---------------------------------------------------------------
for _n in ("acos", "acosh", "asin", "asinh", "atan", "atanh", "conj", "cos", "cosh", "exp",
           "expm1", "log", "log1p", "log2", "log10", "negative", "positive", "real",
           "reciprocal", "sin", "sinh", "sqrt", "square", "tan", "tanh"):  # fmt: skip
    _unary(_n, values=(lambda r, s: _away(r, s, 0.3, 1.5)) if _n == "reciprocal" else None)
# the inverse functions off their cuts on both sides of the imaginary axis (complex
# rules must follow the principal branch: acosh's derivative is not 1/sqrt(z^2 - 1))
_BRANCHES = np.array([-0.5 + 0.3j, 0.5 + 0.3j, -2.0 - 0.1j, 1.5 - 0.7j, -0.2 - 2.0j])
for _n in ("acos", "acosh", "asin", "asinh", "atan", "atanh", "log", "sqrt", "log1p"):
    SPECS[_n].make = (lambda old, n: lambda rng: old(rng) + [
        Sample((_BRANCHES,), lambda xp, a: fn(xp, n)(a), "complex, both half-planes")
    ])(SPECS[_n].make, _n)  # fmt: skip
_unary("abs", values=lambda r, s: _away(r, s))
_unary("sign", values=lambda r, s: _away(r, s))  # zero for real x; z/|z| for complex
_unary("imag", values=lambda r, s: _in(r, s) + 1j * _in(r, s))  # real inputs: strict refuses
for _n in ("add", "subtract", "multiply", "atan2", "logaddexp"):
    _binary(_n)
_binary("divide", values=lambda r, s, i: _away(r, s, 0.5, 1.5) if i else _in(r, s, -1.5, 1.5))
_binary("hypot", values=lambda r, s, i: _away(r, s, 0.3, 1.5))
_binary("nextafter")
_binary("pow", values=lambda r, s, i: _in(r, s, 0.5, 1.5) if i == 0 else _in(r, s, -1.5, 1.5))
# x1 = (fraction + 2k), x2 = +-2: x1 / x2 stays away from integers (the jumps).
_binary(
    "remainder",
    values=lambda r, s, i: _in(r, s, 0.1, 0.9) + 2.0 * r.integers(-2, 3, s)
    if i == 0 else 2.0 * r.choice([-1.0, 1.0], size=s),
)  # fmt: skip


def _copysign(rng):
    """Only x1 is differentiable (the sign of x2 is piecewise constant)."""
    out = []
    for s1, s2 in PAIRS:
        b = _away(rng, s2)
        out.append(
            Sample(
                (_away(rng, s1),),
                lambda xp, a, b=b: xp.copysign(a, xp.asarray(b)),
                f"{s1} with {s2}",
            )
        )
    return out


spec("copysign", _copysign)


def _extremum_values(rng, shape, i):
    base = _in(rng, shape, -1.0, 1.0)
    return base + (0.3 if i == 0 else -0.3) * rng.choice([-1, 1], size=shape)


_binary("maximum", values=_extremum_values)
_binary("minimum", values=_extremum_values)


def _clip(rng):
    x = _distinct(rng, 8).reshape(2, 4) * 1.5
    lo, hi = -0.53, 0.61
    return [
        Sample((x,), lambda xp, a: xp.clip(a, min=lo, max=hi), "scalar bounds"),
        Sample((x,), lambda xp, a: xp.clip(a, max=hi), "max only"),
        Sample((x, np.full((4,), -0.55), np.full((2, 1), 0.63)),
               lambda xp, a, b, c: xp.clip(a, b, c), "array bounds, broadcast"),
    ]  # fmt: skip


spec("clip", _clip)


# -- statistical ------------------------------------------------------------------
AXES = [None, 0, 1, -1, (0, 2)]


def _reductions(name, values=None, extra=None):
    def make(rng):
        out = []
        for axis in AXES:
            for keepdims in (False, True):
                x = values(rng, (2, 3, 4)) if values else _in(rng, (2, 3, 4))
                kws = {"axis": axis, "keepdims": keepdims, **(extra or {})}
                out.append(Sample((x,), lambda xp, a, kws=kws: fn(xp, name)(a, **kws),
                                  f"axis={axis}, keepdims={keepdims}"))  # fmt: skip
        x0 = values(rng, ()) if values else _in(rng, ())
        out.append(Sample((x0,), lambda xp, a: fn(xp, name)(a, **(extra or {})), "0-d"))
        x1 = values(rng, (1, 3)) if values else _in(rng, (1, 3))
        out.append(Sample((x1,), lambda xp, a: fn(xp, name)(a, axis=0, **(extra or {})),
                          "size-1 axis"))  # fmt: skip
        return out

    return make


def _distinct_values(rng, shape):
    return _distinct(rng, max(1, math.prod(shape))).reshape(shape)


spec("sum", _reductions("sum"))
spec("mean", _reductions("mean"))
spec("max", _reductions("max", _distinct_values))
spec("min", _reductions("min", _distinct_values))
spec("prod", lambda rng: _reductions("prod", lambda r, s: _in(r, s, 0.5, 1.5))(rng) + [
    Sample((np.array([[0.0, 2.0, 3.0], [1.5, 0.0, 0.0]]),),
           lambda xp, a: xp.prod(a, axis=1), "one and two zeros in a row"),
    Sample((np.array([0.0, 2.0, -1.5]),), lambda xp, a: xp.prod(a), "a zero, all axes"),
])  # fmt: skip


def _var_like(name):
    def make(rng):
        out = _reductions(name)(rng)[:-2]
        x = _in(rng, (3, 4))
        for c in (0.0, 1.0):
            out.append(Sample((x,), lambda xp, a, c=c: fn(xp, name)(a, axis=1, correction=c),
                              f"correction={c}"))  # fmt: skip
        return out

    return make


spec("var", _var_like("var"))
spec("std", _var_like("std"))


def _cumulative(name, values):
    def make(rng):
        out = []
        for axis in (0, 1, -1):
            for init in (False, True):
                x = values(rng, (3, 4))
                out.append(
                    Sample(
                        (x,),
                        lambda xp, a, axis=axis, init=init: fn(xp, name)(
                            a, axis=axis, include_initial=init
                        ),
                        f"axis={axis}, include_initial={init}",
                    )
                )
        out.append(Sample((values(rng, (5,)),), lambda xp, a: fn(xp, name)(a), "1-D"))
        return out

    return make


spec("cumulative_sum", _cumulative("cumulative_sum", _in))
spec("cumulative_prod", lambda rng: _cumulative("cumulative_prod", lambda r, s: _in(r, s, 0.5, 1.5))(rng) + [
    Sample((np.array([[1.5, 0.0, 2.0, -1.2], [0.0, 1.1, 0.0, 0.9], [0.7, 0.8, 1.3, 0.0]]),),
           lambda xp, a: xp.cumulative_prod(a, axis=1), "zeros: first, repeated, last"),
])  # fmt: skip


# -- linear algebra ----------------------------------------------------------------
MATMUL_SHAPES = [((3,), (3,)), ((3,), (3, 2)), ((2, 3), (3,)), ((2, 3), (3, 4)),
                 ((5, 2, 3), (3, 4)), ((2, 1, 2, 3), (3, 3, 2)), ((3,), (4, 3, 2)),
                 ((4, 2, 3), (3,))]  # fmt: skip


def _matmul(name):
    def make(rng):
        return [Sample((_in(rng, a), _in(rng, b)), lambda xp, x, y: fn(xp, name)(x, y),
                       f"{a} @ {b}") for a, b in MATMUL_SHAPES]  # fmt: skip

    return make


def _tensordot(name):
    def make(rng):
        cases = [((2, 3, 4), (3, 4, 5), 2), ((2, 3), (3, 4), 1), ((2, 3), (4, 5), 0),
                 ((2, 3, 4), (4, 2, 3), ([0, 1], [1, 2])), ((3, 4, 2), (2, 3), ([2, 0], [0, 1]))]  # fmt: skip
        return [Sample((_in(rng, a), _in(rng, b)),
                       lambda xp, x, y, ax=ax: fn(xp, name)(x, y, axes=ax), f"{a}, {b}, axes={ax}")
                for a, b, ax in cases]  # fmt: skip

    return make


def _vecdot(name):
    def make(rng):
        cases = [((3,), (3,), -1), ((2, 3), (3,), -1), ((4, 2), (3, 4, 2), -1), ((3, 4), (3, 4), -2),
                 ((2, 1, 3), (4, 3), -1)]  # fmt: skip
        return [Sample((_in(rng, a), _in(rng, b)),
                       lambda xp, x, y, ax=ax: fn(xp, name)(x, y, axis=ax), f"{a}, {b}, axis={ax}")
                for a, b, ax in cases]  # fmt: skip

    return make


def _transpose(name):
    return lambda rng: [Sample((_in(rng, s),), lambda xp, a: fn(xp, name)(a), f"{s}")
                        for s in ((2, 3), (4, 2, 3))]  # fmt: skip


for _p in ("", "linalg."):
    spec(_p + "matmul", _matmul(_p + "matmul"))
    spec(_p + "tensordot", _tensordot(_p + "tensordot"))
    spec(_p + "vecdot", _vecdot(_p + "vecdot"))
    spec(_p + "matrix_transpose", _transpose(_p + "matrix_transpose"))


# -- manipulation ------------------------------------------------------------------
def _simple(name, cases):
    """cases: (shape, kwargs or positional extras, label)."""

    def make(rng):
        out = []
        for shape, extra in cases:
            args, kws = extra if isinstance(extra, tuple) else ((), extra)
            out.append(Sample((_in(rng, shape),),
                              lambda xp, a, args=args, kws=kws: fn(xp, name)(a, *args, **kws),
                              f"{shape}, {args or ''}{kws or ''}"))  # fmt: skip
        return out

    spec(name, make)


_simple("reshape", [((2, 3), (((6,),), {})), ((2, 3, 2), (((3, -1),), {})), ((), (((1, 1),), {}))])
_simple("expand_dims", [((2, 3), {"axis": 0}), ((2, 3), {"axis": -1}), ((3,), {"axis": (0, 2)})])
_simple("squeeze", [((1, 3, 1), {"axis": 0}), ((1, 3, 1), {"axis": (0, 2)})])
_simple("permute_dims", [((2, 3, 4), (((2, 0, 1),), {})), ((2, 3), (((1, 0),), {}))])
_simple("flip", [((2, 3), {}), ((2, 3, 4), {"axis": 1}), ((2, 3, 4), {"axis": (0, 2)})])
_simple("roll", [((5,), ((2,), {})), ((2, 3), ((1,), {"axis": 1})),
                 ((2, 3), (((1, -2),), {"axis": (0, 1)}))])  # fmt: skip
_simple("moveaxis", [((2, 3, 4), ((0, 2), {})), ((2, 3, 4), (((0, 1), (2, 0)), {}))])
_simple("broadcast_to", [((3,), (((2, 3),), {})), ((2, 1), (((2, 4),), {})), ((), (((2, 2),), {}))])
_simple("tile", [((2, 3), (((2, 1),), {})), ((3,), (((2, 2),), {})), ((2, 3), (((2,),), {}))])
_simple("repeat", [((2, 3), ((2,), {"axis": 1})), ((2, 3), ((3,), {}))])
_simple("tril", [((3, 4), {}), ((2, 3, 3), {"k": 1})])
_simple("triu", [((3, 4), {}), ((2, 3, 3), {"k": -1})])


def _repeat_array(rng):
    x = _in(rng, (2, 3))
    return [
        Sample((x,), lambda xp, a: xp.repeat(a, xp.asarray([1, 0, 3]), axis=1), "array repeats")
    ]


SPECS["repeat"].make = (lambda old: lambda rng: old(rng) + _repeat_array(rng))(SPECS["repeat"].make)


def _joining(name):
    def make(rng):
        if name == "concat":
            cases = [(((2, 3), (1, 3)), {"axis": 0}), (((2, 3), (2, 2)), {"axis": -1}),
                     (((2, 3), (4,)), {"axis": None})]  # fmt: skip
        else:
            cases = [(((2, 3), (2, 3)), {"axis": 0}), (((2, 3), (2, 3), (2, 3)), {"axis": -1})]
        return [Sample(tuple(_in(rng, s) for s in shapes),
                       lambda xp, *ts, kws=kws: fn(xp, name)(list(ts), **kws), f"{shapes}, {kws}")
                for shapes, kws in cases]  # fmt: skip

    spec(name, make)


_joining("concat")
_joining("stack")
spec("unstack", lambda rng: [Sample((_in(rng, (3, 2)),), lambda xp, a, a_=a_: xp.unstack(a, axis=a_), f"axis={a_}")
                             for a_ in (0, 1)])  # fmt: skip
spec("broadcast_arrays", lambda rng: [Sample((_in(rng, (3, 1)), _in(rng, (4,))),
                                             lambda xp, a, b: xp.broadcast_arrays(a, b), "(3,1), (4,)")])  # fmt: skip
spec("meshgrid", lambda rng: [Sample((_in(rng, (3,)), _in(rng, (2,))),
                                     lambda xp, a, b, i=i: xp.meshgrid(a, b, indexing=i), f"indexing={i}")
                              for i in ("xy", "ij")])  # fmt: skip


# -- indexing -----------------------------------------------------------------------
def _take(rng):
    x = _in(rng, (4, 3))
    return [
        Sample((x,), lambda xp, a: xp.take(a, xp.asarray([2, 0, 2, 3]), axis=0), "repeated rows"),
        Sample((x,), lambda xp, a: xp.take(a, xp.asarray([1, 1]), axis=1), "axis=1"),
        Sample((_in(rng, (5,)),), lambda xp, a: xp.take(a, xp.asarray([4, 4, 0])), "1-D"),
    ]


def _take_along_axis(rng):
    x = _in(rng, (3, 4))
    return [
        Sample((x,), lambda xp, a: xp.take_along_axis(a, xp.asarray([[0, 0], [3, 1], [2, 2]]), axis=1),
               "axis=1, repeats"),
        Sample((x,), lambda xp, a: xp.take_along_axis(a, xp.asarray([[2, 0, 1, 1]]), axis=0), "axis=0"),
    ]  # fmt: skip


def _getitem(rng):
    x = _in(rng, (4, 3))
    return [
        Sample((x,), lambda xp, a: a[1:3, ::2], "slices"),
        Sample((x,), lambda xp, a: a[..., 1], "ellipsis, int"),
        Sample((x,), lambda xp, a: a[None, 2, ...], "newaxis"),
        Sample(
            (x,),
            lambda xp, a: a[xp.asarray([0, 2, 0, 0]), xp.asarray([1, 1, 2, 1])],
            "repeated integer arrays",
        ),
        Sample((x,), lambda xp, a: a[xp.real(a) > 0], "boolean mask"),
    ]


def _setitem_call(key, scalar=False):
    def call(xp, a, *v):
        out = a * 1.0
        out[key(xp)] = 0.5 if scalar else v[0]
        return out

    return call


def _setitem(rng):
    x = _in(rng, (4, 3))
    return [
        Sample(
            (x, _in(rng, (2, 3))), _setitem_call(lambda xp: (slice(1, 3), ...)), "slice <- array"
        ),
        Sample(
            (x, _in(rng, (1,))), _setitem_call(lambda xp: (slice(None), 1)), "column <- broadcast"
        ),
        Sample((x,), _setitem_call(lambda xp: (0, 0), scalar=True), "element <- scalar"),
    ]


def _index_add(rng):
    x = _in(rng, (4, 3))
    return [
        Sample((x, _in(rng, (5, 3))), lambda xp, a, v: recorder_of(a).xp.index_add(a, xp.asarray([1, 3, 1, 0, 1]), v, axis=0),
               "duplicates, axis=0"),
        Sample((x, _in(rng, (4, 2))), lambda xp, a, v: recorder_of(a).xp.index_add(a, xp.asarray([2, 2]), v, axis=1),
               "axis=1"),
    ]  # fmt: skip


spec("take", _take)
spec("take_along_axis", _take_along_axis)
spec("__getitem__", _getitem)
spec("__setitem__", _setitem)
spec("index_add", _index_add)


# -- searching, sorting, utility, data types ----------------------------------------------
def _where(rng):
    a, b = _in(rng, (2, 3)), _in(rng, (3,))
    # real(x) > 0: complex inputs (gradcheck --dtype complex128) have no order
    return [Sample((a, b), lambda xp, x, y: xp.where(xp.real(x) > 0, x, y), "broadcast"),
            Sample((a,), lambda xp, x: xp.where(xp.real(x) > 0, x, 0.0), "scalar branch")]  # fmt: skip


spec("where", _where)
spec("sort", lambda rng: [
    Sample((_distinct_values(rng, (3, 4)),), lambda xp, a: xp.sort(a, axis=1), "axis=1"),
    Sample((_distinct_values(rng, (3, 4)),), lambda xp, a: xp.sort(a, axis=0, descending=True), "descending"),
])  # fmt: skip
# distinct values: with repeated ones, a small change makes a new unique value
spec("unique_values", lambda rng: [
    Sample((_distinct_values(rng, (2, 3)),), lambda xp, a: xp.unique_values(a), "2-D"),
])  # fmt: skip
for _n in ("unique_all", "unique_counts", "unique_inverse"):
    spec(_n, lambda rng, n=_n: [
        Sample((_distinct_values(rng, (5,)),), lambda xp, a: fn(xp, n)(a)[0] * 2.0, "values"),
    ])  # fmt: skip
spec("diff", lambda rng: [
    Sample((_in(rng, (3, 5)),), lambda xp, a: xp.diff(a), "axis=-1"),
    Sample((_in(rng, (4, 3)),), lambda xp, a: xp.diff(a, axis=0, n=2), "axis=0, n=2"),
    Sample((_in(rng, (2, 3)), _in(rng, (2, 1)), _in(rng, (2, 2))),
           lambda xp, a, p, q: xp.diff(a, prepend=p, append=q), "prepend, append"),
])  # fmt: skip


def _same_kind(xp, a):
    """float64, or complex128 for a complex input (casting complex to real drops the
    imaginary part: NumPy warns, array_api_strict refuses)."""
    return xp.complex128 if xp.isdtype(a.dtype, "complex floating") else xp.float64


spec("astype", lambda rng: [
    Sample((_in(rng, (3,)),), lambda xp, a: xp.astype(a, _same_kind(xp, a), copy=True), "copy"),
    Sample((_in(rng, (3,)),), lambda xp, a: xp.astype(a, xp.complex128) * (1 - 2j), "to complex"),
], atol=1e-5, rtol=1e-4)  # fmt: skip
spec("to_device", lambda rng: [
    Sample((_in(rng, (3,)),), lambda xp, a: a.to_device(a.device) * 2.0, "same device"),
])  # fmt: skip
