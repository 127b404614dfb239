"""``vmap``'s machinery: batched values, one batching rule per op, the fallback loop.

Inside ``vmap(f)``, every mapped argument is a :class:`Batched`: a plain Tensor of the
namespace (``value``) holding all the examples, the batch axis first, presented as ONE
example (``shape``, ``ndim``, operators, ``__array_namespace__``...), so code written
for one example runs unchanged. When an op of the namespace is called on a Batched
value (the namespace's wrappers test one global counter, ``depth``, per call), it goes
to :func:`apply`, which runs the op's *batching rule* on the plain full-batch Tensors:
the op is recorded as usual, on all the examples at once, so reverse mode needs nothing
more. Rules come from the registry (``Op.batch``), else from the table ``RULES`` here
(find an op's rule by its name), else from its metadata (element-wise ops); an op
without one runs in a Python loop over the examples (slice, call, stack), and says so
once (a ``UserWarning`` naming it).

Nested vmaps: each ``vmap`` call is a *level* (a number, increasing with nesting). A
Batched value holds its levels in order, their axes first in ``value``: ``levels=(1, 2)``
means axis 0 is the outer vmap's, axis 1 the inner one's. :func:`apply` batches over the
innermost level among the arguments: it hands the rule each argument with that axis
as its first axis (a free view: the Batched value of the outer levels, or the plain
Tensor), and so on down, level by level, as JAX does.

A rule is ``rule(c, *args, **kwargs)``: ``c`` is a :class:`Call` (the op's function
``c.f`` taking the recorded layout of arguments, the recording namespace ``c.xp``,
the batch size ``c.n``, and per positional argument whether it is batched, ``c.bd``),
``args``/``kwargs`` the op's arguments with the batch axis first where batched. It
returns the output(s) with the batch axis first, or ``NotImplemented`` to ask for the
fallback loop for this call (an argument combination it doesn't cover).
"""

from __future__ import annotations

import itertools
import math
import threading
import warnings

from . import graph
from .registry import ops as _registry_ops
from .tensor import (
    BINARY_OPERATORS,
    INPLACE_OPERATORS,
    REFLECTED_OPERATORS,
    UNARY_OPERATORS,
    Tensor,
)

__all__ = ["Batched", "Call", "apply", "holds", "rule_of", "RULES", "depth", "enter", "leave"]

# How many vmaps are running (in any thread): the namespace's wrappers test it once per
# call, and look for Batched arguments only when it is not 0.
depth = [0]
_lock = threading.Lock()
_levels = itertools.count(1)
_SCALARS = (bool, int, float, complex)


class _Local(threading.local):
    def __init__(self):
        self.stack = []  # (level, size) of this thread's running vmaps, outermost first


_local = _Local()


def enter(size):
    """Start a vmap level of ``size`` examples: its number (greater than every other)."""
    level = next(_levels)
    _local.stack.append((level, size))
    with _lock:
        depth[0] += 1
    return level


def leave(level):
    """End the vmap level ``level`` (the innermost one)."""
    stack = _local.stack
    if stack and stack[-1][0] == level:
        stack.pop()
    with _lock:
        depth[0] -= 1


def active():
    """This thread's running vmap levels, outermost first: ((level, size), ...)."""
    return tuple(_local.stack)


# -- batched values ---------------------------------------------------------------------
def _refuse(what):
    def method(self, *args, **kwargs):
        raise TypeError(
            f"vmap: a batched value can't be converted with {what}: inside vmap it stands "
            "for one example of many, so it has no single value (compute with the "
            "namespace's functions instead, or return it from the vmapped function)"
        )

    method.__name__ = what
    return method


