"""``Autodiff(xp)``: a namespace with the functions of ``xp`` whose arrays record a graph.

Built from the registry: every op becomes a function that unwraps Tensors,
calls the backend, wraps the result and, when an input requires grad, records
a :class:`~autodiff.graph.Node`. Element-wise ops get specialized wrappers with
no argument loop (they dominate small-array code); everything else goes
through one generic wrapper.

One :class:`Recorder` per backend holds what a wrapped namespace is made of:

- ``backend``: the raw compute namespace (``autodiff.backends.Backend``), which
  is also the ``xp`` of rules in a plain backward pass;
- ``cls``: its Tensor subclass, whose operators are the functions below;
- ``xp``: the recording namespace: the function of every registered op
  (``xp.sum``, ``xp.linalg.solve``, ``xp.nn.conv2d``, the kernels ``xp.pad2d``,
  ``xp.index_add``...), differentiable versions of the other kernels, the
  dtypes and constants, ``records = True`` and ``stop_gradient``: the ``xp`` of
  rules under ``create_graph``;
- ``namespace``: the user's namespace, the standard's names only, each with the
  standard's signature.

Other modules reach a Recorder with :func:`recorder_of`; its methods without a
leading underscore (``wrap``, ``wrap_out``, ``raw``, ``raw_key``, ``record``) and
:func:`move_leaf` are the engine's internal API.
"""

from __future__ import annotations

import functools
import numbers
import types

from .. import backends, checks
from . import inplace, standard, tracing
from .anomaly import anomaly, check_forward
from .batching import Batched, holds
from .batching import apply as _batched_call
from .batching import depth as _vmapping
from .errors import add_op_name
from .grad_mode import grad_off, mode
from .node import Meta, MultiNode, Node, next_seq
from .registry import CONST, MISSING, Op
from .registry import ops as _registry_ops
from .tensor import (
    BINARY_OPERATORS,
    CONVERSIONS,
    INPLACE_OPERATORS,
    REFLECTED_OPERATORS,
    UNARY_OPERATORS,
    Tensor,
)
from .versions import saved_counter as _counter
from .versions import share_version as _share_version

__all__ = ["Autodiff", "Recorder", "recorder_of", "move_leaf"]

_new = object.__new__
_NO_KWARGS: dict = {}
_NONE1 = (None,)
_PYTHON_SCALARS = (bool, int, float, complex)

_cache: dict = {}  # backend key -> Recorder


def Autodiff(xp) -> types.ModuleType:
    """The differentiable namespace of the Array API namespace ``xp`` (cached per backend)."""
    if any(rec.namespace is xp for rec in _cache.values()):  # already differentiable
        return xp
    if isinstance(xp, (str, bytes, int, float, complex)) or not hasattr(xp, "asarray"):
        raise TypeError(
            "Autodiff: xp must be an array namespace (numpy, array_api_strict, "
            f"array_api_compat.torch...), got {xp!r} ({type(xp).__name__})"
        )
    return _recorder(xp).namespace


def _recorder(xp) -> Recorder:
    B = backends.resolve(xp)
    rec = _cache.get(B.key)
    if rec is None:
        rec = _cache[B.key] = Recorder(B)
    return rec


# array type -> array_api_compat's namespace for it, which its type decides (a library
# whose namespaces differ has a class per namespace): a lookup instead of compat's tests,
# for each raw array a transform or an nn function is given
_namespaces: dict = {}


def recorder_of(*arrays) -> Recorder:
    """The Recorder of the first Tensor's namespace among ``arrays``; without one, of the
    first raw array's namespace (None and Python scalars are passed over). Anything else
    among them is a TypeError naming the public function called and the argument."""
    found = None
    for a in arrays:
        if isinstance(a, Tensor):
            found = a._rec
            break
    for a in arrays:
        if a is None or isinstance(a, (Tensor, bool, int, float, complex)):
            continue
        if type(a) is Batched:  # inside vmap: one example of a batch (batching.py)
            found = found or a._rec
            continue
        xp = _namespaces.get(type(a))
        if xp is None:
            import array_api_compat

            try:
                xp = array_api_compat.array_namespace(a)
            except TypeError:
                raise TypeError(_not_an_array(a)) from None
            _namespaces[type(a)] = xp
        if found is None:
            found = _recorder(xp)
    if found is None:
        got = type(arrays[0]).__name__ if arrays else "nothing"
        raise TypeError(f"expected an array or a Tensor, got {got}")
    return found


