"""``Autodiff(xp)``: a namespace with the functions of ``xp`` whose arrays record a graph.

Built from the registry: every op becomes a function that unwraps Tensors,
calls the backend, wraps the result and, when an input requires grad, records
a :class:`~autodiff.graph.Node`. Elementwise ops get a specialized wrapper with
no argument loop (they dominate small-array code); everything else goes
through one generic wrapper.
"""

from __future__ import annotations

import types

from . import _standard, graph
from .graph import Meta, MultiNode, Node, Outer, grad_off, mode, next_seq, run_backward
from .registry import CONST, MISSING, Op
from .registry import get as _registry_get
from .registry import ops as _registry_ops
from .tensor import BINARY_OPERATORS, REFLECTED_OPERATORS, UNARY_OPERATORS, Tensor

__all__ = ["Autodiff"]

_new = object.__new__
_NO_KWARGS: dict = {}
_NONE1 = (None,)
_MODIFIED = [1]  # a version counter that never matches: marks a saved output as overwritten


def _saved(op: Op, *active):
    """Positions whose values the rules of the ``active`` arguments read.

    ``op.saves`` is None (every argument), a tuple of positions, or one tuple per
    argument (what that argument's rule reads, e.g. multiply's ``((1,), (0,))``).
    """
    saves = op.saves
    if saves is None:
        return range(1 << 16)
    if saves and isinstance(saves[0], tuple):
        return {p for i in active if i < len(saves) for p in saves[i]}
    return saves


_cache: dict = {}


def Autodiff(xp) -> types.ModuleType:
    """The differentiable namespace of the Array API namespace ``xp`` (cached per backend)."""
    import backends

    if any(ns is xp for ns in _cache.values()):  # already differentiable
        return xp
    B = backends.resolve(xp)
    ns = _cache.get(B.key)
    if ns is None:
        ns = _cache[B.key] = _Ops(B).namespace
    return ns


def _add_op_name(exc: BaseException, name: str) -> None:
    """Prefix the backend's error message with the op's name (same error type)."""
    msg = exc.args[0] if exc.args else None
    if isinstance(msg, str):
        if not msg.startswith(f"{name}:"):
            exc.args = (f"{name}: {msg}",) + exc.args[1:]
    elif hasattr(exc, "_msg"):  # numpy's AxisError formats its message from attributes
        if not str(exc).startswith(f"{name}:"):
            exc._msg = name if exc._msg is None else f"{name}: {exc._msg}"
    elif not exc.args:
        exc.args = (f"{name}: failed",)