class Batched:
    """A value batched over one or more vmap levels, presented as one example.

    ``value`` is a plain Tensor holding every example, one leading axis per level of
    ``levels`` (ascending: the outermost vmap's axis first); ``shape``, ``ndim``, ``size``,
    ``T``, ``mT`` and indexing are those of one example, and every operator is the
    namespace's function, batched. ``data`` is the raw array of all the examples (what the
    engine reads a device from). Converting it to a Python number, a bool or a foreign
    array raises: it has one value per example.
    """

    __slots__ = ("value", "levels")
    # numpy defers ``ndarray * batched`` to ``Batched.__rmul__`` (before Tensor's)
    __array_ufunc__ = None
    __array_priority__ = 2000

    def __init__(self, value, levels):
        self.value = value
        self.levels = levels

    # -- one example's attributes ------------------------------------------------------
    @property
    def shape(self):
        return tuple(self.value.shape[len(self.levels) :])

    @property
    def ndim(self):
        return self.value.ndim - len(self.levels)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def dtype(self):
        return self.value.dtype

    @property
    def device(self):
        return self.value.device

    @property
    def data(self):
        return self.value.data

    @property
    def _rec(self):
        return self.value._rec

    @property
    def requires_grad(self):
        return self.value.requires_grad

    @property
    def T(self):
        if self.ndim != 2:
            raise ValueError(f"T: the array must be 2-D, got {self.ndim}-D (use .mT)")
        return self._rec.xp.permute_dims(self, (1, 0))

    @property
    def mT(self):
        return self._rec.xp.matrix_transpose(self)

    def __array_namespace__(self, *, api_version=None):
        return self.value._ns

    def to_device(self, device, /, *, stream=None):
        return self._rec.xp.to_device(self, device, stream=stream)

    def detach(self):
        """The same examples, cut from the graph."""
        return Batched(self.value.detach(), self.levels)

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, key, /):
        return self._rec.xp.__getitem__(self, key=key)

    def __setitem__(self, key, value, /):
        _setitem(self, key, value)

    __bool__ = _refuse("bool()")
    __float__ = _refuse("float()")
    __int__ = _refuse("int()")
    __complex__ = _refuse("complex()")
    __index__ = _refuse("operator.index()")
    __array__ = _refuse("numpy.asarray() (__array__)")
    __dlpack__ = _refuse("DLPack (__dlpack__)")
    __buffer__ = _refuse("the buffer protocol")
    item = _refuse("item()")
    tolist = _refuse("tolist()")

    def __repr__(self):
        return (
            f"Batched(one example of shape {self.shape}, levels {self.levels}, "
            f"value={self.value!r})"
        )

    __str__ = __repr__


def _binary_method(name):
    def method(self, other, /):
        return getattr(self._rec.xp, name)(self, other)

    return method


def _reflected_method(name):
    def method(self, other, /):
        return getattr(self._rec.xp, name)(other, self)

    return method


def _unary_method(name):
    def method(self, /):
        return getattr(self._rec.xp, name)(self)

    return method


def _inplace_method(name):
    def method(self, other, /):
        _inplace(self, name, other)
        return self

    return method


for _d, _name in BINARY_OPERATORS.items():
    setattr(Batched, _d, _binary_method(_name))
for _d, _name in REFLECTED_OPERATORS.items():
    setattr(Batched, _d, _reflected_method(_name))
for _d, _name in UNARY_OPERATORS.items():
    setattr(Batched, _d, _unary_method(_name))
for _d, _name in INPLACE_OPERATORS.items():
    setattr(Batched, _d, _inplace_method(_name))
Batched.__hash__ = object.__hash__  # __eq__ is the element-wise one, as a Tensor's


def _expanded(x, levels, rank):
    """``x`` (a Batched of levels among ``levels``, a Tensor or a scalar) as a plain value
    that broadcasts against a Batched of ``levels`` whose examples have ``rank`` axes:
    size-1 axes for the levels it lacks and before its own axes (no copy)."""
    if not isinstance(x, Batched):
        return x  # right-aligned broadcasting already fits
    if not set(x.levels) <= set(levels):
        raise ValueError(
            "vmap: an in-place write into a value batched over fewer vmaps than the "
            "value written: write into a copy (x = x + y) instead"
        )
    have = dict(zip(x.levels, x.value.shape))
    lead = tuple(have.get(level, 1) for level in levels)
    ex = x.shape
    shape = lead + (1,) * max(0, rank - len(ex)) + ex
    v = x.value
    return v if tuple(v.shape) == shape else v._rec.xp.reshape(v, shape)