_PACKAGE = __name__.split(".")[0] + "."
_NN = __name__.split(".")[0] + ".nn."
_FUNCTIONAL = _NN + "functional"


def _not_an_array(a):
    """The message ``relu: x must be an array or a Tensor, got str``, its names found on
    the stack (on this error path only, so no public function passes its names along):
    the argument's is its name in the nearest public function of ``nn.functional`` on
    the way out (else in the layer that asked), the op's that function's name."""
    import sys

    got = type(a).__name__
    frame = sys._getframe(2)  # the function that called recorder_of
    arg = None  # a variable of the engine or the transforms would mean nothing to the user
    if frame.f_globals.get("__name__", "").startswith(_NN):  # an op's or a layer's
        arg = next((k for k, v in frame.f_locals.items() if v is a), None)
    op = None
    while frame is not None and frame.f_globals.get("__name__", "").startswith(_PACKAGE):
        module = frame.f_globals["__name__"]
        name = frame.f_code.co_name
        if module.startswith(_FUNCTIONAL) and name in frame.f_globals.get("__all__", ()):
            op = name
            arg = next((k for k, v in frame.f_locals.items() if v is a), arg)
            break
        frame = frame.f_back
    what = f"{arg} must be an array or a Tensor" if arg else "expected an array or a Tensor"
    return f"{op + ': ' if op else ''}{what}, got {got}"


def move_leaf(t, new, grad, requires_grad):
    """Make the leaf ``t`` hold the values of the Tensor ``new`` (of any namespace), its
    gradient ``grad``: ``model.to(xp)`` keeps the same parameter objects, as torch."""
    if type(t) is not type(new):
        t.__class__ = type(new)
    t.data = new.data
    t._version = None  # a new buffer: nothing saved the old one's versions
    t.grad = grad
    t._rg = requires_grad


def real_only_error(name, dtype, grad=True):
    if not grad:  # an extension op of ours: no backend behaviour to follow
        return TypeError(f"{name}: complex input ({dtype}): defined for real values only")
    return TypeError(
        f"{name}: complex input ({dtype}) that requires grad: the function is defined "
        "for real values only (the standard's), so it has no complex gradient rule"
    )


def _saved(op: Op, *active):
    """Positions whose values the rules of the ``active`` arguments read.

    ``op.saves`` is None (every argument), a tuple of positions, or one tuple per
    argument (what that argument's rule reads, e.g. multiply's ``((1,), (0,))``).
    """
    saves = op.saves
    if saves is None:
        return range(1 << 16)
    if op.per_arg_saves:
        return {p for i in active if i < len(saves) for p in saves[i]}
    return saves


def _stop_gradient(x, /):
    """``x`` cut from the graph (a constant of the recorded computation)."""
    return x.detach() if isinstance(x, Tensor) else x