class _Ops:
    """Everything one wrapped namespace needs: its Tensor class, a function per
    registered op, and the glue the backward pass uses to call rules."""

    def __init__(self, B):
        self._B = B
        self._real = {}  # dtype -> whether it is real floating (differentiable)
        self.cls = cls = type("Tensor", (Tensor,), {"__slots__": (), "__module__": "autodiff"})
        cls._ops = self
        if B.array_type is not None and hasattr(B.array_type, "__array__"):
            cls.__array__ = lambda self, dtype=None, copy=None: self.data.__array__(dtype)
        self.linalg = types.SimpleNamespace()
        self.fft = types.SimpleNamespace()
        self.nn = types.SimpleNamespace()  # extension ops (autodiff.nn.functional)
        registry = _registry_ops()
        for op in registry.values():
            fn = self._make(op)
            if fn is None:
                continue
            home, _, name = op.name.rpartition(".")
            setattr(getattr(self, home) if home else self, name, fn)
        for dunder, name in {**BINARY_OPERATORS, **UNARY_OPERATORS}.items():
            if hasattr(self, name):
                setattr(cls, dunder, getattr(self, name))
        for dunder, name in REFLECTED_OPERATORS.items():
            if hasattr(self, name):
                setattr(cls, dunder, _reflected(getattr(self, name)))
        cls.__getitem__ = _getitem_method(self, self.__getitem__)
        self.namespace = self._public()
        cls._ns = self.namespace
        self.raw_glue = _Glue(self, B, create=False)
        self.tensor_glue = _Glue(self, self, create=True)
        for name in dir(B):  # dtypes and constants, for rules run under create_graph
            if not name.startswith("_") and not hasattr(self, name):
                value = getattr(B, name)
                if not callable(value) or isinstance(value, type):
                    setattr(self, name, value)

    # -- building --------------------------------------------------------------
    def _raw(self, op: Op):
        B = self._B
        if op.impl is not None:
            return op.impl(B)
        obj = B
        for part in op.name.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                return None
        return obj

    def _make(self, op: Op):
        raw = self._raw(op)
        if raw is None:
            return None
        style = op.style
        if style == "unary":
            fn = self._unary(op, raw)
        elif style == "binary":
            fn = self._binary(op, raw)
        elif style == "creation":
            fn = self._creation(op, raw)
        else:
            fn = self._generic(op, raw)
        fn.__name__ = op.name.rpartition(".")[2]
        fn.__qualname__ = fn.__name__
        fn.__doc__ = op.doc or getattr(raw, "__doc__", None)
        fn.ops = self
        if op.public is not None:
            public = op.public(fn)
            public.__name__ = fn.__name__
            public.__doc__ = fn.__doc__
            public._op_function = fn
            return public
        return fn

    def _public(self):
        """The user's namespace: exactly the standard's names the backend has."""
        B = self._B
        ns = types.ModuleType(f"autodiff.{B.key}")
        ns.__doc__ = f"Differentiable Array API namespace over {B.key}."
        ns.__array_api_version__ = B.__array_api_version__
        ns.__array_namespace_info__ = B.__array_namespace_info__
        for name in _standard.MAIN:
            if hasattr(B, name):
                value = getattr(self, name, None)
                if value is None:
                    value = getattr(B, name)
                setattr(ns, name, value)
        for sub, names in (("linalg", _standard.LINALG), ("fft", _standard.FFT)):
            if hasattr(B, sub):
                mod = types.ModuleType(f"autodiff.{B.key}.{sub}")
                src = getattr(self, sub)
                for name in names:
                    if hasattr(getattr(B, sub), name):
                        setattr(mod, name, getattr(src, name))
                setattr(ns, sub, mod)
        return ns

    # -- wrapping --------------------------------------------------------------
    def _wrap(self, data):
        t = _new(self.cls)
        t.data = data
        t._node = None
        t._index = 0
        t._rg = False
        t.grad = None
        t._version = None
        t._base = None
        return t

    def _wrap_out(self, out):
        B = self._B
        if B.is_array(out):
            return self._wrap(out)
        if isinstance(out, B.scalar_types):
            return self._wrap(B.asarray(out))
        if isinstance(out, (tuple, list)):
            items = [self._wrap_out(o) for o in out]
            if hasattr(out, "_fields"):
                return type(out)(*items)
            return type(out)(items)
        return out

    def _unwrap(self, a, name):
        if isinstance(a, Tensor):
            if type(a) is not self.cls:
                raise self._mix_error(name, a)
            return a.data
        return a

    def _mix_error(self, name, a):
        return TypeError(
            f"{name}: tensors of two different namespaces in one call "
            f"({type(a)._ns.__name__} and {self.namespace.__name__}); move one with "
            "xp.asarray(...) of the other namespace"
        )

    def _unary(self, op, raw):
        cls, name = self.cls, op.name
        array_type, asarray = self._B.array_type, self._B.asarray
        generic = self._generic(op, raw)
        saves_x = 0 in _saved(op, 0)
        saves_ans = op.saves_ans
        diff = op.kind != CONST

        def unary(x, /):
            if type(x) is not cls:
                return generic(x)
            d = x.data
            try:
                out = raw(d)
            except Exception as exc:
                _add_op_name(exc, name)
                raise
            if array_type is not None and type(out) is not array_type:
                out = asarray(out)
            t = _new(cls)
            t.data = out
            t.grad = None
            t._base = None
            t._index = 0
            t._version = None
            if diff and x._rg and (not grad_off[0] or mode.enabled):
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
                    node.args = (d,)
                    node.versions = ((c, c[0]),)
                else:
                    node.args = _NONE1
                    node.versions = ()
                node.ans = out if saves_ans else None
                t._node = node
                t._rg = True
            else:
                t._node = None
                t._rg = False
            return t

        return unary

    def _binary(self, op, raw):
        cls, ops, name = self.cls, self, op.name
        array_type, asarray = self._B.array_type, self._B.asarray
        diff = op.kind != CONST
        rule1, rule2 = op.vjp or (None, None)
        saves_ans = op.saves_ans
        # need[r1 + 2*r2] = (keep x1's value, keep x2's value) when the gradient of
        # x1 (r1) and/or x2 (r2) is needed.
        need = [None] + [
            (0 in _saved(op, *active), 1 in _saved(op, *active)) for active in ((0,), (1,), (0, 1))
        ]

        same = op.same

        def binary(x1, x2, /):
            # The common cases first: tensor (op) tensor, tensor (op) Python scalar.
            if type(x1) is cls:
                a = x1.data
                if type(x2) is cls:
                    if x1 is x2 and same is not None and x1._rg:
                        return getattr(ops, same)(x1)
                    b = x2.data
                    r = (x1._rg and rule1 is not None) + 2 * (x2._rg and rule2 is not None)
                elif isinstance(x2, Tensor):
                    raise ops._mix_error(name, x2)
                else:
                    b = x2
                    r = x1._rg and rule1 is not None
            elif type(x2) is cls:
                if isinstance(x1, Tensor):
                    raise ops._mix_error(name, x1)
                a = x1
                b = x2.data
                r = 2 * (x2._rg and rule2 is not None)
            else:
                return ops._wrap_out(raw(x1, x2))
            try:
                out = raw(a, b)
            except Exception as exc:
                _add_op_name(exc, name)
                raise
            if array_type is not None and type(out) is not array_type:
                out = asarray(out)
            t = _new(cls)
            t.data = out
            t.grad = None
            t._base = None
            t._index = 0
            t._version = None
            if r and diff and (not grad_off[0] or mode.enabled):
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
                        versions = ((c, c[0]),)
                    else:
                        a = None
                if type(x2) is cls:
                    if keep2:
                        c = x2._version
                        if c is None:
                            c = x2._version = [0]
                        versions += ((c, c[0]),)
                    else:
                        b = None
                node.edges = (e1, e2)
                node.args = (a, b)
                node.versions = versions
                t._node = node
                t._rg = True
            else:
                t._node = None
                t._rg = False
            return t

        return binary

    def _creation(self, op, raw):
        ops, name, unwrap = self, op.name, self._unwrap

        def creation(*args, requires_grad=False, **kwargs):
            args = [unwrap(a, name) for a in args]
            try:
                out = raw(*args, **kwargs)
            except Exception as exc:
                _add_op_name(exc, name)
                raise
            t = ops._wrap_out(out)
            if requires_grad:
                ops._B.check_differentiable(t.data.dtype, name)
                t._rg = True
            return t

        return creation

    def _generic(self, op, raw):
        ops, cls, name = self, self.cls, op.name
        kind, view, residuals = op.kind, op.view, op.residuals
        lean = op.lean(self._B) if op.lean is not None else raw
        strip = residuals and op.lean is None  # the forward's residuals, unused here

        def generic(*args, **kwargs):
            raws = list(args)
            rg = False
            for i, a in enumerate(args):
                if isinstance(a, Tensor):
                    if type(a) is not cls:
                        raise ops._mix_error(name, a)
                    raws[i] = a.data
                    rg = rg or a._rg
            if kwargs:
                for k, v in kwargs.items():
                    if isinstance(v, Tensor):
                        if v._rg and kind != CONST and mode.enabled:
                            raise TypeError(f"{name}: pass '{k}' positionally to differentiate it")
                        kwargs[k] = ops._unwrap(v, name)
            if rg and kind == MISSING and mode.enabled:
                raise ops._missing(op)
            record = rg and kind != CONST and mode.enabled
            try:
                out = raw(*raws, **kwargs) if record else lean(*raws, **kwargs)
            except Exception as exc:
                _add_op_name(exc, name)
                raise
            if record:
                res = None
                if residuals:
                    out, res = out
                return ops._record(op, out, args, raws, kwargs, res)
            if strip:
                out = out[0]
            t = ops._wrap_out(out)
            if view and isinstance(t, Tensor) and isinstance(args[0], Tensor):
                _share_version(args[0], t)
            return t

        return generic

    def _missing(self, op):
        return NotImplementedError(
            f"{op.name}: no VJP rule is registered for this function yet, so it can't "
            "be called on a tensor that requires grad (call it on x.detach(), or "
            "under autodiff.no_grad(), if no gradient is needed)"
        )

    def _record(self, op: Op, out, args, raws, kwargs, residuals=None):
        """Wrap ``out`` as the output(s) of a new node for this call."""
        B = self._B
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
                    return self._wrap_out(out)
        dtype = outs[0].dtype
        real = self._real.get(dtype)
        if real is None:  # isdtype is slow (microseconds): once per dtype
            real = self._real[dtype] = bool(B.isdtype(dtype, "real floating"))
        if not real:
            if B.isdtype(dtype, "complex floating"):
                raise NotImplementedError(
                    f"{op.name}: the result is complex ({dtype}); gradients through "
                    "complex values are not supported yet"
                )
            return self._wrap_out(out)  # integer or bool results carry no gradient
        if not multi:
            return self._record_one(op, outs[0], args, raws, kwargs, residuals)
        saved, edges, versions = self._inputs(op, args, raws)
        outs_meta = tuple((o.shape, o.dtype) for o in outs)
        node = MultiNode(op, saved, kwargs, None, edges, versions, outs_meta)
        if op.saves_ans:
            node.ans = tuple(outs)
        elif residuals is not None:
            node.ans = residuals
        results = []
        for i, o in enumerate(outs):
            t = self._wrap(o)
            t._node = node
            t._index = i
            t._rg = True
            if op.view and isinstance(args[0], Tensor):
                _share_version(args[0], t)
            results.append(t)
        if hasattr(out, "_fields"):
            return type(out)(*results)
        return type(out)(results)

    def _record_one(self, op, out, args, raws, kwargs, residuals):
        """``_record`` of one floating-point array (the common case)."""
        saved, edges, versions = self._inputs(op, args, raws)
        node = Node(op, saved, kwargs, None, edges, versions)
        if op.saves_ans:
            node.ans = out
        elif residuals is not None:
            node.ans = residuals
        t = self._wrap(out)
        t._node = node
        t._rg = True
        if op.view and isinstance(args[0], Tensor):
            _share_version(args[0], t)
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
            if not isinstance(a, Tensor):  # of this namespace: generic() checked
                continue
            tensors.append(i)
            if a._rg and (joint or (i < nrules and rules[i] is not None)):
                n = a._node
                d = a.data
                edges[i] = (n, a._index if n is not None else a, d.shape, d.dtype)
        if op.per_arg_saves:  # what is kept depends on which gradients are wanted
            saves = _saved(op, *(j for j, e in enumerate(edges) if e is not None))
        device_of = self._B.device_of
        saved = list(raws)
        versions = []
        for i in tensors:
            a = args[i]
            if saves is None or i in saves:
                c = a._version
                if c is None:
                    c = a._version = [0]
                versions.append((c, c[0]))
            else:  # what the rule may read of an argument whose values it doesn't need
                d = a.data
                saved[i] = Meta(d.shape, d.dtype, device_of(d))
        return tuple(saved), tuple(edges), tuple(versions)

    # -- in-place --------------------------------------------------------------
    def _check_inplace(self, t, what):
        if t._node is None and t._rg:
            raise RuntimeError(
                f"{what}: a leaf tensor that requires grad can't be changed in place "
                "while grad is recorded; do it under autodiff.no_grad(), or on a copy"
            )
        if t._base is not None:
            raise RuntimeError(
                f"{what}: in-place change of a view of a tensor in a recorded graph; "
                "write into the tensor it was taken from instead"
            )

    def _check_view(self, t, what):
        if t._base is not None and t._base._rg and mode.enabled:
            self._check_inplace(t, what)

    def _bump(self, t):
        """Record a write into ``t``'s buffer: nodes that saved it (as an input, by
        version counter; as their output, found through ``t`` and the tensors it
        is a view of) will refuse to run."""
        c = t._version
        if c is not None:
            c[0] += 1
        while t is not None:
            node = t._node
            if node is not None and node.ans is not None:
                node.versions = node.versions + ((_MODIFIED, 0),)
            t = t._base

    def _setitem(self, t, key, value):
        rkey = _unwrap_key(self, key)
        vt = isinstance(value, Tensor)
        v = self._unwrap(value, "__setitem__")
        if mode.enabled and (t._rg or (vt and value._rg)):
            self._check_inplace(t, "__setitem__")
            # Copy on write: buffers saved by earlier nodes keep their values.
            new = self._B.asarray(t.data, copy=True)
            try:
                new[rkey] = v
            except Exception as exc:
                _add_op_name(exc, "__setitem__")
                raise
            res = self._record(
                _registry_get("__setitem__"), new, (t, value), (t.data, v), {"key": rkey}
            )
            _rebind(t, res)
            return
        self._check_view(t, "__setitem__")
        try:
            t.data[rkey] = v
        except Exception as exc:
            _add_op_name(exc, "__setitem__")
            raise
        self._bump(t)

    def _inplace(self, t, name, other):
        ot = isinstance(other, Tensor)
        if mode.enabled and (t._rg or (ot and other._rg)):
            self._check_inplace(t, f"in-place {name}")
            res = getattr(self, name)(t, other)
            if res.shape != t.shape or res.dtype != t.dtype:
                raise TypeError(
                    f"in-place {name}: the result ({res.dtype}, shape {res.shape}) "
                    f"doesn't fit the tensor ({t.dtype}, shape {t.shape})"
                )
            _rebind(t, res)
            return t
        self._check_view(t, f"in-place {name}")
        o = self._unwrap(other, name)
        dunder = "__i" + {v: k for k, v in BINARY_OPERATORS.items()}[name][2:]
        try:
            out = getattr(t.data, dunder)(o)
        except Exception as exc:
            _add_op_name(exc, f"in-place {name}")
            raise
        if out is NotImplemented:
            raise TypeError(f"in-place {name}: unsupported operand {type(other).__name__}")
        t.data = out
        self._bump(t)
        return t

    # -- backward --------------------------------------------------------------
    def _as_raw(self, g, like, what):
        B = self._B
        if isinstance(g, Tensor):
            g = self._unwrap(g, what)
        elif not B.is_array(g):
            g = B.asarray(g, dtype=like.dtype, device=B.device_of(like))
        if g.shape != like.shape:
            raise ValueError(f"{what}: grad has shape {g.shape}, the tensor has {like.shape}")
        return g

    def _backward(self, t, grad, retain_graph, create_graph):
        if not t._rg:
            raise RuntimeError(
                "backward: the tensor does not require grad (no input of it requires "
                "grad, or it was computed under no_grad)"
            )
        if grad is None:
            if self._B.size_of(t.data) != 1:
                raise RuntimeError(
                    f"backward: grad can be implied only for a scalar, this tensor has "
                    f"shape {t.shape}; pass grad= of that shape"
                )
            g = self._B.ones_like(t.data)
        else:
            g = self._as_raw(grad, t.data, "backward")
        if create_graph:
            glue = self.tensor_glue
        else:  # per call: it tracks the gradient buffers this backward hands to leaves
            glue = _Glue(self, self._B, create=False)
            glue.handed[id(g)] = g  # the caller's array: never a leaf's grad as it is
        g = glue.lift(g)
        if t._node is None:
            glue.accumulate_leaf(t, g)
            return
        if create_graph:  # as in torch, the recorded backward keeps the graph it uses
            with graph.enable_grad():
                run_backward([(t._node, t._index)], [g], glue, True, True)
        else:
            run_backward([(t._node, t._index)], [g], glue, retain_graph, False)