def _inplace(b, name, other):
    """``b op= other`` on a Batched ``b``: into ``b.value``, by the engine's in-place
    machinery (views, copy-on-write, version counters apply as to any Tensor)."""
    t = b.value
    getattr(t, INPLACE_DUNDER[name])(_expanded(other, b.levels, b.ndim))


INPLACE_DUNDER = {name: dunder for dunder, name in INPLACE_OPERATORS.items()}


def _key_parts(key):
    return key if isinstance(key, tuple) else (key,)


def _setitem(b, key, value):
    """``b[key] = value``: into ``b.value`` with a full slice for each batch axis; a key
    that holds batched indices is written example by example (views of ``b.value``)."""
    parts = _key_parts(key)
    if any(isinstance(k, Batched) for k in parts):
        if any(isinstance(k, Batched) and _is_bool(k) for k in parts):
            raise _mask_error("x[mask] = v")
        level = b.levels[-1]
        lead = len(b.levels) - 1
        for i in range(b.value.shape[lead]):
            view = b.value[(slice(None),) * lead + (i, Ellipsis)]
            view = Batched(view, b.levels[:-1]) if lead else view
            ki = tuple(_example(k, level, i) for k in parts)
            vi = _example(value, level, i)
            view[ki if isinstance(key, tuple) else ki[0]] = vi
        return
    with graph.no_grad():
        region = b[key].ndim  # one example's target region: what ``value`` broadcasts to
    full = (slice(None),) * len(b.levels) + parts
    b.value[full] = _expanded(value, b.levels, region)


def _example(x, level, i):
    """Example ``i`` of ``x`` along vmap level ``level`` (``x`` itself where it is not
    batched over it)."""
    if not isinstance(x, Batched) or level not in x.levels:
        return x
    pos = x.levels.index(level)
    v = x.value[(slice(None),) * pos + (i, Ellipsis)]
    rest = x.levels[:pos] + x.levels[pos + 1 :]
    return Batched(v, rest) if rest else v


def _is_bool(a):
    try:
        return bool(a._rec.backend.isdtype(a.dtype, "bool"))
    except Exception:
        return False


def _mask_error(what):
    return ValueError(
        f"vmap: {what} with a boolean mask that differs from example to example gives "
        "a shape that depends on the values, which vmap can't batch (as JAX); use "
        "xp.where(mask, x, other) instead"
    )


def unbatched_write_error(what):
    """The error for writing a batched value into a tensor that is not batched."""
    return ValueError(
        f"vmap: {what} writes a batched value (one per example) into a tensor that is "
        "the same for every example; compute the result without writing in place "
        "(xp.where, xp.concat), or write into a batched copy of the tensor"
    )


# -- dispatch ---------------------------------------------------------------------------
def holds(args, kwargs):
    """Whether ``args`` or ``kwargs`` (or a tuple or list among them: index keys, lists of
    arrays) hold a Batched value."""
    for a in args:
        t = type(a)
        if t is Batched or ((t is tuple or t is list) and any(type(b) is Batched for b in a)):
            return True
    if kwargs:
        for a in kwargs.values():
            t = type(a)
            if t is Batched or ((t is tuple or t is list) and any(type(b) is Batched for b in a)):
                return True
    return False