class Recorder:
    """One wrapped namespace: its Tensor class, the recording function of every
    registered op (``xp``), the user's namespace, and what the backward pass needs."""

    def __init__(self, B):
        self.backend = B
        self._real = {}  # dtype -> whether it is real floating
        self._complex = {}  # dtype -> whether it is complex floating
        self.cls = cls = type("Tensor", (Tensor,), {"__slots__": (), "__module__": "autodiff"})
        cls._rec = self
        xp = self.xp = types.SimpleNamespace(
            records=True,
            stop_gradient=_stop_gradient,
            mutable=True,  # a Tensor takes x[key] = v on every backend (copy-on-write)
            linalg=types.SimpleNamespace(),
            fft=types.SimpleNamespace(),
            nn=types.SimpleNamespace(),  # extension ops (autodiff.nn.functional)
        )
        for op in _registry_ops().values():
            fn = self._make(op)
            if fn is not None:
                home, _, name = op.name.rpartition(".")
                setattr(getattr(xp, home) if home else xp, name, fn)
        # Kernels without an op of their name: their generic version, written with the
        # other functions, on this namespace: recorded (index_add_ becomes index_add).
        for name in backends.KERNELS:
            if not hasattr(xp, name):
                setattr(xp, name, functools.partial(getattr(backends.generic, name), xp))
        for name in standard.DTYPES + standard.EXTRA_DTYPES + standard.CONSTANTS:
            if hasattr(B, name):
                setattr(xp, name, getattr(B, name))
        self._bind_operators()
        self.namespace = self._public()
        cls._ns = self.namespace
        # what a call may take besides its Tensors: this library's arrays and numbers
        self._own = (type(B.asarray(0.0)), numbers.Number, Batched, Tensor)
        self._foreign = {}  # type -> whether its instances are foreign (see foreign)

    # -- building --------------------------------------------------------------
    def _bind_operators(self):
        cls, xp = self.cls, self.xp
        for dunder, name in {**BINARY_OPERATORS, **UNARY_OPERATORS}.items():
            if hasattr(xp, name):
                setattr(cls, dunder, getattr(xp, name))
        for dunder, name in REFLECTED_OPERATORS.items():
            if hasattr(xp, name):
                setattr(cls, dunder, _reflected(getattr(xp, name)))
        for dunder, name in INPLACE_OPERATORS.items():
            setattr(cls, dunder, _inplace_method(dunder, name))
        cls.__getitem__ = _getitem_method(self, xp.__getitem__)
        cls.__setitem__ = inplace.setitem
        proto = type(self.backend.asarray(0.0))
        for dunder, method in CONVERSIONS.items():
            if hasattr(proto, dunder):
                setattr(cls, dunder, method)

    def _make(self, op: Op):
        raw = op.function(self.backend)
        if raw is None:
            return None
        make = {"unary": _unary, "binary": _binary, "creation": _creation}.get(op.style, _generic)
        fn = make(self, op, raw)
        fn.__name__ = fn.__qualname__ = op.name.rpartition(".")[2]
        fn.__doc__ = op.doc or getattr(raw, "__doc__", None)
        if op.public is not None:
            public = op.public(fn, self)
            public.__name__ = public.__qualname__ = fn.__name__
            public.__doc__ = fn.__doc__
            public.internal = fn  # the op's own convention (jit's redirect calls it)
            fn = public
        if op.name in standard.SIGNATURES:  # help(), inspect and IDEs see the standard's
            sig = standard.signature(op.name)
            creation = op.style == "creation"
            fn.__signature__ = standard.with_requires_grad(sig) if creation else sig
        return fn

    def _public(self):
        """The user's namespace: exactly the standard's names the backend has."""
        B = self.backend
        ns = types.ModuleType(f"autodiff.{B.key}")
        ns.__doc__ = f"Differentiable Array API namespace over {B.key}."
        ns.__array_api_version__ = B.__array_api_version__
        ns.__array_namespace_info__ = B.__array_namespace_info__
        for name in standard.MAIN + standard.EXTRA_DTYPES:
            if hasattr(B, name):
                setattr(ns, name, getattr(self.xp, name, None) or getattr(B, name))
        for sub, names in (("linalg", standard.LINALG), ("fft", standard.FFT)):
            if hasattr(B, sub):
                mod = types.ModuleType(f"autodiff.{B.key}.{sub}")
                src = getattr(self.xp, sub)
                for name in names:
                    if hasattr(getattr(B, sub), name):
                        setattr(mod, name, getattr(src, name))
                setattr(ns, sub, mod)
        return ns

    # -- the engine's internal API ---------------------------------------------
    def wrap(self, data):
        """A Tensor of this namespace holding the raw array ``data`` (no history)."""
        t = _new(self.cls)
        t.data = data
        t._node = None
        t._index = 0
        t._rg = False
        t._grad = None  # the slot under Tensor.grad (the property warns on reads)
        t._version = None
        t._base = None
        return t

    def wrap_out(self, out):
        """``wrap`` of a function's result: arrays, scalars, tuples and lists of them."""
        B = self.backend
        if B.is_array(out):
            return self.wrap(out)
        if isinstance(out, B.scalar_types):
            return self.wrap(B.asarray(out))
        if isinstance(out, (tuple, list)):
            items = [self.wrap_out(o) for o in out]
            if hasattr(out, "_fields"):
                return type(out)(*items)
            return type(out)(items)
        return out

    def raw(self, a, name):
        """The raw array of a Tensor of this namespace; anything else as it is."""
        if isinstance(a, Tensor):
            if type(a) is not self.cls:
                if (
                    tracing.active[0] is not None
                    and tracing.recorders.get(getattr(a._rec.backend, "key", None)) is self
                ):  # jit's namespace meeting an eager Tensor: state of the trace
                    tracing.active[0].lift(a)
                    return a.data
                if tracing.active[0] is not None and tracing.traced_recorder((a,)):
                    raise NotImplementedError(
                        f"jit: {name}: the traced function writes a traced value into a "
                        "Tensor it does not take as an argument (state: a module's buffer, "
                        "a parameter): writing state is not supported by jit yet"
                    )
                raise self._mix_error(name, a)
            return a.data
        return a

    def raw_key(self, key):
        """An index key with its Tensors unwrapped."""
        if isinstance(key, tuple):
            return tuple(self.raw(k, "__getitem__") for k in key)
        return self.raw(key, "__getitem__")

    def record(self, op: Op, out, args, raws, kwargs, residuals=None):
        """Wrap ``out`` as the output(s) of a new node for this call of ``op``:
        ``args`` as given (Tensors among them), ``raws`` their raw arrays."""
        B = self.backend
        if B.scalar_types and isinstance(out, B.scalar_types):  # numpy's 0-d results
            out = B.asarray(out)
        if type(out) is B.array_type and self._real.get(out.dtype):
            return self._record_one(op, out, args, raws, kwargs, residuals)
        multi = isinstance(out, (tuple, list))
        outs = list(out) if multi else [out]
        for i, o in enumerate(outs):
            if not B.is_array(o):
                if isinstance(o, B.scalar_types):
                    outs[i] = B.asarray(o)
                else:
                    return self.wrap_out(out)
        # Each output decides for itself: a float output of a multi-output op is
        # differentiable even where another is bool or integer (broadcast_arrays(x > 0, x)).
        real = [self._differentiable(op, o.dtype) for o in outs]
        if not any(real):
            return self.wrap_out(out)  # integer or bool results carry no gradient
        if not multi:
            return self._record_one(op, outs[0], args, raws, kwargs, residuals)
        saved, edges, versions = self._inputs(op, args, raws)
        outs_meta = tuple((o.shape, o.dtype) for o in outs)
        node = MultiNode(op, saved, kwargs, None, edges, versions, outs_meta)
        if anomaly[0]:
            check_forward(B, node, outs, raws)
        if op.saves_ans:
            node.ans = tuple(outs)
        elif residuals is not None:
            node.ans = residuals
        results = []
        for i, o in enumerate(outs):
            t = self.wrap(o)
            if real[i]:
                t._node = node
                t._index = i
                t._rg = True
            if op.view and isinstance(args[0], Tensor):
                _share_version(args[0], t, inplace.Call(op.name, raws[1:], kwargs, i))
            results.append(t)
        if hasattr(out, "_fields"):
            return type(out)(*results)
        return type(out)(results)

    def _kinds(self, dtype):
        real = self._real.get(dtype)
        if real is None:  # isdtype is slow (microseconds): once per dtype
            B = self.backend
            real = self._real[dtype] = bool(B.isdtype(dtype, "real floating"))
            self._complex[dtype] = bool(B.isdtype(dtype, "complex floating"))
        return real, self._complex[dtype]

    def is_complex(self, dtype):
        """Whether ``dtype`` is complex floating (cached)."""
        c = self._complex.get(dtype)
        return self._kinds(dtype)[1] if c is None else c

    def _differentiable(self, op, dtype):
        """Whether an output of ``dtype`` gets a gradient (real or complex floating)."""
        real, cplx = self._kinds(dtype)
        if cplx and not op.complex:
            raise real_only_error(op.name, dtype)
        return real or cplx

    def _record_one(self, op, out, args, raws, kwargs, residuals):
        """``record`` of one floating-point array (the common case)."""
        saved, edges, versions = self._inputs(op, args, raws)
        node = Node(op, saved, kwargs, None, edges, versions)
        if anomaly[0]:
            check_forward(self.backend, node, (out,), raws)
        if op.saves_ans:
            node.ans = out
        elif residuals is not None:
            node.ans = residuals
        t = self.wrap(out)
        t._node = node
        t._rg = True
        if op.view and isinstance(args[0], Tensor):
            _share_version(args[0], t, inplace.Call(op.name, raws[1:], kwargs))
        return t

    def _inputs(self, op, args, raws):
        """(saved args, edges, versions) of a new node: an edge per Tensor that needs a
        gradient, the values the rules read (with their version counters), and Meta
        (shape, dtype, device) for the others."""
        rules, joint, saves = op.vjp, op.joint, op.saves
        nrules = 0 if joint else len(rules)
        edges = [None] * len(args)
        tensors = []
        i = -1
        for a in args:
            i += 1
            if not isinstance(a, Tensor):  # of this namespace: the wrapper checked
                continue
            tensors.append(i)
            if a._rg and (joint or (i < nrules and rules[i] is not None)):
                n = a._node
                d = a.data
                edges[i] = (n, a._index if n is not None else a, d.shape, d.dtype)
        if op.per_arg_saves:  # what is kept depends on which gradients are wanted
            saves = _saved(op, *(j for j, e in enumerate(edges) if e is not None))
        device_of, lazy = self.backend.device_of, self.backend.lazy
        saved = list(raws)
        versions = []
        for i in tensors:
            a = args[i]
            if saves is None or i in saves:
                c = _counter(a)
                versions.append((c, c[0]))
            else:  # what the rule may read of an argument whose values it doesn't need
                d = a.data
                if lazy and any(n != n or n is None for n in d.shape):
                    # sizes known only once computed (dask, after a boolean mask): the
                    # lazy array itself, so a rule can count its elements lazily
                    saved[i] = d
                else:
                    saved[i] = Meta(d.shape, d.dtype, device_of(d))
        return tuple(saved), tuple(edges), tuple(versions)

    def foreign(self, a):
        """Whether ``a`` is an array of another library (torch's in a NumPy namespace,
        NumPy's in array_api_strict's...): the backend would convert it silently, or
        hand back that library's array, with the graph cut."""
        t = type(a)
        known = self._foreign.get(t)  # per type: a lookup on the per-op path
        if known is None:
            known = self._foreign[t] = not issubclass(t, self._own) and (
                hasattr(t, "__array_namespace__") or hasattr(t, "__dlpack__")
            )
        return known

    def check_native(self, name, args, kwargs=None):
        """A TypeError naming the op and both libraries if an argument (or an item of a
        list or tuple argument, or a keyword's value) is an array of another library."""
        for a in args:
            if type(a) in (list, tuple):
                self.check_native(name, a)
            elif a is not None and self.foreign(a):
                raise self.foreign_error(name, a)
        if kwargs:
            self.check_native(name, kwargs.values())

    def foreign_error(self, name, a):
        t = type(a)
        ns = self.namespace.__name__
        return TypeError(
            f"{name}: an array of {t.__module__.split('.')[0]} ({t.__module__}."
            f"{t.__qualname__}) in a call on tensors of {ns}: arrays of two libraries "
            f"can't be mixed ({ns} can't differentiate through the other's, and would "
            f"convert it silently or hand back its array). Move it first: "
            f"{ns}.asarray(a) copies its values into {ns}"
        )

    def mixed(self, op, args, kwargs, other):
        """A call of ``op`` that met ``other``, a Tensor of another namespace: inside
        ``jit``, the trace namespace's (tracing.redirect); else the TypeError."""
        out = tracing.redirect(op, args, kwargs, self)
        if out is None:
            raise self._mix_error(op.name, other)
        return out

    def _mix_error(self, name, a):
        return TypeError(
            f"{name}: tensors of two different namespaces in one call "
            f"({type(a)._ns.__name__} and {self.namespace.__name__}); move one with "
            "xp.asarray(...) of the other namespace"
        )


