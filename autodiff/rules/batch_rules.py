"""``vmap``'s batching rules, one per op, found by the op's name in the table ``RULES``.

:mod:`autodiff.batching` holds the machinery (batched values, dispatch, the fallback
loop, ``vmap`` itself) and the tables ``RULES`` and ``STYLE_RULES``, empty; this module
fills them when the package imports it (as ``vjps`` and ``nn.functional`` fill the
registry), so the machinery imports no rule. An op's rule is its registry field
``Op.batch`` if set, else ``RULES[op.name]``, else ``STYLE_RULES[op.style]`` (the
element-wise styles), else none: the fallback loop (``batching.rule_of``).

A rule is ``rule(c, *args, **kwargs)``. ``c`` is a :class:`~autodiff.batching.Call`:
``c.f``, the op's function (taking the recorded layout of arguments); ``c.xp``, the
recording namespace; ``c.n``, the batch size; ``c.bd``, per positional argument whether
it is batched (a tuple of flags for a list of arrays); ``c.kd``, the same per keyword
argument; and helpers: ``c.rank(i, a)`` (one example's number of axes), ``c.lift(a, b)``
(an unbatched argument broadcast along a new first axis), ``c.pad(a, rank)`` (size-1
axes after the batch axis) and ``c.composite(fn, *args)`` (a formula for one example,
each of its ops batched by its own rule). ``args`` and ``kwargs`` are the op's
arguments, plain Tensors (or Batched values of outer vmaps), the batch axis first where
batched. The rule returns the output(s) with the batch axis first (a Tensor, or a tuple
or list of them; a result that is no array as it is), or ``NotImplemented`` to ask for
the fallback loop for this call (an argument combination it doesn't cover). It computes
with ``c.f`` and ``c.xp``, so what it does is recorded, and differentiable, as usual.

Adding a rule: reuse a generic one (``elementwise``, ``passthrough``, ``leading``,
``axis(...)``, ``axes_with_shape()``) or write ``_name(c, ...)`` in the section of its
family (the standard's functions: manipulation, linear algebra, indexing...; the
``nn.functional`` ops), then add ``"name": rule`` to ``RULES`` at the end of the file.
Generic rules are marked ``@_derived`` (``gradcheck --batching`` counts them as
"derived", the others as "written"). ``gradcheck --batching --op NAME`` checks the rule
against a loop of the op (values and per-example gradients); ``tests/test_vmap.py`` runs
that check for every op with a spec.
"""

from __future__ import annotations

import math

from ..backends import device_of
from ..engine.batching import (
    RULES,
    STYLE_RULES,
    _derived,
    _is_bool,
    _key_parts,
    _mask_error,
)

__all__ = ["RULES", "STYLE_RULES", "elementwise", "passthrough", "leading", "axis"]


# -- rules derived from metadata ----------------------------------------------------------
@_derived
def elementwise(c, *args, **kwargs):
    """Element-wise ops: a batched operand whose examples have fewer axes than the others
    gets size-1 axes after its batch axis; then the op broadcasts as usual."""
    ranks = [c.rank(i, a) for i, a in enumerate(args) if hasattr(a, "ndim")]
    r = max(ranks, default=0)
    args = [c.pad(a, r) if b else a for a, b in zip(args, c.bd)]
    return c.f(*args, **kwargs)


@_derived
def passthrough(c, *args, **kwargs):
    """The op itself: its result has the batch axis first already (``zeros_like``), or is
    no array (``result_type``)."""
    return c.f(*args, **kwargs)


@_derived
def leading(c, *args, **kwargs):
    """Ops on the trailing axes of their first argument (matrices, the last axis) that
    batch over its leading axes: the op itself, when only that argument is batched."""
    if not c.bd[0] or any(c.bd[1:]) or any(_flags(c.kd)):
        return NotImplemented
    return c.f(*args, **kwargs)


def _flags(kd):
    for v in kd.values():
        if isinstance(v, tuple):
            yield from v
        else:
            yield v


_REQUIRED = object()
ALL, KEEP, FLAT = "all", "keep", "flat"


def _shift(a, r):
    """One example's axis ``a`` (of ``r`` axes) in the batched array: non-negative ones
    move up by one, negative ones count from the end as they did."""
    if isinstance(a, (tuple, list)):
        return type(a)(_shift(i, r) for i in a)
    return a + 1 if a >= 0 else a


def axis(name="axis", default=None, none=ALL, pos=None):
    """The rule of an op of one array with an axis argument (``name``, positional at
    ``pos`` if it may be): its axes shifted past the batch axis; ``axis=None`` (and the
    ``default``) means every axis of one example (``none=ALL``: reductions, ``flip``), or
    is kept (``KEEP``), or the example flattened (``FLAT``: ``argmax``)."""

    @_derived
    def rule(c, x, *args, **kwargs):
        if not c.bd[0] or any(c.bd[1:]) or any(_flags(c.kd)):
            return NotImplemented
        args = list(args)
        if pos is not None and len(args) >= pos:
            value = args[pos - 1]
        else:
            value = kwargs.get(name, default)
            if value is _REQUIRED:
                return NotImplemented
        r = x.ndim - 1
        if value is None:
            if none == FLAT:
                return _flat_call(c, x, args, kwargs, name, pos)
            if none == ALL:
                value = tuple(range(1, r + 1))
        else:
            value = _shift(value, r)
        if pos is not None and len(args) >= pos:
            args[pos - 1] = value
        else:
            kwargs[name] = value
        return c.f(x, *args, **kwargs)

    return rule