class Call:
    """What a batching rule is given besides the op's arguments: the op, its function
    (``f``, the recorded layout of arguments), the recording namespace (``xp``), the batch
    size (``n``) and whether each positional argument is batched (``bd``, its batch axis
    first; for a list of arrays, a tuple of flags) and each keyword argument (``kd``: a
    bool, or a tuple of them for a tuple)."""

    __slots__ = ("op", "f", "xp", "n", "bd", "kd", "level")

    def __init__(self, op, f, xp, n, bd, kd, level):
        self.op, self.f, self.xp, self.n, self.bd, self.kd = op, f, xp, n, bd, kd
        self.level = level

    def composite(self, fn, *args):
        """``fn(*args)``, a formula written with the namespace's functions for one example,
        on these arguments batched again: each of its ops batched by its own rule. For
        argument combinations a fused op can't batch (per-example weights of a cell)."""
        again = [
            Batched(a.value, a.levels + (self.level,))
            if b and type(a) is Batched
            else (Batched(a, (self.level,)) if b else a)
            for a, b in zip(args, self.bd)
        ]
        return _unwrap_level(fn(*again), self.level)

    def rank(self, i, a):
        """One example's number of axes of positional argument ``i`` (value ``a``)."""
        return a.ndim - 1 if self.bd[i] else getattr(a, "ndim", 0)

    def lift(self, a, batched):
        """``a`` batched: as it is if it is, else broadcast along a new first axis (a
        view; None and Python scalars as they are)."""
        if batched or a is None or isinstance(a, _SCALARS):
            return a
        xp = self.xp
        return xp.broadcast_to(xp.expand_dims(a, axis=0), (self.n,) + tuple(a.shape))

    def pad(self, a, rank):
        """A batched ``a`` whose examples have fewer than ``rank`` axes, with size-1 axes
        after the batch axis (so that its examples broadcast as they would alone)."""
        r = a.ndim - 1
        if r >= rank:
            return a
        return self.xp.reshape(a, (a.shape[0],) + (1,) * (rank - r) + tuple(a.shape[1:]))


def _peel(a, level):
    """(``a`` with the batch axis of ``level`` first, whether it is batched over it)."""
    if type(a) is Batched and a.levels[-1] == level:
        lv = a.levels
        return (a.value if len(lv) == 1 else Batched(a.value, lv[:-1])), True
    return a, False


def _unwrap_level(out, level):
    """The inverse of ``_wrap``: outputs of ``level`` with its axis first (broadcast where
    an output doesn't depend on the batch)."""
    if isinstance(out, (tuple, list)):
        items = [_unwrap_level(o, level) for o in out]
        return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)
    if type(out) is Batched and out.levels[-1] == level:
        return _peel(out, level)[0]
    raise ValueError("vmap: a composite rule's output does not depend on the batch")


def _wrap(out, level):
    """The rule's output(s) (batch axis first) as Batched values of ``level``."""
    if isinstance(out, Tensor):
        return Batched(out, (level,))
    if type(out) is Batched:
        return Batched(out.value, out.levels + (level,))
    if isinstance(out, (tuple, list)):
        items = [_wrap(o, level) for o in out]
        return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)
    return out


def _innermost(args, kwargs):
    """(innermost level, its batch size, a Batched of it) among the arguments."""
    best = None
    for a in itertools.chain(args, kwargs.values()):
        items = a if type(a) in (tuple, list) else (a,)
        for b in items:
            if type(b) is Batched and (best is None or b.levels[-1] > best.levels[-1]):
                best = b
    level = best.levels[-1]
    return level, best.value.shape[len(best.levels) - 1], best