# -- the wrappers: one function per op ------------------------------------------------
# The element-wise wrappers make the Tensor and the Node inline, each in its own copy
# (no helper call, no argument loop): they are the per-op cost of small-array code
# (``python -m benchmarks chain``).
def _unary(rec, op, raw):
    cls, name, B = rec.cls, op.name, rec.backend
    array_type, asarray = rec.backend.array_type, rec.backend.asarray
    generic = _generic(rec, op, raw)
    saves_x = 0 in _saved(op, 0)
    saves_ans = op.saves_ans
    diff = op.kind != CONST
    real_only = diff and not op.complex  # complex inputs refused (one test per call)
    is_complex = rec.is_complex

    def unary(x, /):
        if type(x) is not cls:
            return generic(x)
        d = x.data
        try:
            out = raw(d)
        except Exception as exc:
            add_op_name(exc, name)
            raise
        if array_type is not None and type(out) is not array_type:
            out = asarray(out)
        t = _new(cls)
        t.data = out
        t._grad = None  # the slot under Tensor.grad (the property warns on reads)
        t._base = None
        t._index = 0
        t._version = None
        if diff and x._rg and (not grad_off[0] or mode.enabled):
            if real_only and is_complex(d.dtype):
                raise real_only_error(name, d.dtype)
            n = x._node
            node = _new(Node)
            node.seq = next_seq()
            node.op = op
            node.kwargs = _NO_KWARGS
            node.edges = ((n, x._index if n is not None else x, d.shape, d.dtype),)
            if saves_x:
                c = x._version
                if c is None:
                    c = x._version = [0]
                elif len(c) > 1:  # a view family's counter: mark it saved
                    c[1] = True
                node.args = (d,)
                node.versions = ((c, c[0]),)
            else:
                node.args = _NONE1
                node.versions = ()
            node.ans = out if saves_ans else None
            if anomaly[0]:
                check_forward(B, node, (out,), (d,))
            t._node = node
            t._rg = True
        else:
            t._node = None
            t._rg = False
        return t

    return unary