def _flat_call(c, x, args, kwargs, name, pos):
    """An op that flattens its input for ``axis=None`` (``argmax``, ``softmax``), on each
    example flattened: ``axis=1`` of (n, -1), keepdims giving size-1 axes per example."""
    xp, r = c.xp, x.ndim - 1
    keep = kwargs.get("keepdims", False)
    kwargs = dict(kwargs, **{name: 1})
    kwargs.pop("keepdims", None)
    out = c.f(xp.reshape(x, (c.n, -1)), *args, **kwargs)
    if out.ndim == 2:  # an op that keeps the shape (softmax): back to the example's
        return xp.reshape(out, tuple(x.shape))
    return xp.reshape(out, (c.n,) + (1,) * r) if keep else out


def axes_with_shape(default_none=ALL):
    """``fftn``-like ops: ``axes=None`` means the last ``len(s)`` axes (all if ``s`` is
    None) of one example."""

    @_derived
    def rule(c, x, **kwargs):
        if not c.bd[0] or any(_flags(c.kd)):
            return NotImplemented
        r = x.ndim - 1
        axes, s = kwargs.get("axes"), kwargs.get("s")
        if axes is None:
            axes = tuple(range(r - len(s), r)) if s is not None else tuple(range(r))
        kwargs["axes"] = _shift(tuple(axes), r)
        return c.f(x, **kwargs)

    return rule


# -- rules written for the standard's functions -----------------------------------------------
def _broadcast_shape(*shapes):
    """The broadcast of ``shapes`` (tuples), as the standard broadcasts."""
    r = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-r, 0):
        sizes = {s[i] for s in shapes if len(s) >= -i and s[i] != 1}
        if len(sizes) > 1:
            raise ValueError(f"shapes {shapes} can't be broadcast together")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _example_shape(c, i, a):
    return tuple(a.shape[1:]) if c.bd[i] else tuple(getattr(a, "shape", ()))


def _reshape(c, x, shape=_REQUIRED, **kwargs):
    if not c.bd[0]:
        return NotImplemented
    shape = kwargs.pop("shape") if shape is _REQUIRED else shape
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return c.f(x, (c.n,) + shape, **kwargs)


def _permute_dims(c, x, axes=_REQUIRED, **kwargs):
    axes = kwargs.pop("axes") if axes is _REQUIRED else axes
    r = x.ndim - 1
    return c.f(x, (0,) + tuple(a % r + 1 for a in axes), **kwargs)


def _moveaxis(c, x, source, destination):
    r = x.ndim - 1

    def norm(a):
        return tuple(i % r + 1 for i in a) if isinstance(a, (tuple, list)) else a % r + 1

    return c.f(x, norm(source), norm(destination))


def _roll(c, x, shift, axis=None):
    if not c.bd[0] or c.bd[1]:
        return NotImplemented
    if axis is None:  # rolled flattened, per example
        xp = c.xp
        flat = c.f(xp.reshape(x, (c.n, -1)), shift, axis=1)
        return xp.reshape(flat, tuple(x.shape))
    return c.f(x, shift, axis=_shift(axis, x.ndim - 1))


def _broadcast_to(c, x, shape=_REQUIRED, **kwargs):
    shape = kwargs.pop("shape") if shape is _REQUIRED else shape
    shape = tuple(shape)
    return c.f(c.pad(x, len(shape)), (c.n,) + shape, **kwargs)


def _broadcast_arrays(c, *arrays):
    xp = c.xp
    shape = (c.n,) + _broadcast_shape(*(_example_shape(c, i, a) for i, a in enumerate(arrays)))
    out = []
    for a, b in zip(arrays, c.bd):
        a = c.pad(a, len(shape) - 1) if b else xp.expand_dims(a, axis=0)
        out.append(xp.broadcast_to(a, shape))
    return out


def _lift_all(c, arrays):
    return [c.lift(a, b) for a, b in zip(arrays, c.bd)]


def _concat(c, *arrays, axis=0):
    arrays = _lift_all(c, arrays)
    if axis is None:  # each example flattened
        return c.f(*[c.xp.reshape(a, (c.n, -1)) for a in arrays], axis=1)
    return c.f(*arrays, axis=_shift(axis, arrays[0].ndim - 1))


def _stack(c, *arrays, axis=0):
    return c.f(*_lift_all(c, arrays), axis=_shift(axis, arrays[0].ndim))


def _tile(c, x, repetitions):
    if not c.bd[0] or c.bd[1]:
        return NotImplemented
    reps = tuple(repetitions)
    r = x.ndim - 1
    if len(reps) > r:  # the example is promoted with leading axes first
        x = c.pad(x, len(reps))
    else:
        reps = (1,) * (r - len(reps)) + reps
    return c.f(x, (1,) + reps)


def _repeat(c, x, repeats, *, axis=None):
    if not c.bd[0] or c.bd[1]:
        return NotImplemented
    if axis is None:
        return c.f(c.xp.reshape(x, (c.n, -1)), repeats, axis=1)
    return c.f(x, repeats, axis=_shift(axis, x.ndim - 1))


def _meshgrid(c, *arrays, indexing="xy"):
    """Output i repeats input i (1-D) along every axis but its own."""
    xp = c.xp
    k = len(arrays)
    sizes = [a.shape[-1] for a in arrays]
    order = list(range(k))
    if indexing == "xy" and k >= 2:
        order[0], order[1] = 1, 0
    shape = tuple(sizes[j] for j in order)
    out = []
    for i, (a, b) in enumerate(zip(arrays, c.bd)):
        where = order.index(i)
        lone = tuple(sizes[i] if j == where else 1 for j in range(k))
        a = xp.reshape(c.lift(a, b), (c.n,) + lone)
        out.append(xp.broadcast_to(a, (c.n,) + shape))
    return out