def apply(op, f, args, kwargs):
    """``f(*args, **kwargs)`` (the function of ``op``) on arguments holding Batched values:
    the op's batching rule (or the fallback loop) over the innermost vmap level, whose
    outputs are Batched values of that level."""
    level, n, some = _innermost(args, kwargs)
    pargs, bd = [], []
    for a in args:
        if type(a) in (tuple, list) and any(type(x) is Batched for x in a):
            peeled = [_peel(x, level) for x in a]  # asarray([a, b]): a flag per item
            pargs.append(type(a)(p for p, _ in peeled))
            bd.append(tuple(b for _, b in peeled))
        else:
            p, b = _peel(a, level)
            pargs.append(p)
            bd.append(b)
    pkw, kd = {}, {}
    for k, v in kwargs.items():
        if type(v) in (tuple, list) and any(type(x) is Batched for x in v):
            peeled = [_peel(x, level) for x in v]
            pkw[k] = type(v)(p for p, _ in peeled)
            kd[k] = tuple(b for _, b in peeled)
        else:
            pkw[k], kd[k] = _peel(v, level)
    c = Call(op, f, some._rec.xp, n, tuple(bd), kd, level)
    rule = rule_of(op)
    out = NotImplemented if rule is None else rule(c, *pargs, **pkw)
    if out is NotImplemented:
        out = _loop(c, pargs, pkw)
    return _wrap(out, level)


_warned: set = set()


def _loop(c, args, kwargs):
    """The fallback: the op on each example, the results stacked (recorded, so it is
    differentiable too); one warning per op."""
    name = c.op.name
    if name not in _warned:
        _warned.add(name)
        warnings.warn(
            f"vmap: no batching rule for '{name}' (for these arguments): it runs in a "
            "Python loop over the examples, one call each (correct, but slower)",
            UserWarning,
            stacklevel=4,
        )
    if c.n == 0:
        raise ValueError(f"vmap: '{name}' has no batching rule, and the batch is empty")
    outs = []
    for i in range(c.n):
        ai = [a[i, ...] if b else a for a, b in zip(args, c.bd)]
        ki = {}
        for k, v in kwargs.items():
            flag = c.kd.get(k, False)
            if isinstance(flag, tuple):
                ki[k] = type(v)(x[i, ...] if b else x for x, b in zip(v, flag))
            else:
                ki[k] = v[i, ...] if flag else v
        outs.append(c.f(*ai, **ki))
    return _stack_results(c.xp, name, outs)


def _stack_results(xp, name, outs):
    first = outs[0]
    if isinstance(first, (Tensor, Batched)):
        shapes = {tuple(o.shape) for o in outs}
        if len(shapes) > 1:
            raise ValueError(
                f"vmap: '{name}' gives results of different shapes for different examples "
                f"({sorted(shapes)[:3]}...): its output's shape depends on the values, "
                "which vmap can't batch"
            )
        return xp.stack(list(outs), axis=0)
    if isinstance(first, (tuple, list)):
        items = [_stack_results(xp, name, [o[j] for o in outs]) for j in range(len(first))]
        return type(first)(*items) if hasattr(first, "_fields") else type(first)(items)
    return first  # not an array (a dtype, a flag): the same for every example


def rule_of(op):
    """The batching rule of ``op``: its registry field ``batch``, else the table ``RULES``,
    else derived from its metadata (element-wise ops); None: the fallback loop."""
    rule = op.batch
    if rule is None:
        rule = RULES.get(op.name)
        if rule is None and op.style in ("unary", "binary"):
            rule = elementwise
        if rule is not None:
            op.batch = rule
    return rule


def rule_kind(op):
    """How ``op`` is batched: "derived" (from its metadata or a generic rule: element-wise,
    axis shifts, leading batch axes), "written" (a rule of its own) or "fallback"."""
    rule = rule_of(op)
    if rule is None:
        return "fallback"
    return "derived" if getattr(rule, "derived", False) else "written"


def kinds():
    """{op name: rule_kind} for every registered op."""
    return {name: rule_kind(op) for name, op in _registry_ops().items()}


def _derived(fn):
    fn.derived = True
    return fn


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
            first = xp.reshape(xp.arange(n, device=x.device), (n,) + (1,) * r)
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
        first = xp.reshape(xp.arange(n, device=x.device), (n,) + (1,) * r)
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
    offsets = xp.reshape(xp.arange(n, dtype=indices.dtype, device=indices.device) * m, (n, 1))
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