def _operand(rec, op, fn, x1, x2, other):
    """``fn(x1, x2)`` of a binary op whose operand ``other`` is neither a Tensor of the
    namespace nor a Python number: inside ``vmap`` a batch (the op's batching rule),
    inside ``jit`` a traced array (the trace namespace's op); else None (go on), or a
    TypeError for an array of another library."""
    if _vmapping[0] and type(other) is Batched:
        return _batched_call(op, fn, (x1, x2), _NO_KWARGS)
    if tracing.active[0] is not None and type(other) in tracing.arrays:
        out = tracing.redirect(op, (x1, x2), _NO_KWARGS, rec)
        if out is not None:
            return out
    if rec.foreign(other):
        raise rec.foreign_error(op.name, other)
    return None


def _no_tensor(rec, op, raw, fn, x1, x2):
    """``fn(x1, x2)`` of a binary op given no Tensor: batches inside ``vmap``, traced
    arrays inside ``jit``, else the backend's result wrapped."""
    if _vmapping[0] and (type(x1) is Batched or type(x2) is Batched):
        return _batched_call(op, fn, (x1, x2), _NO_KWARGS)
    if tracing.active[0] is not None:
        out = tracing.redirect(op, (x1, x2), _NO_KWARGS, rec)
        if out is not None:
            return out
    rec.check_native(op.name, (x1, x2))
    return rec.wrap_out(raw(x1, x2))


