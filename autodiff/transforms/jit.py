"""``jit(f)``: record the backend calls of one run of ``f``, replay only those calls.

Design (the recording runs through the engine unchanged):

- **What is recorded.** During a trace, ``f`` sees *trace arrays* (:class:`TraceArray`)
  instead of the backend's arrays, and its Tensors are Tensors of a *trace namespace*:
  ``Autodiff`` of a trace backend whose every function (the standard's, ``linalg``,
  ``fft``, and this project's kernels, each the eager backend's own) unwraps its
  arguments, calls the real function, wraps the result and appends one instruction to
  the program. The engine, the rules and the optimizers reach the backend only through
  that namespace (``B``/``xp``) and through Python operators on raw arrays: the trace
  array's operators, indexing, ``__setitem__``, in-place operators and other attributes
  record the same way. So forward, backward (``Pass.run`` calls the rules with
  ``xp = B``) and any transform inside ``f`` become one straight-line program of real
  backend calls; no Tensor, Node or rule runs on replay. A namespace made outside ``f``
  (``xp = Autodiff(np)``) sends its calls on traced values to the trace namespace, and
  its creation functions are recorded (``engine/tracing.py``).
- **Slots.** Every array is a slot: the inputs (the array leaves of the arguments, a
  Tensor's ``data``) first, then each call's outputs. An instruction is (function,
  arguments with slots in place of arrays, output slots). Calls whose outputs nothing
  reads are dropped; the rest is compiled to one Python function, a line per call.
  Arrays that are not traced (a NumPy constant ``f`` closes over) are kept by
  reference, so the replay reads their current values.
- **Writes.** In-place calls (``x[k] = v``, ``x += y``, the ``*_`` kernels, ``out=``) run on the
  replay's own buffers; they are effects, never dropped. A write into state is refused
  (NotImplementedError), before it happens.
- **Signature** (the cache key): the tree structure of the non-static arguments, for
  each array leaf its type, shape, dtype, device and which leaves are the same object,
  for each other leaf (Python numbers, np.float64, strings, None) its value, the static
  arguments' values, and whether grad mode is on. A new signature traces again.
- **Never stale.** A host read of a traced value (``float``, ``int``, ``bool``,
  ``.item()``, ``np.asarray``) raises :class:`HostReadError` naming the user's line,
  as ``jax.jit`` does; NumPy's own functions on a traced array raise a TypeError naming
  it. The calls whose output shape depends on the data (boolean indexing,
  ``nonzero``, ``unique_*``, ``repeat``) check it on replay and trace again when it
  differs. Random draws (dropout's ``bernoulli``) are calls like any other, drawn
  afresh on each replay from the same generator as eager; a module's dropout seed
  (``nn.Dropout``, attention's, a GRU's: ``nn.init.next_seed``) is a draw each replay
  makes again from nn.init's generator; any other host draw during the trace (a module
  initialized inside ``f``) is refused (NotImplementedError).
- **State** (what ``f`` reads or writes but does not take: module parameters and
  buffers, their gradients, optimizer state, a Tensor it closes over) is read before
  each replay and written after it, as eager would change it (``jit_state.py``): a
  torch-style step, ``opt.zero_grad(); loss.backward(); opt.step()``, replays. A
  replay needs the state it was traced with, else ``f`` is traced again (each program
  kept): the modules ``f`` called in the same mode with the same parameters and
  settings, the optimizers with the same hyper-parameters and counters, each state
  array of the same type, shape and dtype, the same gradients present. A learning rate
  and an optimizer's step count (``_traced_numbers``) are Python numbers each replay
  reads anew (traced as numbers), so neither a schedule nor Adam's next step traces
  again (RAdam's count decides a branch: it does). A trace that makes state (an
  optimizer's first step) is not replayed: the next call traces with it. What ``f`` computes from a
  closed-over Tensor alone, before it meets a traced value, is computed once (as
  ``jax.jit`` bakes what ``f`` closes over); a module's parameters are lifted before
  its forward runs, so everything computed from them is replayed. Reading state to
  Python (``float(w[0])``) raises NotImplementedError. Tensors that require grad among
  the arguments (``jit(f)`` called inside ``grad``) and ``vmap``'s batches run ``f``
  eagerly.
- **Threads.** A trace records its own thread only (``tracing.active`` is per thread):
  other threads run eagerly meanwhile, and a jitted function may be called from
  several threads, each tracing or replaying on its own.
- **Buffers.** A replay on NumPy writes a ufunc's result into the buffer of an input
  that dies at the call where no other slot sees it (``_Program._reuse``), as
  hand-written NumPy reuses its temporaries; ``REUSE_BUFFERS = False`` turns it off.

Python side effects of ``f`` (print, appending to a list) happen when tracing only.
"""

from __future__ import annotations

import functools
import operator
import os
import sys
import types