def _embedding(c, weight, indices, *, padding_idx):
    xp, n = c.xp, c.n
    bw, bi = c.bd
    if not bw:
        return c.f(weight, indices, padding_idx=padding_idx)
    indices = c.lift(indices, bi)
    rows = weight.shape[1]
    table = xp.reshape(weight, (n * rows, weight.shape[2]))
    offsets = xp.arange(n, dtype=indices.dtype, device=indices.device) * rows
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


# -- the table: every op with a rule, by name -------------------------------------------------
_REDUCE = axis()  # axis=None (the default): every axis of one example
RULES = {
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
    "clip": elementwise,
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
    **{f"nn.{name}": elementwise for name in ("relu", "sigmoid", "silu", "softplus", "gelu",
                                               "dropout", "scaled_dot_product_attention")},
    "nn.softmax": axis(default=-1, none=FLAT),
    "nn.log_softmax": axis(default=-1, none=FLAT),
    "nn.logsumexp": _REDUCE,
    "nn.linear": _linear,
    "nn.conv2d": _conv,
    "nn.conv_transpose2d": _conv,
    "nn.max_pool2d": _pool,
    "nn.avg_pool2d": _pool,
    "nn.layer_norm": _layer_norm,
    "nn.embedding": _embedding,
    "nn.cross_entropy": _cross_entropy,
    "nn.mse_loss": _mse_loss,
    "nn.binary_cross_entropy_with_logits": _bce,
    "nn.rope": _rope,
    "nn.self_attention_packed": _attention_packed,
    "nn.gru_cell": lambda c, *a: _cell(c, *a, formula=_gru_formula),
    "nn.lstm_cell": lambda c, *a: _cell(c, *a, states=3, weights_from=3, formula=_lstm_formula),
    "nn.gated_memory_cell": lambda c, *a: _cell(c, *a, formula=_gmc_formula),
    "nn.gru_sequence": _gru_sequence,
}  # fmt: skip


# -- transforms inside vmap ---------------------------------------------------------------------
def regroup(x, inner, sizes):
    """``x`` (a Batched value, a Tensor) with its vmap levels ``inner`` (sizes ``sizes``) as
    plain leading axes, broadcast where ``x`` lacks one; its other levels stay batched:
    a Batched of those (axes: theirs, then ``inner``'s, then the example's) or, with none
    left, a plain Tensor. What a transform's graph, made inside vmap, is built on."""
    if isinstance(x, Batched):
        v, lv = x.value, x.levels
    else:
        v, lv = x, ()
    k = len(lv)
    ex = tuple(v.shape[k:])
    outer = tuple(level for level in lv if level not in inner)
    xp = v._rec.xp
    present = tuple(level for level in lv if level in inner)
    order = [lv.index(level) for level in outer + present]
    if order != list(range(k)):  # the other levels' axes first
        v = xp.permute_dims(v, tuple(order) + tuple(range(k, v.ndim)))
    have = {level: v.shape[i] for i, level in enumerate(outer + present)}
    head = tuple(have[level] for level in outer)
    lone = tuple(have.get(level, 1) for level in inner)
    if len(outer) + len(lone) != k or lone != tuple(sizes):
        v = xp.reshape(v, head + lone + ex)
        if lone != tuple(sizes):
            v = xp.broadcast_to(v, head + tuple(sizes) + ex)
    return Batched(v, outer) if outer else v


def merge(r, inner):
    """The inverse of :func:`regroup`: ``r`` (plain, or a Batched of other levels, whose
    leading plain axes are the levels ``inner``) as a Batched of all its levels."""
    if not isinstance(r, Batched):
        return Batched(r, tuple(inner)) if inner else r
    if not inner:
        return r
    v, outer = r.value, r.levels
    both = outer + tuple(inner)
    order = sorted(range(len(both)), key=lambda i: both[i])
    if order != list(range(len(both))):
        v = v._rec.xp.permute_dims(v, tuple(order) + tuple(range(len(both), v.ndim)))
    return Batched(v, tuple(both[i] for i in order))


