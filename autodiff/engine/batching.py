"""``vmap``'s machinery: batched values, dispatch to an op's batching rule, the fallback loop.

Inside ``vmap(f)``, every mapped argument is a :class:`Batched`: a plain Tensor of the
namespace (``value``) holding all the examples, the batch axis first, presented as ONE
example (``shape``, ``ndim``, operators, ``__array_namespace__``...), so code written
for one example runs unchanged. When an op of the namespace is called on a Batched
value (the namespace's wrappers test one global counter, ``depth``, per call), it goes
to :func:`apply`, which runs the op's *batching rule* on the plain full-batch Tensors:
the op is recorded as usual, on all the examples at once, so reverse mode needs nothing
more. :func:`rule_of` finds the rule: the one the op declares at registration
(``Op.batch``), else one derived from its metadata (``elementwise`` for an element-wise
op); an op without one runs in a Python loop over the examples (slice, call, stack), and
says so once (a ``UserWarning`` naming it). ``Op.batch_kind`` says which ("written",
"derived", "fallback").

Adding a rule: write ``_<op>_batch(c, ...)`` beside the op's registration in its rules
module (an nn op: its family's module in ``autodiff/nn/functional``) and pass
``batch=_<op>_batch`` to ``defop``; or pass a generic maker of
:mod:`autodiff.rules.batch_rules` (``batch=leading``, ``batch=axis("axis")``...); an
element-wise op needs neither. This module imports no rule module: the rules import it.

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
fallback loop for this call (an argument combination it doesn't cover); see
:mod:`autodiff.rules.batch_rules` for the helpers rules share.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import math
import threading
import warnings

from ..backends import device_of
from . import standard
from .grad_mode import no_grad
from .tensor import (
    BINARY_OPERATORS,
    INPLACE_OPERATORS,
    REFLECTED_OPERATORS,
    UNARY_OPERATORS,
    Tensor,
)

__all__ = [
    "Batched", "Call", "apply", "holds", "rule_of", "derived", "elementwise", "depth",
    "enter", "leave",
]  # fmt: skip

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
        return device_of(self.value)

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

    def register_hook(self, hook):
        """``hook`` called on each example's gradient (batched, as this value); a
        non-None result replaces it. Returns the handle of ``value``'s hook."""
        levels, rank = self.levels, self.ndim

        def each(g):  # g: the gradient of every example, arriving at ``value``
            if type(g) is Batched:
                raise NotImplementedError(
                    "register_hook: a hook on a batched value, in a backward pass batched "
                    "over another vmap (vmap of vjp, jacrev, hessian), is not supported"
                )
            r = hook(Batched(g, levels))
            if r is None:
                return None
            r = _expanded(r, levels, rank)  # the same for every example: broadcast
            return r if tuple(r.shape) == tuple(g.shape) else g._rec.xp.broadcast_to(r, g.shape)

        return self.value.register_hook(each)

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


def key_parts(key):
    """An index key as a tuple of its parts (``x[i]`` is ``x[(i,)]``)."""
    return key if isinstance(key, tuple) else (key,)


def _setitem(b, key, value):
    """``b[key] = value``: into ``b.value`` with a full slice for each batch axis; a key
    that holds batched indices is written example by example (views of ``b.value``)."""
    parts = key_parts(key)
    if any(isinstance(k, Batched) for k in parts):
        if any(isinstance(k, Batched) and is_bool(k) for k in parts):
            raise mask_error("x[mask] = v")
        level = b.levels[-1]
        lead = len(b.levels) - 1
        for i in range(b.value.shape[lead]):
            view = b.value[(slice(None),) * lead + (i, Ellipsis)]
            view = Batched(view, b.levels[:-1]) if lead else view
            ki = tuple(_example(k, level, i) for k in parts)
            vi = _example(value, level, i)
            view[ki if isinstance(key, tuple) else ki[0]] = vi
        return
    with no_grad():
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


def is_bool(a):
    """Whether array ``a`` (a Tensor or Batched value) holds booleans: a mask."""
    try:
        return bool(a._rec.backend.isdtype(a.dtype, "bool"))
    except Exception:
        return False


def mask_error(what):
    """The error for ``what`` with a boolean mask that differs from example to example."""
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


def peel(a, level):
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
        return peel(out, level)[0]
    raise ValueError("vmap: a composite rule's output does not depend on the batch")


def wrap_level(out, level):
    """The rule's output(s) (batch axis first) as Batched values of ``level``."""
    if isinstance(out, Tensor):
        return Batched(out, (level,))
    if type(out) is Batched:
        return Batched(out.value, out.levels + (level,))
    if isinstance(out, (tuple, list)):
        items = [wrap_level(o, level) for o in out]
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