def _cumulative(c, x, **kwargs):
    if not c.bd[0]:
        return NotImplemented
    if kwargs.get("axis") is None:
        if x.ndim > 2:
            return NotImplemented  # the backend's error: axis is required beyond 1-D
        x = c.xp.reshape(x, (c.n, -1))
        kwargs["axis"] = 1
    else:
        kwargs["axis"] = _shift(kwargs["axis"], x.ndim - 1)
    return c.f(x, **kwargs)


def _diff(c, x, prepend, append, *, axis=-1, n=1):
    x, prepend, append = _lift_all(c, (x, prepend, append))
    return c.f(x, prepend, append, axis=_shift(axis, x.ndim - 1), n=n)


# -- linear algebra
def _matmul(c, x1, x2):
    """matmul of each example: a 1-D operand promoted as matmul promotes it alone, the
    leading (stack) axes of the two aligned past the batch axis."""
    xp, n = c.xp, c.n
    b1, b2 = c.bd
    r1, r2 = c.rank(0, x1), c.rank(1, x2)
    if r1 == 0 or r2 == 0:
        return NotImplemented  # the backend's error, from the loop
    if b1 and b2:
        if r1 == 1 and r2 == 1:
            k = x1.shape[-1]
            return xp.reshape(xp.reshape(x1, (n, 1, k)) @ xp.reshape(x2, (n, k, 1)), (n,))
        if r1 == 1:
            x1 = xp.reshape(x1, (n,) + (1,) * (r2 - 1) + (x1.shape[-1],))
            return xp.squeeze(x1 @ x2, axis=-2)
        if r2 == 1:
            x2 = xp.reshape(x2, (n,) + (1,) * (r1 - 2) + (x2.shape[-1], 1))
            return xp.squeeze(x1 @ x2, axis=-1)
        r = max(r1, r2)
        return c.pad(x1, r) @ c.pad(x2, r)
    if b1:
        if r2 == 1:
            return x1 @ x2
        if r1 == 1:  # the examples as the rows of one matrix: one product
            return xp.moveaxis(x1 @ x2, -2, 0)
        if r1 == 2 and r2 == 2:  # one (n*m, k) product instead of n small ones
            m, k = x1.shape[1], x1.shape[2]
            return xp.reshape(xp.reshape(x1, (n * m, k)) @ x2, (n, m, x2.shape[-1]))
        return (c.pad(x1, r2) if r2 > r1 else x1) @ x2
    if r1 == 1:
        return x2 @ x1 if r2 == 1 else x1 @ x2
    if r2 == 1:  # (..., m, k) @ (k, n): the examples as the columns of one matrix
        return xp.moveaxis(x1 @ xp.matrix_transpose(x2), -1, 0)
    return x1 @ (c.pad(x2, r1) if r1 > r2 else x2)


def _tensordot(c, x1, x2, *, axes=2):
    xp, n = c.xp, c.n
    b1, b2 = c.bd
    r1, r2 = c.rank(0, x1), c.rank(1, x2)
    if isinstance(axes, int):
        a1, a2 = list(range(r1 - axes, r1)), list(range(axes))
    else:
        a1, a2 = [i % r1 for i in axes[0]], [i % r2 for i in axes[1]]
    free1 = [i for i in range(r1) if i not in a1]
    free2 = [i for i in range(r2) if i not in a2]
    if b1 and b2:  # a batched matmul over (free1, contracted) x (contracted, free2)
        s1, s2 = tuple(x1.shape[1:]), tuple(x2.shape[1:])
        p1 = xp.permute_dims(x1, (0,) + tuple(i + 1 for i in free1 + a1))
        p2 = xp.permute_dims(x2, (0,) + tuple(i + 1 for i in a2 + free2))
        f1 = tuple(s1[i] for i in free1)
        f2 = tuple(s2[i] for i in free2)
        k = math.prod(s1[i] for i in a1)
        m = xp.reshape(p1, (n, math.prod(f1), k)) @ xp.reshape(p2, (n, k, math.prod(f2)))
        return xp.reshape(m, (n,) + f1 + f2)
    if b1:
        return c.f(x1, x2, axes=([i + 1 for i in a1], a2))
    return xp.moveaxis(c.f(x1, x2, axes=(a1, [i + 1 for i in a2])), len(free1), 0)


def _vecdot(c, x1, x2, *, axis=-1):
    r = max(c.rank(0, x1), c.rank(1, x2))
    x1, x2 = (c.pad(a, r) if b else a for a, b in zip((x1, x2), c.bd))
    return c.f(x1, x2, axis=axis - r if axis >= 0 else axis)


def _cross(c, x1, x2, *, axis=-1):
    return _vecdot(c, x1, x2, axis=axis)  # the same alignment: element-wise but one axis


def _outer(c, x1, x2):
    xp = c.xp
    return xp.multiply(xp.expand_dims(x1, axis=-1), xp.expand_dims(x2, axis=-2))