from .. import pytree
from ..engine import registry, tracing
from ..engine.batching import Batched
from ..engine.grad_mode import mode
from ..engine.tensor import Tensor
from . import jit_state

__all__ = ["jit", "HostReadError", "TraceArray"]

_active = tracing.active  # the program being recorded, None outside a trace


def _data_dependent(fn) -> bool:
    """Whether the output shape of the backend function ``fn`` depends on the values
    (checked on replay): as its registered op says (``Op.data_dependent``)."""
    try:
        return registry.get(getattr(fn, "__name__", "")).data_dependent
    except KeyError:
        return False


class HostReadError(TypeError):
    """A traced value was read back to Python (``float``, ``bool``, ``.item()``...)."""


class _Stale(Exception):
    """A replayed data-dependent shape differs from the traced one: trace again."""


class _Slot:
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i


def _internal_dirs():
    import array_api_compat

    from .. import backends

    dirs = [os.path.dirname(os.path.dirname(__file__)), os.path.dirname(backends.__file__)]
    dirs.append(os.path.dirname(array_api_compat.__file__))
    for name in ("numpy", "array_api_strict"):
        mod = sys.modules.get(name)
        if mod is not None:
            dirs.append(os.path.dirname(mod.__file__))
    return tuple(d + os.sep for d in dirs)


def _user_line() -> str:
    """'file:line: source' of the innermost frame outside autodiff and the array libraries."""
    import linecache

    internal = _internal_dirs()
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith(internal):
            code = linecache.getline(path, frame.f_lineno).strip()
            return f"{path}, line {frame.f_lineno} ({code!r})"
        frame = frame.f_back
    return "<unknown>"


def _host_read(what):
    raise HostReadError(
        f"jit: {what} of a traced value at {_user_line()}; the replay would reuse the "
        "value of the first call. Compute on arrays instead (xp.where for a branch), or "
        "pass the value as a static argument (static_argnums / static_argnames)"
    )


# -- the trace array ----------------------------------------------------------------------
class TraceArray:
    """An array of the backend while ``jit`` records: its value and its slot."""

    __slots__ = ("value", "slot")
    _B = None  # the eager backend (set on each subclass)
    _tb = None  # the trace backend

    def __init__(self, value, slot):
        self.value = value
        self.slot = slot

    def __array_namespace__(self, api_version=None):
        return self._tb

    shape = property(lambda self: self.value.shape)
    dtype = property(lambda self: self.value.dtype)
    device = property(lambda self: self._B.device_of(self.value))
    ndim = property(lambda self: self.value.ndim)
    size = property(lambda self: self._B.size_of(self.value))
    T = property(lambda self: _emit(self._B, operator.attrgetter("T"), (self,), {}))
    mT = property(lambda self: _emit(self._B, operator.attrgetter("mT"), (self,), {}))

    def __len__(self):
        return self.value.shape[0]

    def __iter__(self):
        return (self[i] for i in range(self.value.shape[0]))

    def __repr__(self):
        return f"TraceArray(shape={self.shape}, dtype={self.dtype}, slot={self.slot})"

    def __getattr__(self, name):  # the library's other attributes (.real, .astype...)
        attr = getattr(self.value, name)
        if callable(attr):  # recorded as a method call on the slot

            def method(*args, **kwargs):
                return _emit(self._B, _MethodCall(name), (self, *args), kwargs)

            return method
        if self._B.is_array(attr):
            return _emit(self._B, operator.attrgetter(name), (self,), {})
        return attr

    def __getitem__(self, key):
        check = _has_bool_array(key)
        return _emit(self._B, operator.getitem, (self, key), {}, check=check)

    def __setitem__(self, key, value):
        _emit(self._B, operator.setitem, (self, key, value), {}, effect=True)

    def to_device(self, device, /, stream=None):
        import array_api_compat

        return _emit(self._B, array_api_compat.to_device, (self, device), {"stream": stream})

    # host reads: refused (see the module's docstring)
    def __bool__(self):
        _host_read("bool()")

    def __int__(self):
        _host_read("int()")

    def __index__(self):
        _host_read("an index (operator.index)")

    def __float__(self):
        _host_read("float()")

    def __complex__(self):
        _host_read("complex()")

    def item(self, *args):
        _host_read(".item()")

    def tolist(self):
        _host_read(".tolist()")

    def __array__(self, *args, **kwargs):
        _host_read("a conversion to a NumPy array")

    def __dlpack__(self, *args, **kwargs):
        _host_read("a DLPack export")

    # NumPy's own functions on a traced array: refused, as they would bake the arrays of
    # Tensors made outside the function (state) into the program unseen
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # a NumPy scalar meeting a traced NumPy array (np.float64(2) * x): the ufunc is
        # the backend's own function there, recorded as any other call
        if method == "__call__" and self._B.key == "numpy":
            return _emit(self._B, ufunc, inputs, kwargs, effect="out" in kwargs)
        _outside(f"numpy.{ufunc.__name__}")

    def __array_function__(self, func, types_, args, kwargs):
        _outside(f"numpy.{func.__name__}")