class _Glue:
    """Adapts the backward pass to raw arrays (``create=False``) or Tensors."""

    def __init__(self, ops: _Ops, xp, create: bool):
        self.ops = ops
        self.xp = xp
        self.create = create
        # id -> array (kept alive so ids stay unique): arrays given to leaves as their
        # grad, and those of them this backward allocated (safe to add into in place).
        self.handed = {}
        self.mine = {}
        self.deferred = {}  # id(leaf) -> (leaf, [Outer, ...]): formed by flush()

    def defer(self, leaf, g):
        """Keep a leaf's gradient given as factors (an Outer) for flush()."""
        entry = self.deferred.get(id(leaf))
        if entry is None:
            entry = self.deferred[id(leaf)] = (leaf, [])
        entry[1].append(g)

    def flush(self):
        """Accumulate the deferred gradients: one matmul per leaf over all its factors."""
        if self.deferred:
            # Leaves whose factors start alike (a weight and its bias) one after the
            # other, each list let go once used: a step's factors are freed as soon as
            # every product over them is formed.
            entries = sorted(self.deferred.values(), key=lambda e: id(e[1][0].a))
            self.deferred = {}
            stacked = {}
            while entries:
                leaf, outers = entries.pop()
                self.accumulate_leaf(leaf, Outer.total(self.xp, outers, stacked))

    def lift(self, g):
        return self.ops._wrap(g) if self.create else g

    def add(self, a, b):
        return a + b

    def fit(self, g, shape, dtype):
        """Undo broadcasting (sum back to ``shape``) and cast to the input's dtype."""
        if g.shape != shape:
            xp = self.xp
            lead = g.ndim - len(shape)
            if lead > 0:
                g = xp.sum(g, axis=tuple(range(lead)))
            if g.ndim == len(shape):
                axes = tuple(i for i, (a, b) in enumerate(zip(g.shape, shape)) if b == 1 and a != 1)
                if axes:
                    g = xp.sum(g, axis=axes, keepdims=True)
            if g.shape != shape:
                g = xp.broadcast_to(g, shape)
        if g.dtype != dtype:
            g = self.xp.astype(g, dtype)
        return g

    def accumulate_leaf(self, leaf, g):
        ops = self.ops
        if self.create:
            leaf.grad = g if leaf.grad is None else ops.add(leaf.grad, g)
        elif leaf.grad is None:
            # One gradient array can reach two leaves (x + y): each gets its own buffer.
            g = ops._B.asarray(g, copy=True) if id(g) in self.handed else ops._B.own(g)
            # Not "mine": a rule's result may still be pending for another node, or be a
            # factor of a deferred Outer; only a sum made below is added into in place.
            self.handed[id(g)] = g
            leaf.grad = ops._wrap(g)
        else:
            d = leaf.grad.data
            if id(d) in self.mine and d.shape == g.shape and d.dtype == g.dtype:
                d += g  # a buffer of this backward: accumulate without a new array
                leaf.grad._ops._bump(leaf.grad)
            else:
                d = d + g
                if not self.ops._B.is_array(d):  # 0-d numpy sums are scalars
                    d = self.ops._B.asarray(d)
                self.handed[id(d)] = self.mine[id(d)] = d
                leaf.grad = ops._wrap(d)

    def prepare(self, node, gs):
        """(xp, g, ans, args, kwargs) for the node's rule under create_graph: Tensors
        linked into the graph (a plain backward hands the rule its saved tuple as is)."""
        if node.outs is not None:
            gs = self.fill(node, gs)
        ops = self.ops
        args = list(node.args)
        edges = node.edges
        ans = node.ans
        if node.op.residuals:
            ans = None  # the rule recomputes them in the graph, for higher derivatives
        wrap = ops._wrap
        for i, a in enumerate(args):
            e = edges[i]
            if a is None:  # not saved (nodes made outside _record)
                if e is not None:
                    g0 = gs if node.outs is None else next(x for x in gs if x is not None)
                    args[i] = Meta(e[2], e[3], ops._B.device_of(g0.data))
            elif e is not None and not isinstance(a, Meta):
                args[i] = e[1] if e[0] is None else _with_node(wrap(a), e[0], e[1])
            elif ops._B.is_array(a):
                args[i] = wrap(a)
        if ans is not None:
            if node.outs is None:
                ans = _with_node(wrap(ans), node, 0)
            else:
                ans = tuple(_with_node(wrap(a), node, i) for i, a in enumerate(ans))
        kwargs = {k: wrap(v) if ops._B.is_array(v) else v for k, v in node.kwargs.items()}
        return self.xp, gs, ans, args, kwargs

    def fill(self, node, gs):
        """Zeros for the outputs of a multi-output node that got no gradient."""
        xp = self.xp
        g0 = next(g for g in gs if g is not None)
        device = self.ops._B.device_of(g0.data if self.create else g0)
        return tuple(
            xp.zeros(shape, dtype=dtype, device=device) if g is None else g
            for g, (shape, dtype) in zip(gs, node.outs)
        )