def _solve(c, a, b):
    """solve of each example; a 1-D ``b`` is one vector per example (the standard's rule
    for a 1-D ``x2``), so it becomes a column."""
    xp, n = c.xp, c.n
    ba, bb = c.bd
    ra, rb = c.rank(0, a), c.rank(1, b)
    if rb == 1:
        if not bb:
            return c.f(a, b)
        if not ba and ra == 2:  # one solve, the examples as the columns of the right side
            return xp.matrix_transpose(c.f(a, xp.matrix_transpose(b)))
        col = xp.reshape(b, (n,) + (1,) * (ra - 2) + (b.shape[-1], 1))
        return xp.squeeze(c.f(a, col), axis=-1)
    if ba and bb:
        r = max(ra, rb)
        return c.f(c.pad(a, r), c.pad(b, r))
    if ba:
        return c.f(c.pad(a, rb) if rb > ra else a, b)
    return c.f(a, c.pad(b, ra) if ra > rb else b)


# -- indexing
def _is_index_array(k):
    return not (k is None or k is Ellipsis or isinstance(k, (int, slice)))


def _contiguous(parts):
    """Whether the array (and integer) parts of a key are next to each other: numpy then
    keeps the advanced index's axes where they are, else it moves them first."""
    pos = [i for i, k in enumerate(parts) if _is_index_array(k) or type(k) is int]
    if not any(_is_index_array(k) for k in parts):
        return True
    return pos == list(range(pos[0], pos[0] + len(pos)))


def _getitem(c, x, *, key):
    xp, n = c.xp, c.n
    parts = _key_parts(key)
    flags = c.kd.get("key", False)
    flags = flags if isinstance(flags, tuple) else (flags,) * len(parts)
    if not any(flags):
        arrays = [i for i, k in enumerate(parts) if _is_index_array(k)]
        if not arrays:
            return x[(slice(None),) + parts]
        if len(parts) == 1 and _is_bool(parts[0]):  # one mask for every example
            mask = xp.broadcast_to(parts[0], (n,) + tuple(parts[0].shape))
            picked = x[mask]
            return xp.reshape(picked, (n, -1) + tuple(picked.shape[1:]))
        if arrays[0] == 0 and _contiguous(parts) and not any(_is_bool(parts[i]) for i in arrays):
            # integer arrays from the first axis on: the batch indexed by an arange
            # too (the standard takes integer arrays only alongside integers)
            shapes = [tuple(getattr(k, "shape", ())) for k in parts if _is_index_array(k)]
            r = len(_broadcast_shape(*shapes))
            first = xp.reshape(xp.arange(n, device=device_of(x)), (n,) + (1,) * r)
            return x[(first,) + parts]
        if not _contiguous(parts):
            return NotImplemented
        return x[(slice(None),) + parts]
    for k, b in zip(parts, flags):
        if b and _is_bool(k):
            raise _mask_error("x[mask]")
    # batched integer arrays: a gather with the examples' own indices
    adv = [i for i, k in enumerate(parts) if _is_index_array(k) or type(k) is int]
    if not _contiguous(parts) or any(not isinstance(k, slice) for k in parts[: adv[0]]):
        return NotImplemented
    if any(k is None or k is Ellipsis for k in parts[adv[0] :]):
        return NotImplemented
    shapes = [
        tuple(k.shape[1:]) if b else tuple(getattr(k, "shape", ()))
        for k, b in zip(parts, flags)
        if _is_index_array(k)
    ]
    r = len(_broadcast_shape(*shapes))
    idx = [c.pad(k, r) if b else k for k, b in zip(parts, flags)]
    pre = adv[0]
    if c.bd[0]:
        first = xp.reshape(xp.arange(n, device=device_of(x)), (n,) + (1,) * r)
        out = x[(first,) + tuple(idx)]  # advanced axes first: (n, S..., pre..., rest)
        if pre:
            out = xp.moveaxis(out, tuple(range(1, 1 + r)), tuple(range(1 + pre, 1 + pre + r)))
        return out
    out = x[tuple(idx)]  # (pre..., n, S..., rest)
    return xp.moveaxis(out, pre, 0) if pre else out


def _take(c, x, indices, *, axis=None):
    xp, n = c.xp, c.n
    bx, bi = c.bd
    if axis is None:  # one example flattened (the standard: a 1-D x)
        x = xp.reshape(x, (n, -1) if bx else (-1,))
        ax = 0
    else:
        ax = axis % (x.ndim - bx)
    if not bi:
        return c.f(x, indices, axis=ax + 1)
    if indices.ndim != 2:
        return NotImplemented
    k = indices.shape[1]
    if not bx:  # every example's picks at once, then the examples' axis first
        out = c.f(x, xp.reshape(indices, (-1,)), axis=ax)
        out = xp.reshape(out, tuple(x.shape[:ax]) + (n, k) + tuple(x.shape[ax + 1 :]))
        return xp.moveaxis(out, ax, 0)
    # each example's own indices: offsets into the examples laid end to end
    xm = xp.moveaxis(x, ax + 1, 1)
    m = xm.shape[1]
    flat = xp.reshape(xm, (n * m,) + tuple(xm.shape[2:]))
    offsets = xp.reshape(xp.arange(n, dtype=indices.dtype, device=device_of(indices)) * m, (n, 1))
    out = c.f(flat, xp.reshape(indices + offsets, (-1,)), axis=0)
    out = xp.reshape(out, (n, k) + tuple(xm.shape[2:]))
    return xp.moveaxis(out, 1, ax + 1)


def _take_along_axis(c, x, indices, *, axis=-1):
    x, indices = _lift_all(c, (x, indices))
    return c.f(x, indices, axis=_shift(axis, x.ndim - 1))


def _index_add(c, x, indices, values, *, axis=0):
    if c.bd[1]:
        return NotImplemented
    x, values = c.lift(x, c.bd[0]), c.lift(values, c.bd[2])
    return c.f(x, indices, values, axis=_shift(axis, x.ndim - 1))