# A seed drawn on the host while tracing (tracing.seed): only ever handed to a draw
_Seed = type("TraceSeed", (TraceArray,), {"__slots__": ()})


def _outside(name):
    raise TypeError(
        f"jit: {name} called on a traced array at {_user_line()}; call the functions of "
        "the arguments' namespace (array_namespace(x)) or of autodiff.Autodiff(np)"
    )


class _MethodCall:
    """``a.name(*args, **kwargs)`` as a function of ``a`` (a recorded method call)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __call__(self, a, *args, **kwargs):
        return getattr(a, self.name)(*args, **kwargs)


def _operator(fn, reflected=False, inplace=False):
    def method(self, other):
        if isinstance(other, Tensor):  # a Tensor's own operator records it
            return NotImplemented
        args = (other, self) if reflected else (self, other)
        out = _emit(self._B, fn, args, {}, effect=inplace)
        if inplace:  # the name now holds the result (the same buffer on NumPy)
            self.value, self.slot = out.value, out.slot
            return self
        return out

    return method


def _bind_operators():
    names = ("add sub mul truediv floordiv mod pow matmul and or xor lshift rshift").split()
    for name in names:
        fn = getattr(operator, name + "_" if name in ("and", "or") else name)
        setattr(TraceArray, f"__{name}__", _operator(fn))
        setattr(TraceArray, f"__r{name}__", _operator(fn, reflected=True))
        ifn = getattr(operator, f"i{name}")
        setattr(TraceArray, f"__i{name}__", _operator(ifn, inplace=True))
    for name in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(TraceArray, f"__{name}__", _operator(getattr(operator, name)))
    for name in ("neg", "pos", "abs", "invert"):
        fn = getattr(operator, name)
        setattr(TraceArray, f"__{name}__", lambda self, fn=fn: _emit(self._B, fn, (self,), {}))
    TraceArray.__hash__ = object.__hash__


_bind_operators()


def _has_bool_array(key):
    parts = key if isinstance(key, tuple) else (key,)
    for k in parts:
        if isinstance(k, TraceArray) and k._B.isdtype(k.value.dtype, "bool"):
            return True
    return False


# -- recording ------------------------------------------------------------------------------
def _unwrap(x):
    """(raw value, spec): spec is a _Slot for a trace array, a tuple/list of specs for a
    sequence holding one, else None (a constant)."""
    if isinstance(x, TraceArray):
        if x.slot < 0:
            return x.value, None
        return x.value, _Slot(x.slot)
    if type(x) in (tuple, list):
        pairs = [_unwrap(v) for v in x]
        if any(s is not None for _, s in pairs):
            raws = type(x)(r for r, _ in pairs)
            return raws, type(x)(s if s is not None else r for r, s in pairs)
    elif isinstance(x, Tensor) and _active[0] is not None:
        _active[0].lift(x)  # state f reads, handed to a backend call as it is
        return _unwrap(x.data)
    return x, None


def _emit(B, fn, args, kwargs, effect=False, check=False):
    """Call ``fn`` on the raw values of ``args``; record the call; its outputs as trace
    arrays of the backend ``B``."""
    prog = _active[0]
    raws, tops, nested = list(args), [], []
    for p, a in enumerate(args):
        raws[p], spec = _unwrap(a)
        if type(spec) is _Slot:
            tops.append((p, spec.i))
        elif spec is not None:
            nested.append((p, spec))
    rkw, kslots = kwargs, []
    if kwargs:
        rkw = dict(kwargs)
        for k, v in kwargs.items():
            rkw[k], spec = _unwrap(v)
            if spec is not None:
                kslots.append((k, spec))
    if effect and prog is not None and raws and B.is_array(raws[0]):
        if not (tops and tops[0][0] == 0):  # the written array is not a slot
            raise NotImplementedError(
                "jit: an in-place write into an array that is neither an argument nor "
                "state (a NumPy array f closes over) is not supported yet"
            )
    out = fn(*raws, **rkw)
    if prog is None:  # building the trace namespace: nothing to record
        return _wrap(out, B, None)[0]
    wrapped, outs = _wrap(out, B, prog)
    if outs is None and type(out) in _NUMBERS and any(type(a) is _traced[B.key][1]._number
                                                      for a in args):  # fmt: skip
        outs = prog.new_slot()  # a Python number computed from state's: traced on
        wrapped = _traced[B.key][1]._number(out, outs)
    if outs is None and not effect:
        return out  # no array out (finfo, result_type...): depends on dtypes only
    shapes = None
    if check or _data_dependent(fn):
        shapes = _shapes(out)
    if type(outs) is int and B.into is not None and not (kwargs or nested):
        # what the replay may write into (see _Program._reuse)
        fn_out = None if effect else B.into(fn)
        inplace = effect and fn in _INPLACE and tops and tops[0][0] == 0
        # not complex: NumPy's complex loops round differently written in place (FMA)
        if (
            (fn_out is not None or inplace)
            and B.is_array(out)
            and out.ndim
            and not (B.isdtype(out.dtype, "complex floating"))
        ):
            # the layout too: a reduction adds in memory order (bits), and out= keeps it
            prog.fresh[outs] = (fn_out, out.shape, out.dtype, getattr(out, "strides", None))
    dynamic = {p for p, _ in tops} | {p for p, _ in nested}
    args_t = tuple(None if p in dynamic else r for p, r in enumerate(raws))
    prog.append(fn, args_t, tuple(tops), tuple(nested), rkw, tuple(kslots), outs, effect,
                shapes)  # fmt: skip
    return wrapped


_NUMBERS = (bool, int, float, complex)


def _shapes(out):
    if isinstance(out, (tuple, list)):
        return tuple(getattr(o, "shape", None) for o in out)
    return out.shape


def _wrap(out, B, prog):
    """(out with its arrays as trace arrays, output spec: a slot, a tuple of specs, None)."""
    cls = _traced[B.key][1]
    if B.is_array(out):
        slot = prog.new_slot() if prog is not None else -1
        return cls(out, slot), slot
    if B.scalar_types and isinstance(out, B.scalar_types):  # NumPy's 0-d results
        slot = prog.new_slot() if prog is not None else -1
        return cls._scalar(out, slot), slot
    if isinstance(out, (tuple, list)):
        pairs = [_wrap(o, B, prog) for o in out]
        if all(s is None for _, s in pairs):
            return out, None
        items = [w for w, _ in pairs]
        wrapped = type(out)(*items) if hasattr(out, "_fields") else type(out)(items)
        return wrapped, tuple(s for _, s in pairs)
    return out, None


class _Program:
    """The recorded calls of one trace: run them on new inputs."""

    def __init__(self):
        self.code = []
        self.host, self.unseen = None, False  # host generators' states (seed)
        # slot -> (its call's function that writes into out=, shape, dtype, strides), for the
        # slots such a call makes: each is a new buffer nothing else sees
        self.fresh = {}
        self.n = 0
        self.inputs = []
        self.outputs = None  # per output leaf: ("raw"|"tensor", slot, rec) or ("const", v)
        self.treedef = None
        self.writes = []  # state written back after each replay (jit_state)
        self.st = jit_state.State(self, lambda B: _trace_backend(B)[1:], TraceArray)

    def new_slot(self):
        self.n += 1
        return self.n - 1

    def lift(self, t):
        """Make the eager Tensor ``t`` that ``f`` reads or writes state (jit_state)."""
        self.st.lift(t)

    def module(self, m):
        self.st.module(m)

    def optimizer(self, opt):
        self.st.optimizer(opt)

    def seed(self, draw):
        """A seed ``draw()`` gives (tracing.seed), drawn again by each replay."""
        if _host_random_state() != self.host:
            self.unseen = True  # a draw before this one that no replay makes
        out = draw()
        slot = self.new_slot()
        self.append(draw, (), (), (), {}, (), slot, True, None)
        self.host = _host_random_state()
        return _Seed(out, slot)

    def append(self, fn, args, tops, nested, kwargs, kslots, outs, effect, shapes):
        self.code.append([fn, args, tops, nested, kwargs, kslots, outs, effect, shapes])

    def prune(self):
        """Drop the calls whose outputs nothing reads (the engine's bookkeeping)."""
        live = {slot for _, slot in self.st.writes if slot is not None}
        for kind, slot, _ in self.outputs:
            if kind != "const":
                live.add(slot)
        kept = []
        for ins in reversed(self.code):
            fn, args, tops, nested, kwargs, kslots, outs, effect, shapes = ins
            if not effect and not any(s in live for s in _slots_of(outs)):
                continue
            for _, s in tops:
                live.add(s)
            for _, spec in nested + kslots:
                live.update(_slots_of(spec))
            kept.append(ins)
        self.code = [tuple(i) for i in reversed(kept)]

    def compile(self):
        """The program as one Python function of the input arrays, returning the output
        slots' arrays: each call a line of straight-line code, no interpreter loop."""
        consts = {"_shapes": _shapes, "_Stale": _Stale}

        def const(v):
            name = f"c{len(consts)}"
            consts[name] = v
            return name

        def spec(x):
            if type(x) is _Slot:
                return f"s{x.i}"
            if type(x) in (tuple, list):
                inner = ", ".join(spec(v) for v in x)
                return f"({inner},)" if type(x) is tuple else f"[{inner}]"
            return const(x)

        kept = [slot for kind, slot, _ in self.outputs if kind != "const"]
        returned = set(kept) | {i for _, i in self.st.writes if i is not None}
        # each slot is let go after the call that reads it last (the memory of a step's
        # intermediates is reused within the step, as eager frees them)
        last = {}
        for k, (_, _, tops, nested, _, kslots, outs, _, _) in enumerate(self.code):
            for s_ in _slots_of(outs):
                last.setdefault(s_, k)
            for _, i in tops:
                last[i] = k
            for _, x in list(nested) + list(kslots):
                for i in _slots_of(x):
                    last[i] = k
        drop = {}
        for i, k in last.items():
            if i not in returned:
                drop.setdefault(k, []).append(i)
        reuse = self._reuse(last, returned) if REUSE_BUFFERS else {}
        lines = ["def replay(inputs):"]
        if self.inputs:
            lines.append(f"    {''.join(f's{i}, ' for i in self.inputs)}= inputs")
        for k, (fn, args, tops, nested, kwargs, kslots, outs, _, shapes) in enumerate(self.code):
            gone = "".join(f"s{i}, " for i in sorted(drop.get(k, ())))
            if gone:
                lines_after = [f"    del {gone.rstrip(', ')}"]
            else:
                lines_after = []
            parts = [const(a) for a in args]
            for p, i in tops:
                parts[p] = f"s{i}"
            for p, x in nested:
                parts[p] = spec(x)
            dynamic = dict(kslots)
            static = {k: v for k, v in kwargs.items() if k not in dynamic}
            parts += [f"{k}={spec(x)}" for k, x in kslots]
            if static:
                parts.append(f"**{const(static)}")
            infix = _INFIX.get(fn) if len(parts) == 2 and not kwargs else None
            call = f"{parts[0]} {infix} {parts[1]}" if infix else f"{const(fn)}({', '.join(parts)})"
            if k in reuse:  # the result written into the buffer of an input that dies here
                call = f"{const(self.fresh[outs][0])}({', '.join(parts)}, out=s{reuse[k]})"
            if type(outs) is int and shapes is None:
                lines.append(f"    s{outs} = {call}")
                lines += lines_after
                continue
            lines.append(f"    r = {call}")
            if shapes is not None:
                lines.append(f"    if _shapes(r) != {const(shapes)}: raise _Stale")
            lines += [f"    {target} = r{index}" for target, index in _targets(outs, "")]
            lines += lines_after + ["    r = None"]
        written = "".join("None, " if i is None else f"s{i}, " for _, i in self.st.writes)
        lines.append(f"    return ({''.join(f's{i}, ' for i in kept)}), ({written})")
        self.flat = all(kind == "raw" for kind, _, _ in self.outputs) and (
            self.treedef == pytree.flatten((0,) * len(self.outputs))[1]
        )
        code = compile("\n".join(lines), "<jit replay>", "exec")
        exec(code, consts)
        self.replay = consts["replay"]

    def _reuse(self, last, returned):
        """call index -> the input slot whose buffer it writes its result into (a ufunc
        with ``out=``): an input read last by this call, of the result's shape and dtype,
        and layout, whose buffer no other slot sees. Such a buffer is *owned*: made by a call that
        could write into out= (or by an in-place operator on an owned buffer read last
        there), and read by no call that might keep a view of it, neither returned nor
        state. The replay then allocates as hand-written NumPy does, reusing its
        temporaries."""
        fresh = self.fresh
        owned, seen = set(), set(returned) | set(self.inputs)
        for k, (_, _, tops, nested, _, kslots, outs, _, _) in enumerate(self.code):
            made = fresh.get(outs) if type(outs) is int else None
            if made is not None and made[0] is None:  # in place: the buffer of tops[0]
                first = tops[0][1]
                if first in owned and last.get(first) == k:
                    owned.add(outs)
                else:  # two slots for one buffer: neither is written into
                    seen.add(first)
            elif made is not None:
                owned.add(outs)
            if made is None:  # a call that may keep a view of what it reads
                seen.update(i for _, i in tops)
            for _, x in list(nested) + list(kslots):
                seen.update(_slots_of(x))
        reuse = {}
        for k, (_, _, tops, _, _, _, outs, _, shapes) in enumerate(self.code):
            made = fresh.get(outs) if type(outs) is int else None
            if made is None or made[0] is None or shapes is not None:
                continue
            for _, i in tops:
                if (i in owned and i not in seen and last.get(i) == k
                        and fresh[i][1:] == made[1:]):  # fmt: skip
                    reuse[k] = i
                    break
        return reuse

    def run(self, arrays):
        got, written = self.replay(arrays)
        if written:
            self.st.write(written)
        if self.flat:  # a tuple of raw arrays (value_and_grad of arrays): as it is
            return got
        got = iter(got)
        out = []
        for kind, slot, rec in self.outputs:
            if kind == "raw":
                out.append(next(got))
            elif kind == "number":
                out.append(next(got).item())
            elif kind == "tensor":
                out.append(rec.wrap(next(got)))
            else:
                out.append(slot)
        return pytree.unflatten(self.treedef, out)


# Python's binary operators, written as such in the compiled replay (no call of the
# operator module's function: the same method runs, one call less)
_INFIX = {
    operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
    operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.matmul: "@",
    operator.and_: "&", operator.or_: "|", operator.xor: "^", operator.lshift: "<<",
    operator.rshift: ">>", operator.lt: "<", operator.le: "<=", operator.gt: ">",
    operator.ge: ">=", operator.eq: "==", operator.ne: "!=",
}  # fmt: skip


# Whether a replay writes results into the buffers of inputs that die at the call (see
# _Program._reuse): 0.77-0.86x the time of a (100000,) element-wise chain's gradient
# (benchmarks/chain.py, which measures it off and on)
REUSE_BUFFERS = True

# Python's in-place operators: their result is their first argument's buffer
_INPLACE = {operator.iadd, operator.isub, operator.imul, operator.itruediv}


def _targets(outs, index):
    """(slot name, index expression) of each array of a call's output spec."""
    if type(outs) is int:
        return [(f"s{outs}", index)]
    if outs is None:
        return []
    return [t for j, o in enumerate(outs) for t in _targets(o, f"{index}[{j}]")]


def _slots_of(spec):
    if type(spec) is int:
        return (spec,)
    if type(spec) is _Slot:
        return (spec.i,)
    if type(spec) in (tuple, list):
        return [s for x in spec for s in _slots_of(x)]
    return ()


# -- the trace backend -------------------------------------------------------------------
_traced: dict = {}  # eager backend key -> (trace backend, its TraceArray class, Recorder)


def _traced_function(B, fn, effect):
    def traced(*args, **kwargs):  # a call writing into out= is an effect too
        return _emit(B, fn, args, kwargs, effect=effect or "out" in kwargs)

    traced.__name__ = getattr(fn, "__name__", "traced")
    traced.__doc__ = getattr(fn, "__doc__", None)
    return traced


def _traced_namespace(B, ns, into):
    """``into`` filled with the attributes of ``ns``: its functions recorded, the rest
    (dtypes, constants, ``finfo``'s classes) as they are."""
    for name, v in list(vars(ns).items()):
        if name.startswith("__") and name != "__array_namespace_info__":
            continue
        if isinstance(v, (types.ModuleType, types.SimpleNamespace)):
            if name in ("linalg", "fft"):  # the standard's extensions; other modules: none
                setattr(into, name, _traced_namespace(B, v, types.SimpleNamespace()))
        elif callable(v) and not isinstance(v, type) and name != "__array_namespace_info__":
            # the in-place kernels (index_add_, apply_) and random draws are effects
            effect = name.endswith("_") or name == "bernoulli"
            setattr(into, name, _traced_function(B, v, effect))
        else:
            setattr(into, name, v)
    return into


def _trace_backend(B):
    """(trace backend, TraceArray class, Recorder) of the eager backend ``B`` (cached)."""
    got = _traced.get(B.key)
    if got is not None:
        return got
    from .. import backends
    from ..engine import namespace

    class TraceBackend(backends.Backend):
        __hash__ = object.__hash__  # array-api-compat caches namespaces by hash

    tb = TraceBackend.__new__(TraceBackend)
    cls = type("TraceArray", (TraceArray,), {"__slots__": (), "_B": B, "_tb": tb})
    # NumPy's scalars (a 0-d ufunc result), traced as the engine sees them in eager: the
    # engine turns them into arrays where it turns NumPy's (scalar_types)
    cls._scalar = type("TraceScalar", (cls,), {"__slots__": ()})
    # A Python number of state (an optimizer's step count, its learning rate): read anew
    # by each replay, and what is computed from it alone stays a Python number, so that it
    # meets arrays as eager's number does (NumPy's weak scalars: no dtype promotion)
    cls._number = type("TraceNumber", (cls,), {"__slots__": ()})
    _traced[B.key] = (tb, cls, None)
    _traced_namespace(B, B, tb)
    for sub in ("linalg", "fft"):
        if hasattr(B, sub):
            setattr(tb, sub, _traced_namespace(B, getattr(B, sub), types.SimpleNamespace()))
    tb.__name__ = tb.key = f"jit({B.key})"
    tb.xp = tb
    tb.__array_api_version__ = B.__array_api_version__
    tb.__array_namespace_info__ = B.__array_namespace_info__
    tb.array_type = cls
    tb.scalar_types = (cls._scalar,) if B.scalar_types else ()
    tb.is_array = lambda x: isinstance(x, cls) and type(x) not in (cls._scalar, cls._number)
    tb.host_checks = False  # a check would read a traced value back
    tb.lazy = B.lazy
    backends._cache[tb.key] = tb
    rec = namespace._recorder(tb)
    tb.traced = True
    _traced[B.key] = (tb, cls, rec)
    tracing.recorders[B.key] = rec
    tracing.arrays[cls] = tracing.arrays[cls._scalar] = rec
    return _traced[B.key]


# -- jit ----------------------------------------------------------------------------------
# Python values, static by value (np.float64, a float, among them: eager's transforms take
# it as a Python number, and give Python numbers back)
_SCALARS = (bool, int, float, complex, str, bytes, type(None))


def _leaf_key(x, backend_of):
    """The signature of one argument leaf; raises _Eager where ``f`` must run eagerly."""
    if isinstance(x, Tensor):
        if x._rg and mode.enabled:  # differentiated by its caller: eager
            raise _Eager
        d = x.data
        return (type(x), d.shape, d.dtype, x._rec.backend.device_of(d))
    if type(x) is Batched:
        raise _Eager
    if isinstance(x, _SCALARS):
        return (type(x), x)
    B = backend_of(x)
    if B is None:
        try:
            hash(x)
        except TypeError:
            raise TypeError(
                f"jit: an argument leaf of type {type(x).__name__} is neither an array nor "
                "hashable; mark its argument static (static_argnums / static_argnames)"
            ) from None
        return (type(x), x)
    return (type(x), x.shape, x.dtype, B.device_of(x))


class _Eager(Exception):
    """An argument needs the eager function (a Tensor that requires grad, a vmap batch)."""


_backends: dict = {}  # array type -> eager backend (None: not an array)


def _backend_of(x):
    t = type(x)
    if t in _backends:
        return _backends[t]
    import array_api_compat

    from .. import backends

    B = None
    if array_api_compat.is_array_api_obj(x):
        B = backends.resolve(array_api_compat.array_namespace(x))
    _backends[t] = B
    return B


def _array_signature(args):
    """The signature of positional arguments that are all arrays of a library met before
    (shape, dtype, device, and which are the same array), or None."""
    keys = []
    get = _backends.get
    for x in args:
        B = get(type(x))
        if B is None:  # not an array, or a type the general path has not seen yet
            return None
        keys.append((type(x), x.shape, x.dtype, B.device_of(x)))
    if len(args) > 1:
        first = {}
        keys.append(tuple([first.setdefault(id(x), i) for i, x in enumerate(args)]))
    return tuple(keys)


def _signature(leaves):
    keys, first = [], {}
    for i, x in enumerate(leaves):
        keys.append(_leaf_key(x, _backend_of))
        if not isinstance(x, _SCALARS):
            keys.append(first.setdefault(id(x), i))  # the same array passed twice
    return tuple(keys)


def _trace(f, leaves, treedef, rebuild):
    """Run ``f`` on trace arrays standing for the array leaves; its program and result."""
    prog = _Program()
    traced = []
    for x in leaves:
        if isinstance(x, Tensor):
            _, cls, rec = _trace_backend(x._rec.backend)
            prog.inputs.append(prog.new_slot())
            traced.append(rec.wrap(cls(x.data, prog.inputs[-1])))
        elif not isinstance(x, _SCALARS) and _backend_of(x) is not None:
            B = _backend_of(x)
            _, cls, _ = _trace_backend(B)
            if B.scalar_types and isinstance(x, B.scalar_types):  # np.float64(1.0)
                cls = cls._scalar
            prog.inputs.append(prog.new_slot())
            traced.append(cls(x, prog.inputs[-1]))
        else:
            traced.append(x)
    prog.host = _host_random_state()
    _active[0] = prog
    failed = True
    try:
        out = rebuild(pytree.unflatten(treedef, traced))
        failed = False
    finally:
        _active[0] = None
        prog.st.release(failed)
    if prog.unseen or _host_random_state() != prog.host:
        raise NotImplementedError(
            "jit: the function drew from a host generator outside the draws a replay makes "
            "again (a module initialized inside it draws from nn.init's generator, "
            "checkpoint from its own): a replay would reuse what it drew, which is not "
            "supported by jit yet; make the modules outside the jitted function"
        )
    outs, prog.treedef = pytree.flatten(out)
    prog.outputs, result = [], []
    for o in outs:
        if isinstance(o, Tensor) and isinstance(o.data, TraceArray) and o.data.slot >= 0:
            eager = _rec_of(type(o.data)._B)
            prog.outputs.append(("tensor", o.data.slot, eager))
            result.append(eager.wrap(o.data.value))
        elif isinstance(o, TraceArray) and o.slot >= 0:
            prog.outputs.append(("raw", o.slot, None))
            result.append(o.value)
        elif type(o) is tracing.Number:  # a Python number out (read when a replay ends)
            d = o.tensor.data
            if isinstance(d, TraceArray) and d.slot >= 0:
                prog.outputs.append(("number", d.slot, None))
                result.append(d.value.item())
            else:
                prog.outputs.append(("const", o.tensor.item(), None))
                result.append(prog.outputs[-1][1])
        else:
            if isinstance(o, (Tensor, TraceArray)):
                raise NotImplementedError(
                    "jit: the function combined a traced array with a Tensor made outside it "
                    "(state: a module parameter or buffer, optimizer state), which is not "
                    "supported by jit yet; pass that Tensor as an argument"
                )
            prog.outputs.append(("const", o, None))
            result.append(o)
    prog.prune()
    prog.compile()
    return prog, pytree.unflatten(prog.treedef, result)


def _host_random_state():
    """The states of the host generators that draw seeds (nn.init's, checkpoint's): a
    trace that changes one baked a seed into the program."""
    from ..nn import init
    from .checkpoint import _seeds

    gen = init._generator
    return (None if gen is None else gen.bit_generator.state, _seeds.getstate())


def _rec_of(B):
    from ..engine import namespace

    return namespace._recorder(B.xp)


def jit(f, static_argnums=(), static_argnames=()):
    """``f`` recorded once per signature and replayed as a program of backend calls.

    The first call with a given signature (tree structure, shapes, dtypes, devices,
    Python values and static arguments) runs ``f`` and records every backend call it
    makes, forward and backward; later calls run only those calls. Arrays in give
    arrays out, Tensors in give Tensors out (without history).

    >>> import numpy as np, autodiff as ad
    >>> from array_api_compat import array_namespace
    >>> def loss(w):
    ...     xp = array_namespace(w)
    ...     return xp.sum(xp.sin(w) ** 2)
    >>> g = ad.jit(ad.grad(loss))
    >>> w = np.array([0.1, 0.2])
    >>> bool(np.allclose(g(w), np.sin(2 * w)))  # d/dw sin(w)^2 = sin(2w)
    True
    >>> g.traces, bool(np.allclose(g(w + 1), np.sin(2 * (w + 1)))), g.traces  # replayed
    (1, True, 1)
    """
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
    cache: dict = {}

    @functools.wraps(f)
    def jitted(*args, **kwargs):
        if _active[0] is not None:  # inside another trace: recorded there
            return f(*args, **kwargs)
        fast = None
        if not kwargs and not nums:
            # arrays alone (the common call): a signature and a replay without the trees,
            # which cost a fifth of a small function's call (benchmarks/rosenbrock.py)
            fast = _array_signature(args)
            if fast is not None:
                fast = (fast, mode.enabled)
                for prog in cache.get(fast, ()):
                    if prog.st.holds():
                        try:
                            return prog.run([*args, *prog.st.arrays()])
                        except _Stale:
                            _forget(cache[fast], prog)
                            break
        n = len(args)
        fixed = {i % n if n else i for i in nums}
        dyn = [a for i, a in enumerate(args) if i not in fixed]
        dkw = {k: v for k, v in kwargs.items() if k not in names}
        static = (tuple((i, args[i]) for i in sorted(fixed) if i < n),
                  tuple((k, kwargs[k]) for k in names if k in kwargs))  # fmt: skip
        if not dkw and all(pytree.children(a) is None for a in dyn):
            # arrays alone (the common call): their tree is that of any as many leaves
            leaves, treedef = dyn, _flat_treedef(len(dyn))
        else:
            leaves, treedef = pytree.flatten((dyn, dkw))
        try:
            key = (treedef, static, mode.enabled, _signature(leaves))
            hash(key)
        except _Eager:
            return f(*args, **kwargs)
        except TypeError as exc:
            if "unhashable" not in str(exc):
                raise
            raise TypeError(f"jit: a static argument of {f.__name__} is not hashable") from exc
        progs = cache.setdefault(key, [])
        if fast is not None:
            cache[fast] = progs  # the same list: one program, two ways to find it
        for prog in progs:  # one per state it was traced with (train and eval modes...)
            if not prog.st.holds():
                continue
            arrays = [x.data if isinstance(x, Tensor) else x for x in leaves]
            arrays = [arrays[i] for i in prog.positions] + prog.st.arrays()
            try:
                return prog.run(arrays)
            except _Stale:  # a data-dependent shape changed: trace again
                _forget(progs, prog)
                break

        def rebuild(tree):
            d, k = tree
            it = iter(d)
            full = [args[i] if i in fixed else next(it) for i in range(n)]
            return f(*full, **{**k, **{k2: kwargs[k2] for k2 in names if k2 in kwargs}})

        prog, result = _trace(f, leaves, treedef, rebuild)
        prog.positions = [i for i, x in enumerate(leaves) if _is_array_leaf(x)]
        if not prog.st.created:  # else it made state: the next call traces with it
            progs.insert(0, prog)
        jitted.traces += 1
        return result

    jitted.traces = 0  # how many times f was traced (a new signature, a changed shape)
    return jitted


def _forget(progs, prog):
    """Drop a stale program (another thread may have dropped it already)."""
    try:
        progs.remove(prog)
    except ValueError:
        pass


@functools.cache
def _flat_treedef(n):
    """The treedef of ``(args, {})`` for ``n`` leaf arguments."""
    return pytree.flatten(([0] * n, {}))[1]


def _is_array_leaf(x):
    return isinstance(x, Tensor) or (not isinstance(x, _SCALARS) and _backend_of(x) is not None)