def _with_node(t, node, index):
    t._node = node
    t._index = index
    t._rg = True
    return t


def _rebind(t, res):
    """Move tensor ``t`` onto the value and node of ``res`` (in-place ops)."""
    t.data = res.data
    t._node = res._node
    t._index = res._index
    t._rg = res._rg
    t._version = res._version
    t._base = None


def _share_version(src, view):
    """``view`` may alias ``src``: one version counter, so writes through either
    are seen by nodes that saved the other."""
    if src._version is None:
        src._version = [0]
    view._version = src._version
    view._base = src


def _is_basic(key):
    parts = key if isinstance(key, tuple) else (key,)
    return all(k is None or k is Ellipsis or isinstance(k, (int, slice)) for k in parts)


def _getitem_method(ops, getitem):
    def __getitem__(self, key, /):
        rkey = _unwrap_key(ops, key)
        out = getitem(self, key=rkey)
        if _is_basic(rkey):
            _share_version(self, out)
        return out

    return __getitem__


def _reflected(fn):
    def reflected(self, other, /):
        return fn(other, self)

    return reflected


def _unwrap_key(ops, key):
    if isinstance(key, tuple):
        return tuple(ops._unwrap(k, "__getitem__") for k in key)
    return ops._unwrap(key, "__getitem__")