def _binary(rec, op, raw):
    cls, xp, name, B = rec.cls, rec.xp, op.name, rec.backend
    array_type, asarray = rec.backend.array_type, rec.backend.asarray
    diff = op.kind != CONST
    rule1, rule2 = op.vjp or (None, None)
    saves_ans = op.saves_ans
    # need[r1 + 2*r2] = (keep x1's value, keep x2's value) when the gradient of
    # x1 (r1) and/or x2 (r2) is needed.
    need = [None] + [
        (0 in _saved(op, *active), 1 in _saved(op, *active)) for active in ((0,), (1,), (0, 1))
    ]
    same = op.same
    real_only = diff and not op.complex  # complex inputs refused (one test per call)
    is_complex = rec.is_complex

    def binary(x1, x2, /):
        # The common cases first: tensor (op) tensor, tensor (op) Python scalar.
        if type(x1) is cls:
            a = x1.data
            if type(x2) is cls:
                if x1 is x2 and same is not None and x1._rg:
                    return getattr(xp, same)(x1)
                b = x2.data
                r = (x1._rg and rule1 is not None) + 2 * (x2._rg and rule2 is not None)
            elif isinstance(x2, Tensor):
                return rec.mixed(op, (x1, x2), _NO_KWARGS, x2)
            else:
                if type(x2) not in _PYTHON_SCALARS:  # not the common x * 2.0
                    out = _operand(rec, op, binary, x1, x2, x2)
                    if out is not None:
                        return out
                b = x2
                r = x1._rg and rule1 is not None
        elif type(x2) is cls:
            if isinstance(x1, Tensor):
                return rec.mixed(op, (x1, x2), _NO_KWARGS, x1)
            if type(x1) not in _PYTHON_SCALARS:
                out = _operand(rec, op, binary, x1, x2, x1)
                if out is not None:
                    return out
            a = x1
            b = x2.data
            r = 2 * (x2._rg and rule2 is not None)
        else:
            return _no_tensor(rec, op, raw, binary, x1, x2)
        try:
            out = raw(a, b)
        except Exception as exc:
            add_op_name(exc, name)
            raise
        if array_type is not None and type(out) is not array_type:
            out = asarray(out)
        t = _new(cls)
        t.data = out
        t._grad = None  # the slot under Tensor.grad (the property warns on reads)
        t._base = None
        t._index = 0
        t._version = None
        if r and diff and (not grad_off[0] or mode.enabled):
            if real_only and is_complex(out.dtype):
                raise real_only_error(name, out.dtype)
            node = _new(Node)
            node.seq = next_seq()
            node.op = op
            node.kwargs = _NO_KWARGS
            node.ans = out if saves_ans else None
            keep1, keep2 = need[r]
            versions = ()
            if r & 1:
                n = x1._node
                e1 = (n, x1._index if n is not None else x1, a.shape, a.dtype)
            else:
                e1 = None
            if r & 2:
                n = x2._node
                e2 = (n, x2._index if n is not None else x2, b.shape, b.dtype)
            else:
                e2 = None
            if type(x1) is cls:
                if keep1:
                    c = x1._version
                    if c is None:
                        c = x1._version = [0]
                    elif len(c) > 1:
                        c[1] = True
                    versions = ((c, c[0]),)
                else:
                    a = None
            if type(x2) is cls:
                if keep2:
                    c = x2._version
                    if c is None:
                        c = x2._version = [0]
                    elif len(c) > 1:
                        c[1] = True
                    versions += ((c, c[0]),)
                else:
                    b = None
            node.edges = (e1, e2)
            node.args = (a, b)
            node.versions = versions
            if anomaly[0]:
                check_forward(B, node, (out,), (rec.raw(x1, name), rec.raw(x2, name)))
            t._node = node
            t._rg = True
        else:
            t._node = None
            t._rg = False
        return t

    return binary