def levels_of(x):
    return x.levels if isinstance(x, Batched) else ()


def batched_variable(x, wrap):
    """The value a transform differentiates, inside vmap: ``x`` batched over every running
    vmap (broadcast where it isn't), as a plain Tensor, and those levels. Each example
    then gets its own gradient (a primal shared by the examples would get their sum)."""
    stack = active()
    running = tuple(level for level, _ in stack)
    if isinstance(x, Batched):
        if not set(x.levels) <= set(running):
            raise ValueError("vmap: a batched value is used outside the vmap that made it")
    else:
        x = wrap(x)
    return regroup(x, running, tuple(size for _, size in stack)), running


# -- vmap -------------------------------------------------------------------------------------
def _spec_leaves(spec, tree, what, label):
    """One axis (int or None) per leaf of ``tree``, from ``spec``, a prefix of its structure."""
    if spec is None or isinstance(spec, int) and not isinstance(spec, bool):
        return [spec] * len(_pytree().leaves(tree))
    if isinstance(spec, dict) and isinstance(tree, dict) and set(spec) == set(tree):
        keys = _pytree().flatten(tree)[1][1][1]  # the tree's keys, in its leaves' order
        return [a for key in keys for a in _spec_leaves(spec[key], tree[key], what, label)]
    if (
        isinstance(spec, (tuple, list))
        and isinstance(tree, (tuple, list))
        and not isinstance(spec, dict)
        and len(spec) == len(tree)
    ):
        return [a for s, t in zip(spec, tree) for a in _spec_leaves(s, t, what, label)]
    raise ValueError(
        f"vmap: {what} {spec!r} is not a prefix of the structure of {label} (an int, None, "
        "or a dict / tuple / list matching it, as JAX)"
    )


def _pytree():
    from . import pytree

    return pytree


def _names(f, count):
    import inspect

    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [
        f"argument {i} ({names[i]})" if i < len(names) else f"argument {i}" for i in range(count)
    ]