@functools.cache
def _keyword_only(name):
    """The standard's signature of op ``name`` and the names of its keyword-only
    parameters (and ours, ``requires_grad``); None for an op the standard doesn't have."""
    if name not in standard.SIGNATURES:
        return None
    sig = standard.signature(name)
    kw = inspect.Parameter.KEYWORD_ONLY
    names = {p.name for p in sig.parameters.values() if p.kind is kw}
    return sig, frozenset(names | {"requires_grad"})  # creation functions' extra keyword


def _positional(op, B, args, kwargs):
    """``args, kwargs`` with the keyword arguments that may also be given by position
    moved there (``roll(x, shift=1)``; NumPy's ``repeat(x, repeats=2)``): rules take
    that layout, args first. Bound to the standard's signature, else to the backend
    function's own (its names); a call neither takes is the standard's TypeError,
    naming the op."""
    known = _keyword_only(op.name)
    if known is None or not kwargs or known[1].issuperset(kwargs):
        return args, kwargs
    keep = {k: v for k, v in kwargs.items() if k in known[1]}
    move = {k: v for k, v in kwargs.items() if k not in known[1]}
    try:
        bound = known[0].bind_partial(*args, **move)
    except TypeError as exc:
        try:
            bound = inspect.signature(op.function(B)).bind_partial(*args, **move)
        except (TypeError, ValueError):
            raise TypeError(f"{op.name}: {exc}") from None
    return bound.args, {**bound.kwargs, **keep}


def apply(op, f, args, kwargs):
    """``f(*args, **kwargs)`` (the function of ``op``) on arguments holding Batched values:
    the op's batching rule (or the fallback loop) over the innermost vmap level, whose
    outputs are Batched values of that level."""
    level, n, some = _innermost(args, kwargs)
    if kwargs:  # most calls have none: no call to make
        args, kwargs = _positional(op, some._rec.backend, args, kwargs)
    pargs, bd = [], []
    for a in args:
        if type(a) in (tuple, list) and any(type(x) is Batched for x in a):
            peeled = [peel(x, level) for x in a]  # asarray([a, b]): a flag per item
            pargs.append(type(a)(p for p, _ in peeled))
            bd.append(tuple(b for _, b in peeled))
        else:
            p, b = peel(a, level)
            pargs.append(p)
            bd.append(b)
    pkw, kd = {}, {}
    for k, v in kwargs.items():
        if type(v) in (tuple, list) and any(type(x) is Batched for x in v):
            peeled = [peel(x, level) for x in v]
            pkw[k] = type(v)(p for p, _ in peeled)
            kd[k] = tuple(b for _, b in peeled)
        else:
            pkw[k], kd[k] = peel(v, level)
    c = Call(op, f, some._rec.xp, n, tuple(bd), kd, level)
    rule = rule_of(op)
    out = NotImplemented if rule is None else rule(c, *pargs, **pkw)
    if out is NotImplemented:
        out = _loop(c, pargs, pkw)
    return wrap_level(out, level)


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


def derived(fn):
    """Mark ``fn`` as a rule derived (from metadata, or from another rule), not written for
    one op.

    ``Op.batch_kind`` reports an op whose batching rule is marked so as "derived"
    (``elementwise``, the makers of :mod:`autodiff.rules.batch_rules`), any other as
    "written"; ``Op.vjp_kind`` likewise (a ``custom_jvp``'s VJP: its JVP transposed)."""
    fn.derived = True
    return fn


@derived
def elementwise(c, *args, **kwargs):
    """Element-wise ops: a batched operand whose examples have fewer axes than the others
    gets size-1 axes after its batch axis; then the op broadcasts as usual.

    Defined here, not among the rules, because :func:`rule_of` derives it from an op's
    metadata (``Op.diagonal``) and the engine imports no rule module."""
    ranks = [c.rank(i, a) for i, a in enumerate(args) if hasattr(a, "ndim")]
    r = max(ranks, default=0)
    args = [c.pad(a, r) if b else a for a, b in zip(args, c.bd)]
    return c.f(*args, **kwargs)


def rule_of(op):
    """The batching rule of ``op``; None: the fallback loop.

    In this order: the rule it declares (``Op.batch``), ``elementwise`` for an op whose
    metadata says it is element-wise in every argument (``Op.diagonal``, by default the
    "unary" and "binary" styles)."""
    rule = op.batch
    if rule is None and op.diagonal:
        rule = elementwise
    return rule