def _searchsorted(c, x1, x2, **kwargs):
    if c.bd[0] or any(_flags(c.kd)):
        return NotImplemented
    return c.f(x1, x2, **kwargs)


def _isin(c, x1, x2, **kwargs):
    if c.bd[1]:
        return NotImplemented
    return c.f(x1, x2, **kwargs)


def _asarray(c, x, **kwargs):
    """``asarray`` of a batched value: the namespace's own, which keeps the graph of a
    Tensor (the creation function itself would take its raw array)."""
    flags = c.bd[0]
    if isinstance(flags, tuple):  # a sequence of one example's arrays: stacked
        if any(not hasattr(v, "shape") for v in x):
            return NotImplemented
        x = c.xp.stack([c.lift(v, b) for v, b in zip(x, flags)], axis=1)
    return c.xp.asarray(x, **kwargs)


def _from_dlpack(c, x, **kwargs):
    if getattr(x, "requires_grad", False):
        raise RuntimeError(
            "from_dlpack: can't convert a tensor that requires grad to a foreign array "
            "(the graph would be cut silently); call .detach() first"
        )
    return c.f(x, **kwargs)


# -- rules written for the nn.functional ops ---------------------------------------------------
def _fold(c, a, lead=1):
    """A batched ``a`` with the batch axis merged into the next one (an op's own batch
    axis N): (n, N, ...) -> (n * N, ...)."""
    return c.xp.reshape(a, (c.n * a.shape[1],) + tuple(a.shape[2:]))