def map_call(f, in_axes, out_axes, axis_size, args, kwargs, rec):
    """``vmap(f, in_axes, out_axes, axis_size)(*args, **kwargs)`` (see transforms.vmap)."""
    pytree = _pytree()
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)  # as JAX: a list at the top is a tuple
    if isinstance(in_axes, tuple):
        if len(in_axes) != len(args):
            raise ValueError(
                f"vmap: in_axes has {len(in_axes)} entries for {len(args)} positional "
                "arguments (give one per argument, or one int / None for all)"
            )
        specs = list(in_axes)
    elif in_axes is None or (isinstance(in_axes, int) and not isinstance(in_axes, bool)):
        specs = [in_axes] * len(args)
    else:
        raise TypeError(
            f"vmap: in_axes must be an int, None or a tuple of them (or of trees), got "
            f"{type(in_axes).__name__}"
        )
    labels = _names(f, len(args))
    flat, tds, axes, where = [], [], [], []
    for i, (a, spec) in enumerate(zip(args, specs)):
        leaves, td = pytree.flatten(a)
        flat.append(leaves)
        tds.append(td)
        axes.append(_spec_leaves(spec, a, "in_axes", labels[i]))
        where.append(labels[i])
    kw_leaves, kw_td = pytree.flatten(kwargs)  # keyword arguments: mapped over axis 0
    flat.append(kw_leaves)
    axes.append([0] * len(kw_leaves))
    where.append("a keyword argument")
    sizes = []
    for leaves, ax, label in zip(flat, axes, where):
        for j, (leaf, a) in enumerate(zip(leaves, ax)):
            if a is None:
                continue
            shape = getattr(leaf, "shape", None)
            if shape is None:
                raise TypeError(
                    f"vmap: {label} is mapped (in_axes {a}) but holds a "
                    f"{type(leaf).__name__}, not an array; give it in_axes None"
                )
            nd = len(shape)
            if not -nd <= a < nd:
                raise ValueError(
                    f"vmap: in_axes {a} is out of range for {label}, of shape {tuple(shape)}"
                )
            ax[j] = a % nd
            sizes.append((shape[a % nd], label, a, tuple(shape)))
    if not sizes:
        if axis_size is None:
            raise ValueError(
                "vmap: every in_axes is None (nothing is mapped): give axis_size= to say "
                "how many examples to make"
            )
        n = int(axis_size)
    else:
        n = sizes[0][0]
        if any(s[0] != n for s in sizes) or (axis_size is not None and axis_size != n):
            detail = "; ".join(f"{lab} axis {a} of shape {sh}: size {s}" for s, lab, a, sh in sizes)
            raise ValueError(f"vmap: the mapped axes have different sizes: {detail}")
    wrap_leaf = _lifter(rec)
    level = enter(n)
    try:
        new = []
        for leaves, ax in zip(flat, axes):
            new.append([_batch_leaf(wrap_leaf(x), a, level) if a is not None else wrap_leaf(x)
                        for x, a in zip(leaves, ax)])  # fmt: skip
        call_args = [pytree.unflatten(td, leaves) for td, leaves in zip(tds, new[:-1])]
        call_kwargs = pytree.unflatten(kw_td, new[-1])
        out = f(*call_args, **call_kwargs)
        outs, out_td = pytree.flatten(out)
        if isinstance(out_axes, list):
            out_axes = tuple(out_axes)
        oaxes = _spec_leaves(out_axes, out, "out_axes", "the output")
        results = [_unbatch_leaf(o, a, level, n, rec) for o, a in zip(outs, oaxes)]
    finally:
        leave(level)
    raw = not any(
        isinstance(x, (Tensor, Batched)) for leaves in flat for x in leaves
    )  # raw arrays in, raw arrays out (as the other transforms)
    if raw:
        results = [r.detach().data if isinstance(r, Tensor) else r for r in results]
    return pytree.unflatten(out_td, results)


def _lifter(rec):
    def lift(x):
        if isinstance(x, (Tensor, Batched)) or x is None or isinstance(x, _SCALARS):
            return x
        return rec.wrap(x) if rec.backend.is_array(x) else x

    return lift


def _batch_leaf(x, a, level):
    """A mapped argument: its axis ``a`` (of one example, if it is batched already by an
    outer vmap) as the batch axis of ``level``."""
    if isinstance(x, Batched):
        k = len(x.levels)
        v = x.value
        if a:
            v = v._rec.xp.moveaxis(v, k + a, k)
        return Batched(v, x.levels + (level,))
    if a:
        x = x._rec.xp.moveaxis(x, a, 0)
    return Batched(x, (level,))


def _unbatch_leaf(o, a, level, n, rec):
    """An output of the vmapped function, its batch axis of ``level`` at ``a``."""
    batched = isinstance(o, Batched) and level in o.levels
    if a is None:
        if batched:
            raise ValueError(
                "vmap: out_axes is None for an output that differs from example to example"
            )
        return o
    if batched:
        lv = o.levels
        r = o.value if len(lv) == 1 else Batched(o.value, lv[:-1])
    else:  # the same for every example: repeated n times
        if o is None:
            return None
        if not isinstance(o, (Tensor, Batched)):
            o = rec.xp.asarray(o) if not rec.backend.is_array(o) else rec.wrap(o)
        xp = rec.xp
        r = xp.broadcast_to(xp.expand_dims(o, axis=0), (n,) + tuple(o.shape))
    nd = r.ndim
    if not -nd <= a < nd:
        raise ValueError(f"vmap: out_axes {a} is out of range for an output of {nd - 1} axes")
    a %= nd
    return r if a == 0 else rec.xp.moveaxis(r, 0, a)