def _creation(rec, op, raw):
    name = op.name
    vmapping = _vmapping

    def creation(*args, requires_grad=False, **kwargs):
        if vmapping[0] and holds(args, kwargs):  # inside vmap: zeros_like of a batch
            return _batched_call(op, creation, args, dict(kwargs, requires_grad=requires_grad))
        if tracing.active[0] is not None:  # inside jit: made by (recorded in) the trace
            traced = tracing.creation(rec, name)
            if traced is not None:
                return traced(*args, requires_grad=requires_grad, **kwargs)
        args = [rec.raw(a, name) for a in args]
        try:
            out = raw(*args, **kwargs)
        except Exception as exc:
            add_op_name(exc, name)
            raise
        t = rec.wrap_out(out)
        if requires_grad is not False:
            checks.flag(name, "requires_grad", requires_grad)
        if requires_grad:
            rec.backend.check_differentiable(t.data.dtype, name)
            t._rg = True
        return t

    return creation


def _generic(rec, op, raw):
    cls, name = rec.cls, op.name
    kind, view, residuals = op.kind, op.view, op.residuals is not None
    lean = op.lean(rec.backend) if op.lean is not None else raw
    strip = residuals and op.lean is None  # the forward's residuals, unused here
    # extension ops (nn) are ours and real-valued: a complex tensor is refused, grad or not
    # (relu's max with 0 would be NumPy's lexicographic one)
    refuse_complex = not op.complex and op.chapter.startswith("nn")
    is_complex = rec.is_complex
    vmapping = _vmapping
    foreign, check_native = rec.foreign, rec.check_native

    def generic(*args, **kwargs):
        if vmapping[0] and holds(args, kwargs):  # inside vmap: the op's batching rule
            return _batched_call(op, generic, args, kwargs)
        if tracing.active[0] is not None:  # inside jit: traced arrays go to the trace
            out = tracing.redirect(op, args, kwargs, rec)
            if out is not None:
                return out
        raws = list(args)
        rg = False
        for i, a in enumerate(args):
            if isinstance(a, Tensor):
                if type(a) is not cls:
                    return rec.mixed(op, args, kwargs, a)
                raws[i] = d = a.data
                rg = rg or a._rg
                if refuse_complex and is_complex(d.dtype):
                    raise real_only_error(name, d.dtype, grad=False)
            elif type(a) in (list, tuple):
                check_native(name, a)
            elif a is not None and type(a) not in _PYTHON_SCALARS and foreign(a):
                raise rec.foreign_error(name, a)
        if kwargs:
            for k, v in kwargs.items():
                # most keywords are numbers, None or tuples of ints: no call for those
                if v is not None and type(v) not in _PYTHON_SCALARS and not isinstance(v, Tensor):
                    check_native(name, (v,))
                if isinstance(v, Tensor):
                    if v._rg and kind != CONST and mode.enabled:
                        raise TypeError(f"{name}: pass '{k}' positionally to differentiate it")
                    kwargs[k] = rec.raw(v, name)
        if rg and kind == MISSING and mode.enabled:
            raise NotImplementedError(
                f"{name}: no VJP rule is registered for this function yet, so it can't "
                "be called on a tensor that requires grad (call it on x.detach(), or "
                "under autodiff.no_grad(), if no gradient is needed)"
            )
        record = rg and kind != CONST and mode.enabled
        try:
            out = raw(*raws, **kwargs) if record else lean(*raws, **kwargs)
        except Exception as exc:
            add_op_name(exc, name)
            raise
        if record:
            res = None
            if residuals:
                out, res = out
            return rec.record(op, out, args, raws, kwargs, res)
        if strip:
            out = out[0]
        t = rec.wrap_out(out)
        if view and isinstance(args[0], Tensor):
            if isinstance(t, Tensor):
                _share_version(args[0], t, inplace.Call(name, raws[1:], kwargs))
            else:  # unstack: a view per output
                for i, ti in enumerate(t):
                    _share_version(args[0], ti, inplace.Call(name, raws[1:], kwargs, i))
        return t

    return generic


def _is_basic(key):
    parts = key if isinstance(key, tuple) else (key,)
    return all(k is None or k is Ellipsis or isinstance(k, (int, slice)) for k in parts)


def _getitem_method(rec, getitem):
    def __getitem__(self, key, /):
        rkey = rec.raw_key(key)
        out = getitem(self, key=rkey)
        if _is_basic(rkey):  # a view: writes through either are seen by both
            _share_version(self, out, inplace.Index(rkey))
        return out

    return __getitem__


def _reflected(fn):
    def reflected(self, other, /):
        return fn(other, self)

    return reflected


def _inplace_method(dunder, name):
    def method(self, other, /):
        return inplace.inplace(self, name, other)

    method.__name__ = dunder
    return method