def _unfold(c, y):
    """The inverse of ``_fold`` on an op's output (n * N, ...) -> (n, N, ...)."""
    return c.xp.reshape(y, (c.n, y.shape[0] // c.n) + tuple(y.shape[1:]))


def _pool(c, x, **kwargs):
    """Ops of one (N, C, H, W) input: the batch folded into N."""
    if not c.bd[0]:
        return NotImplemented
    return _unfold(c, c.f(_fold(c, x), **kwargs))


def _linear(c, x, w, b):
    xp, n = c.xp, c.n
    bx, bw, bb = c.bd
    if not bw and not bb:
        return c.f(x, w, b)  # x (n, ..., in): the op batches over leading axes
    x = c.lift(x, bx)
    rows = xp.reshape(x, (n, -1, x.shape[-1]))
    y = rows @ xp.matrix_transpose(w)  # (n, rows, out), per-example weights or not
    if b is not None:
        y = y + (xp.expand_dims(b, axis=1) if bb else b)
    return xp.reshape(y, tuple(x.shape[:-1]) + (y.shape[-1],))


def _conv(c, x, w, b, **kwargs):
    """conv2d / conv_transpose2d: the batch folded into N; per-example weights as one
    grouped convolution (groups * n: example j's channels meet only its own weights)."""
    xp, n = c.xp, c.n
    bx, bw, bb = c.bd
    if not bw and not bb:
        return _unfold(c, c.f(_fold(c, x), w, b, **kwargs))
    x, w = c.lift(x, bx), c.lift(w, bw)
    b = c.lift(b, bb)
    big_n = x.shape[1]
    xg = xp.reshape(xp.moveaxis(x, 0, 1), (big_n, n * x.shape[2]) + tuple(x.shape[3:]))
    wg = xp.reshape(w, (n * w.shape[1],) + tuple(w.shape[2:]))
    bg = None if b is None else xp.reshape(b, (-1,))
    kwargs["groups"] = kwargs["groups"] * n
    y = c.f(xg, wg, bg, **kwargs)
    y = xp.reshape(y, (big_n, n, y.shape[1] // n) + tuple(y.shape[2:]))
    return xp.moveaxis(y, 1, 0)


def _layer_norm(c, x, w, b, *, k, eps):
    bx, bw, bb = c.bd
    x = c.lift(x, bx)
    if not bw and not bb:
        return c.f(x, w, b, k=k, eps=eps)
    y = c.f(x, None, None, k=k, eps=eps)
    r = x.ndim - 1
    if w is not None:
        y = y * (c.pad(w, r) if bw else w)
    if b is not None:
        y = y + (c.pad(b, r) if bb else b)
    return y


def _per_channel_flat(c, a, batched):
    """A per-channel (C,) argument, or (n, C) per example, as (n * C,)."""
    if a is None:
        return None
    if not batched:
        a = c.xp.broadcast_to(a, (c.n,) + tuple(a.shape))
    return c.xp.reshape(a, (-1,))


def _batch_norm(c, x, w, b, m, v, *, training, eps):
    """The batch moved into the channels: (n, N, C, *) -> (N, n * C, *), so each
    example's channels get their own statistics (and running stats, weights)."""
    xp, n = c.xp, c.n
    x = c.lift(x, c.bd[0])
    shape = tuple(x.shape)
    xc = xp.reshape(xp.moveaxis(x, 0, 1), (shape[1], n * shape[2]) + shape[3:])
    args = [_per_channel_flat(c, a, bd) for a, bd in zip((w, b, m, v), c.bd[1:])]
    y = c.f(xc, *args, training=training, eps=eps)
    return xp.moveaxis(xp.reshape(y, (shape[1], n) + shape[2:]), 1, 0)


def _group_norm(c, x, w, b, *, groups, eps):
    """The batch folded into N; per-example weights applied after."""
    bx, bw, bb = c.bd
    x = c.lift(x, bx)
    if not bw and not bb:
        return _unfold(c, c.f(_fold(c, x), w, b, groups=groups, eps=eps))
    y = _unfold(c, c.f(_fold(c, x), None, None, groups=groups, eps=eps))
    tail = (1,) * (x.ndim - 3)
    for p, bp, op in ((w, bw, "mul"), (b, bb, "add")):
        if p is not None:
            shape = (p.shape[0], 1, p.shape[1]) if bp else (p.shape[0],)
            p = c.xp.reshape(p, shape + tail)
            y = y * p if op == "mul" else y + p
    return y


def _rms_norm(c, x, w, *, k, eps):
    bx, bw = c.bd
    x = c.lift(x, bx)
    if not bw:
        return c.f(x, w, k=k, eps=eps)
    y = c.f(x, None, k=k, eps=eps)
    return y if w is None else y * c.pad(w, x.ndim - 1)


def _embedding(c, weight, indices, *, padding_idx):
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


def _per_example(c, loss, reduction, count=None):
    """A loss computed with reduction 'none' on every example, reduced per example."""
    if reduction == "none":
        return loss
    xp = c.xp
    total = xp.sum(loss, axis=tuple(range(1, loss.ndim)))
    if reduction == "sum":
        return total
    return total / (math.prod(loss.shape[1:]) if count is None else count)


def _cross_entropy(c, z, t, *, ignore_index, reduction, label_smoothing):
    xp = c.xp
    z, t = _lift_all(c, (z, t))
    loss = c.f(_fold(c, z), _fold(c, t), ignore_index=ignore_index, reduction="none",
               label_smoothing=label_smoothing)  # fmt: skip
    loss = _unfold(c, loss)
    count = None
    if reduction == "mean" and ignore_index is not None:  # the valid targets, at least 1
        valid = xp.astype(t != ignore_index, loss.dtype)
        count = xp.sum(valid, axis=tuple(range(1, valid.ndim)))
        count = xp.where(count == 0, xp.ones_like(count), count)
    return _per_example(c, loss, reduction, count)


def _mse_loss(c, x, y, *, reduction):
    x, y = _lift_all(c, (x, y))
    return _per_example(c, c.f(x, y, reduction="none"), reduction)


def _bce(c, x, y, weight, pos_weight, *, reduction):
    x, y = _lift_all(c, (x, y))
    r = x.ndim - 1
    weight, pos_weight = (
        c.pad(a, r) if b and a is not None else a for a, b in zip((weight, pos_weight), c.bd[2:])
    )
    return _per_example(c, c.f(x, y, weight, pos_weight, reduction="none"), reduction)


def _pair_loss(c, x, y, *, reduction, **kwargs):
    """Element-wise losses of two same-shaped arrays (l1, huber, smooth l1)."""
    x, y = _lift_all(c, (x, y))
    return _per_example(c, c.f(x, y, reduction="none", **kwargs), reduction)


def _kl_div(c, x, y, *, reduction, log_target):
    x, y = _lift_all(c, (x, y))
    loss = c.f(x, y, reduction="none", log_target=log_target)
    if reduction != "batchmean":
        return _per_example(c, loss, reduction)
    total = _per_example(c, loss, "sum")
    return total / loss.shape[1] if loss.ndim > 1 else total


def _bce_probs(c, x, y, weight, *, reduction):
    x, y = _lift_all(c, (x, y))
    if weight is not None and c.bd[2]:
        weight = c.pad(weight, x.ndim - 1)
    return _per_example(c, c.f(x, y, weight, reduction="none"), reduction)


def _class_weights(c, w, batched, ndim):
    """Class weights (C,), or (n, C) batched, as (n, 1, C, 1, ...) against (n, N, C, ...)."""
    w = c.lift(w, batched)
    return c.xp.reshape(w, (c.n, 1, w.shape[1]) + (1,) * (ndim - 3))


def _nll_loss(c, z, t, w, *, ignore_index, reduction):
    """The class weights folded into the log-probabilities (loss w_t (-z_t)); 'mean'
    divides each example by its weights of valid targets (the op on -w)."""
    xp = c.xp
    z, t = _lift_all(c, (z, t))
    kw = {"ignore_index": ignore_index, "reduction": "none"}
    if w is None:
        loss = _unfold(c, c.f(_fold(c, z), _fold(c, t), None, **kw))
        count = None
        if reduction == "mean" and ignore_index is not None:
            valid = xp.astype(t != ignore_index, loss.dtype)
            count = xp.sum(valid, axis=tuple(range(1, valid.ndim)))
    else:
        wb = _class_weights(c, w, c.bd[2], z.ndim)
        loss = _unfold(c, c.f(_fold(c, z * wb), _fold(c, t), None, **kw))
        count = None
        if reduction == "mean":
            mw = -xp.broadcast_to(wb, tuple(z.shape))
            vw = _unfold(c, c.f(_fold(c, mw), _fold(c, t), None, **kw))
            count = xp.sum(vw, axis=tuple(range(1, vw.ndim)))
    if count is not None:
        count = xp.where(count == 0, xp.ones_like(count), count)
    return _per_example(c, loss, reduction, count)


def _cross_entropy_probs(c, z, y, w, *, reduction, label_smoothing):
    """The (smoothed) targets times the class weights: the op with no weight."""
    z, y = _lift_all(c, (z, y))
    if w is not None:
        if label_smoothing:
            y = (1 - label_smoothing) * y + label_smoothing / z.shape[2]
            label_smoothing = 0.0
        y = y * _class_weights(c, w, c.bd[2], z.ndim)
    loss = c.f(_fold(c, z), _fold(c, y), None, reduction="none", label_smoothing=label_smoothing)
    return _per_example(c, _unfold(c, loss), reduction)


def _cosine_similarity(c, x1, x2, *, axis, eps):
    x1, x2 = _lift_all(c, (x1, x2))
    return c.f(x1, x2, axis=axis + 1, eps=eps)


def _normalize(c, x, *, p, axis, eps):
    return c.f(x, p=p, axis=axis + 1, eps=eps)


def _rope(c, x, positions, **kwargs):
    bx, bp = c.bd
    x = c.lift(x, bx)
    if bp:  # broadcast against one example's (..., seq)
        positions = c.pad(positions, x.ndim - 2)
    return c.f(x, positions, **kwargs)


def _attention_packed(c, qkv, mask, **kwargs):
    xp, n = c.xp, c.n
    bq, bm = c.bd
    qkv = c.lift(qkv, bq)
    if mask is not None and (bm or mask.ndim >= 4):
        big_n, length = qkv.shape[1], qkv.shape[2]
        full = (n, big_n, kwargs["heads"], length, length)
        m = c.pad(mask, 4) if bm else xp.expand_dims(mask, axis=0)
        mask = xp.reshape(xp.broadcast_to(m, full), (n * big_n,) + full[2:])
    return _unfold(c, c.f(_fold(c, qkv), mask, **kwargs))


def _affine(xp, x, w, b):
    y = x @ xp.matrix_transpose(w)
    return y if b is None else y + b


def _gru_formula(x, h, w_ih, w_hh, b_ih, b_hh):
    """One GRU step, torch's formula, with the namespace's functions."""
    xp = x.__array_namespace__()
    gi = xp.unstack(xp.reshape(_affine(xp, x, w_ih, b_ih), x.shape[:-1] + (3, -1)), axis=-2)
    gh = xp.unstack(xp.reshape(_affine(xp, h, w_hh, b_hh), h.shape[:-1] + (3, -1)), axis=-2)
    r = _sig(xp, gi[0] + gh[0])
    z = _sig(xp, gi[1] + gh[1])
    n = xp.tanh(gi[2] + r * gh[2])
    return (1 - z) * n + z * h


def _lstm_formula(x, h, cs, w_ih, w_hh, b_ih, b_hh):
    """One LSTM step (gates i, f, g, o), torch's formula."""
    xp = x.__array_namespace__()
    g = _affine(xp, x, w_ih, b_ih) + _affine(xp, h, w_hh, b_hh)
    i, f, gg, o = xp.unstack(xp.reshape(g, g.shape[:-1] + (4, -1)), axis=-2)
    c2 = _sig(xp, f) * cs + _sig(xp, i) * xp.tanh(gg)
    return _sig(xp, o) * xp.tanh(c2), c2


def _gmc_formula(m, x, w_z, w_c, b_z, b_c):
    """m_next = (1 - z) m + z c, z = sigmoid(u W_z + b_z), c = tanh(u W_c + b_c)."""
    xp = m.__array_namespace__()
    u = xp.concat([m, x], axis=-1)
    z = _sig(xp, u @ w_z if b_z is None else u @ w_z + b_z)
    cc = xp.tanh(u @ w_c if b_c is None else u @ w_c + b_c)
    return (1 - z) * m + z * cc


def _sig(xp, a):
    return 1 / (1 + xp.exp(-a))


def _cell(c, *args, states=2, weights_from=2, formula=None):
    """Recurrent cells: the batch folded into the cells' own batch axis N (a 1-D input
    of one example is a row of N = n), when the weights are shared by the examples;
    per-example weights (``vmap(grad)`` of a cell): the cell's formula, op by op."""
    if any(c.bd[weights_from:]):
        return c.composite(formula, *args)
    head = [c.lift(a, b) for a, b in zip(args[:states], c.bd)]
    two = any(a is not None and a.ndim == 3 for a in head)
    folded = [None if a is None else (_fold(c, a) if two else a) for a in head]
    out = c.f(*folded, *args[states:])
    if not two:
        return out
    if isinstance(out, (tuple, list)):
        return type(out)(_unfold(c, o) for o in out)
    return _unfold(c, out)


def _gru_sequence(c, x, h0, *weights):
    """x (T, N, in) of each example: the batch folded into N, behind T."""
    if any(c.bd[2:]):
        return c.composite(_gru_steps, x, h0, *weights)
    xp, n = c.xp, c.n
    x, h0 = c.lift(x, c.bd[0]), c.lift(h0, c.bd[1])
    t, big_n = x.shape[1], x.shape[2]
    xs = xp.reshape(xp.moveaxis(x, 0, 1), (t, n * big_n) + tuple(x.shape[3:]))
    out = c.f(xs, _fold(c, h0), *weights)
    out = xp.reshape(out, (t, n, big_n) + tuple(out.shape[2:]))
    return xp.moveaxis(out, 1, 0)


def _gru_steps(x, h, *weights):
    xp = x.__array_namespace__()
    states = []
    for t in range(x.shape[0]):
        h = _gru_formula(x[t, ...], h, *weights)
        states.append(h)
    return xp.stack(states, axis=0)


def _setitem_op(c, x, value, *, key):
    """``x[key] = value`` never reaches the op table (it is no function of the namespace):
    a Batched ``x`` writes into its value itself (``Batched.__setitem__``: full slices for
    the batch axes, or example by example for batched indices); an unbatched one refuses
    a batched value (``inplace.setitem``)."""
    raise AssertionError("__setitem__ is batched by Batched.__setitem__")


# -- the tables: every op with a rule, by name; the element-wise styles -------------------------
STYLE_RULES.update({"unary": elementwise, "binary": elementwise})
_REDUCE = axis()  # axis=None (the default): every axis of one example
RULES.update({
    # creation
    "empty_like": passthrough,
    "full_like": passthrough,
    "ones_like": passthrough,
    "zeros_like": passthrough,
    "asarray": _asarray,
    "from_dlpack": _from_dlpack,
    "tril": leading,
    "triu": leading,
    "meshgrid": _meshgrid,
    # data types
    "astype": leading,
    "to_device": leading,
    "can_cast": passthrough,
    "finfo": passthrough,
    "iinfo": passthrough,
    "result_type": passthrough,
    "isdtype": passthrough,
    # element-wise (beyond the unary and binary styles, derived from the metadata)
    "where": elementwise,
    # statistical
    "sum": _REDUCE,
    "mean": _REDUCE,
    "max": _REDUCE,
    "min": _REDUCE,
    "var": _REDUCE,
    "std": _REDUCE,
    "prod": _REDUCE,
    "cumulative_sum": _cumulative,
    "cumulative_prod": _cumulative,
    # utility, searching, sorting
    "all": _REDUCE,
    "any": _REDUCE,
    "count_nonzero": _REDUCE,
    "argmax": axis(none=FLAT),
    "argmin": axis(none=FLAT),
    "sort": axis(default=-1),
    "argsort": axis(default=-1),
    "searchsorted": _searchsorted,
    "isin": _isin,
    "diff": _diff,
    # manipulation
    "reshape": _reshape,
    "expand_dims": axis(default=0, pos=1),
    "squeeze": axis(default=_REQUIRED, pos=1),
    "permute_dims": _permute_dims,
    "moveaxis": _moveaxis,
    "flip": _REDUCE,
    "roll": _roll,
    "broadcast_to": _broadcast_to,
    "broadcast_arrays": _broadcast_arrays,
    "concat": _concat,
    "stack": _stack,
    "unstack": axis(default=0),
    "tile": _tile,
    "repeat": _repeat,
    # indexing
    "__getitem__": _getitem,
    "take": _take,
    "take_along_axis": _take_along_axis,
    "index_add": _index_add,
    "__setitem__": _setitem_op,
    # linear algebra (main namespace and linalg)
    "matmul": _matmul,
    "linalg.matmul": _matmul,
    "tensordot": _tensordot,
    "linalg.tensordot": _tensordot,
    "vecdot": _vecdot,
    "linalg.vecdot": _vecdot,
    "matrix_transpose": leading,
    "linalg.matrix_transpose": leading,
    "linalg.solve": _solve,
    "linalg.outer": _outer,
    "linalg.cross": _cross,
    "linalg.vector_norm": _REDUCE,
    **{
        f"linalg.{name}": leading
        for name in (
            "inv", "det", "slogdet", "cholesky", "trace", "diagonal", "matrix_norm",
            "matrix_power", "eigh", "eigvalsh", "eig", "eigvals", "svd", "svdvals", "qr",
            "pinv", "matrix_rank",
        )
    },  # fmt: skip
    # fft
    **{f"fft.{n}": axis(default=-1) for n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")},
    **{f"fft.{name}": axes_with_shape() for name in ("fftn", "ifftn", "rfftn", "irfftn")},
    "fft.fftshift": axis(name="axes"),
    "fft.ifftshift": axis(name="axes"),
    # kernels of autodiff/backends (their ops act on the trailing axes)
    "pad2d": leading,
    "windows2d": leading,
    "col2im2d": leading,
    # nn.functional
    # (the element-wise nn activations are marked diagonal: their rule is derived)
    **{f"nn.{name}": elementwise for name in ("dropout", "scaled_dot_product_attention")},
    "nn.softmax": axis(default=-1, none=FLAT),
    "nn.log_softmax": axis(default=-1, none=FLAT),
    "nn.logsumexp": _REDUCE,
    "nn.linear": _linear,
    "nn.conv2d": _conv,
    "nn.conv_transpose2d": _conv,
    "nn.max_pool2d": _pool,
    "nn.avg_pool2d": _pool,
    "nn.layer_norm": _layer_norm,
    "nn.batch_norm": _batch_norm,
    "nn.group_norm": _group_norm,
    "nn.rms_norm": _rms_norm,
    "nn.embedding": _embedding,
    "nn.cross_entropy": _cross_entropy,
    "nn.mse_loss": _mse_loss,
    "nn.binary_cross_entropy_with_logits": _bce,
    "nn.nll_loss": _nll_loss,
    "nn.cross_entropy_probs": _cross_entropy_probs,
    "nn.l1_loss": _pair_loss,
    "nn.huber_loss": _pair_loss,
    "nn.smooth_l1_loss": _pair_loss,
    "nn.kl_div": _kl_div,
    "nn.binary_cross_entropy": _bce_probs,
    "nn.cosine_similarity": _cosine_similarity,
    "nn.normalize": _normalize,
    "nn.pad": leading,
    "nn.rope": _rope,
    "nn.self_attention_packed": _attention_packed,
    "nn.gru_cell": lambda c, *a: _cell(c, *a, formula=_gru_formula),
    "nn.lstm_cell": lambda c, *a: _cell(c, *a, states=3, weights_from=3, formula=_lstm_formula),
    "nn.gated_memory_cell": lambda c, *a: _cell(c, *a, formula=_gmc_formula),
    "nn.gru_sequence": _gru_sequence,
})  # fmt: skip
