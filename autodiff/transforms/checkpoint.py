"""``checkpoint(f)``: gradient checkpointing (rematerialization), as
``torch.utils.checkpoint`` and ``jax.checkpoint``.

A call of the checkpointed function records ``f`` as usual, so the graph's
structure (its nodes and their edges to ``f``'s arguments and to the tensors it
closes over, such as a module's parameters) is there; then the values its nodes
saved are dropped, and each of those nodes holds the call's :class:`_Segment`
(a ``node.Recompute``) instead. The first time a backward pass reaches one of
them (the pass's existing slow branch, ``node.check_node``), ``f`` runs again
on the saved arguments, its new nodes are matched one to one with the recorded
ones (in creation order, their ops, shapes, edges and constants checked), and
their saved values move into the recorded nodes, which the pass then runs and
frees as any. The same ops run on the same values in the same order, so the
gradients are bit-identical to those without checkpointing.

Memory: what outlives the forward is the arguments' buffers (which the caller
holds anyway, mostly) and the small records of the structure; the values ``f``
computed inside are alive only while it runs, once in the forward and once in
the backward. Time: one more forward of ``f``.

Dropout masks drawn inside ``f`` are drawn again, the same, by the
recomputation (their seeds are logged, see ``nn.functional.dropout.masks``), and the
NumPy generators the recomputation may draw from are put back afterwards, so
checkpointing changes no later random number.
"""

from __future__ import annotations

import functools
import random
import threading
import weakref

from .. import checks, pytree
from ..engine.grad_mode import enable_grad, mode
from ..engine.node import Recompute, attach, next_seq
from ..engine.tensor import Tensor
from ..engine.versions import saved_counter
from ..nn import init
from ..nn.functional.dropout import masks
from ..nn.modules.module import Module
from .common import running, running_as

__all__ = ["checkpoint"]


class _State(threading.local):
    recomputing = False  # inside a recomputation: checkpoints nested in it run plainly
    log = None  # while a checkpointed forward runs: its dropout draws (shape, keep, seed)


_state = _State()
# Seeds for the masks of dropout called without one inside a checkpointed function: a
# stream of its own, so that the user's Python and NumPy random streams don't move.
_seeds = random.Random()


def checkpoint(f):
    """``f`` whose intermediate values are not kept for the backward but recomputed
    there: ``checkpoint(layer)(x)``, ``checkpoint(lambda x, n: g(x, n))(x, n=3)``.

    Peak memory of a chain of checkpointed layers: their inputs plus one layer's
    intermediates, instead of every layer's; one more forward of each layer in time.
    Gradients (``backward``, ``grad``, ``vjp``, ``create_graph``) are exactly those
    without checkpointing. ``f`` takes any arguments (Tensors, numbers, None, trees of
    them, keywords) and returns a Tensor or a tree of them.

    ``f`` must run the same ops on the same shapes when recomputed: a recomputation that
    records other ops (``f`` branches on random numbers or on state that changed since
    the forward, a module was switched to ``eval()``), or that finds an argument or a
    parameter ``f`` reads modified in place since the forward, raises a RuntimeError. The
    masks of dropout (``nn.Dropout``, ``F.dropout``) are drawn again the same; other
    randomness inside ``f`` is not reproduced, and tensors ``f`` reads that require no
    gradient, and are not saved by an op, must not change until the backward.
    """
    checks.function("checkpoint", "f", f)
    if not callable(f):
        raise TypeError(f"checkpoint: f must be callable, got {type(f).__name__}")
    name = getattr(f, "__name__", None) or type(f).__name__

    @functools.wraps(f, updated=())
    def checkpointed(*args, **kwargs):
        if not mode.enabled or _state.recomputing:
            return f(*args, **kwargs)
        return _forward(f, name, args, kwargs)

    return checkpointed


class _Input:
    """A Tensor argument as the call saw it: its buffer, where its gradient goes, and its
    version counter (a write into the buffer after the call makes the recomputation
    refuse); the recomputation gets a new Tensor of the same buffer and edge."""

    __slots__ = ("data", "rec", "rg", "parent", "index", "counter", "version", "label")

    def __init__(self, t, label):
        self.data, self.rec, self.rg, self.label = t.data, t._rec, t._rg, label
        self.parent = t._node
        self.index = t._index if t._node is not None else t  # a leaf: the tensor itself
        # Saved as a node saves it: a recorded write into it copies (see inplace.py).
        self.counter = saved_counter(t)
        self.version = self.counter[0]

    def tensor(self):
        w = self.rec.wrap(self.data)
        saved_counter(w)  # in-place writes of f into it copy, as they did in the forward
        if self.rg:
            if self.parent is None:
                w._rg = True  # stands for the leaf: its edges are matched to the leaf's
            else:
                attach(w, self.parent, self.index)
        return w


def _labels(args, kwargs):
    """A name per leaf of ``(args, kwargs)``, in ``pytree.flatten``'s order."""
    out = []
    for i, a in enumerate(args):
        out += [f"argument {i}"] * len(pytree.leaves(a))
    for k in sorted(kwargs):
        out += [f"argument {k!r}"] * len(pytree.leaves(kwargs[k]))
    return out


def _forward(f, name, args, kwargs):
    leaves, tree = pytree.flatten((args, kwargs))
    inputs = {}
    saved = list(leaves)
    labels = None
    for k, v in enumerate(leaves):
        if isinstance(v, Tensor):
            inp = inputs.get(id(v))  # one tensor passed twice stays one (x * x is square)
            if inp is None:
                labels = labels or _labels(args, kwargs)
                inp = inputs[id(v)] = _Input(v, labels[k])
            saved[k] = inp
    log = _state.log
    owner = log is None
    if owner:
        _state.log = log = []
        prev_draw, masks.draw = masks.draw, _log_draw
    start = len(log)
    lo = next_seq()
    try:
        out = f(*args, **kwargs)
    finally:
        if owner:
            _state.log = None
            masks.draw = prev_draw
    nodes = _interior(pytree.leaves(out), lo)
    if nodes:
        # A checkpoint nested in this one leaves its draws in the log for this one too.
        segment = _Segment(f, name, tree, saved, list(inputs.values()), log[start:], nodes)
        segment.depth = running()  # an inner grad records (or not) alike when recomputed
    return out


def _log_draw(B, shape, keep, seed):
    """Dropout's mask in a checkpointed forward, its seed logged for the recomputation."""
    if seed is None:
        seed = _seeds.getrandbits(63)
    _state.log.append((shape, keep, seed))
    return B.bernoulli(shape, keep, seed)


def _interior(values, lo):
    """The nodes created after ``lo`` that the Tensors among ``values`` were computed
    through, in creation order: what one call of ``f`` recorded (other threads' nodes
    and ``f``'s dead ends left out)."""
    seen = set()
    stack = []
    for t in values:
        if isinstance(t, Tensor):
            n = t._node
            if n is not None and n.seq > lo and n not in seen:
                seen.add(n)
                stack.append(n)
    while stack:
        for e in stack.pop().edges:
            if e is not None:
                p = e[0]
                if p is not None and p.seq > lo and p not in seen:
                    seen.add(p)
                    stack.append(p)
    return sorted(seen, key=lambda n: n.seq)


_PLAIN = (int, float, complex, str, bytes, slice, type(None), type(Ellipsis))


def _norm(v):
    """What of a saved value two recordings of one call must agree on: numbers and
    keys themselves, arrays by shape and dtype, other objects by type."""
    if isinstance(v, _PLAIN):
        return "nan" if v != v else v  # NaN: equal to itself here
    if isinstance(v, (tuple, list)):
        return tuple(_norm(x) for x in v)
    if isinstance(v, dict):
        return tuple((k, _norm(x)) for k, x in v.items())
    shape = getattr(v, "shape", None)
    if shape is not None and hasattr(v, "dtype"):  # an array or a Meta
        return ("array", tuple(shape), str(v.dtype))
    return ("object", type(v).__qualname__)


def _record(node):
    """(op name, outputs, constants, versions): the structure of a node, kept once its
    saved values are dropped."""
    return (node.op.name, node.outs, _norm(node.args), _norm(node.kwargs), node.versions)


class _Segment(Recompute):
    """One call of a checkpointed function: what recomputes it, and the records of the
    nodes it made (held weakly: the graph holds them, and they hold this)."""

    __slots__ = ("f", "name", "tree", "saved", "inputs", "draws", "refs", "records",
                 "closed", "depth", "_by_id")  # fmt: skip

    def __init__(self, f, name, tree, saved, inputs, draws, nodes):
        self.f, self.name, self.tree, self.saved = f, name, tree, saved
        self.inputs, self.draws = inputs, draws
        self.refs = [weakref.ref(n) for n in nodes]
        self._by_id = None
        records = []
        for n in nodes:
            k = n.kwargs
            if isinstance(k, _Segment):  # made by a checkpoint nested in this one
                records.append(k.record_of(n))
            else:
                records.append(None if n.args is None else _record(n))  # None: freed
        self.records = records
        # The leaves f reads besides its arguments (parameters): a write into one before
        # the backward would change the recomputation.
        mine = {id(i.index) for i in inputs if i.parent is None}
        closed = {}
        for n in nodes:
            for e in n.edges:
                if e is not None and e[0] is None and id(e[1]) not in mine:
                    leaf = e[1]
                    if id(leaf) not in closed:
                        c = saved_counter(leaf)
                        closed[id(leaf)] = (leaf, c, c[0])
        self.closed = list(closed.values())
        for n, r in zip(nodes, records):
            if r is not None:
                n.args = n.ans = None
                n.kwargs = self
                n.versions = ()

    def record_of(self, node):
        if self._by_id is None:
            self._by_id = {id(r()): rec for r, rec in zip(self.refs, self.records)}
        return self._by_id[id(node)]

    def fill(self):
        """Recompute the call and put the saved values back into its nodes."""
        name = self.name
        for inp in self.inputs:
            if inp.counter[0] != inp.version:
                raise RuntimeError(
                    f"checkpoint: {inp.label} of '{name}' (shape {tuple(inp.data.shape)}) was "
                    f"modified in place after the checkpointed call (version "
                    f"{inp.counter[0]}, expected {inp.version}); the backward recomputes "
                    f"'{name}' from its arguments: change a copy, or do it after backward"
                )
        for leaf, c, v in self.closed:
            if leaf._version is not c or c[0] != v:
                raise RuntimeError(
                    f"checkpoint: a tensor '{name}' reads (shape {tuple(leaf.shape)}, a "
                    "parameter?) was modified in place between the checkpointed call and "
                    f"the backward (an optimizer step?); the backward recomputes '{name}' "
                    "with it: step after backward"
                )
        leaf_of = {}
        made = {}
        leaves = []
        for v in self.saved:
            if type(v) is _Input:
                w = made.get(id(v))
                if w is None:
                    w = made[id(v)] = v.tensor()
                    if v.rg and v.parent is None:
                        leaf_of[id(w)] = v.index
                v = w
            leaves.append(v)
        args, kwargs = pytree.unflatten(self.tree, leaves)
        replay = _Replay(self.draws, name)
        prev = _state.recomputing, _state.log, masks.draw
        _state.recomputing, _state.log, masks.draw = True, None, replay
        generators = _generators(self.f) if self.draws else ()
        states = [(g, g.bit_generator.state) for g in generators]
        lo = next_seq()
        try:
            with enable_grad(), running_as(self.depth):
                out = self.f(*args, **kwargs)
        except Exception as exc:
            text = f"recomputing checkpointed '{name}' for the backward"
            if exc.args and isinstance(exc.args[0], str) and text not in exc.args[0]:
                exc.args = (f"{exc.args[0]} ({text})",) + exc.args[1:]
            raise
        finally:
            _state.recomputing, _state.log, masks.draw = prev
            for g, s in states:
                g.bit_generator.state = s
        if replay.used != len(self.draws):
            raise _mismatch(name, f"it drew {replay.used} dropout masks, the forward "
                                  f"{len(self.draws)}")  # fmt: skip
        new = _interior(pytree.leaves(out), lo)
        olds = [r() for r in self.refs]
        self._match(olds, new, leaf_of)
        for o, n in zip(olds, new):
            if o is not None and o.kwargs is self:
                o.args, o.ans, o.kwargs, o.versions = n.args, n.ans, n.kwargs, n.versions

    def _match(self, olds, new, leaf_of):
        """Raise unless the recomputation recorded what the forward did, node for node."""
        name = self.name
        if len(new) != len(olds):
            raise _mismatch(name, f"it recorded {len(new)} ops, the forward {len(olds)}")
        position = {n: i for i, n in enumerate(new)}
        for i, (o, n, rec) in enumerate(zip(olds, new, self.records)):
            if rec is None:
                continue
            op, outs, args, kwargs, versions = rec
            where = f"op {i} of {len(new)}, '{op}'"
            if n.op.name != op:
                raise _mismatch(name, f"its op {i} of {len(new)} is '{n.op.name}', the "
                                      f"forward's was '{op}'")  # fmt: skip
            if n.outs != outs or not _same(_norm(n.args), args):
                raise _mismatch(name, f"{where} got other shapes, dtypes or constants")
            if not _same(_norm(n.kwargs), kwargs):
                raise _mismatch(name, f"{where} got other keyword arguments")
            if len(n.versions) != len(versions):
                raise _mismatch(name, f"{where} saved other tensors")
            for (c, v), (c2, v2) in zip(versions, n.versions):
                if c is c2 and v != v2:  # the same tensor, since written into
                    raise RuntimeError(
                        f"checkpoint: a tensor saved by {where} inside '{name}' was "
                        f"modified in place between the checkpointed call and the backward "
                        f"(version {v2}, expected {v}); the backward recomputes '{name}' "
                        "with it: change a copy, or do it after backward"
                    )
            if o is None:  # dropped by the graph: nothing reads its edges
                continue
            if len(o.edges) != len(n.edges):
                raise _mismatch(name, f"{where} got another number of inputs")
            for j, (eo, en) in enumerate(zip(o.edges, n.edges)):
                if eo is None or en is None:
                    ok = eo is en
                elif eo[2] != en[2] or eo[3] != en[3]:
                    ok = False
                elif en[0] is not None:
                    k = position.get(en[0])
                    parent = en[0] if k is None else olds[k]
                    ok = eo[0] is parent and eo[1] == en[1]
                else:  # a leaf: an argument's stand-in, or one f reads (a parameter)
                    ok = eo[0] is None and eo[1] is leaf_of.get(id(en[1]), en[1])
                if not ok:
                    raise _mismatch(name, f"the input {j} of {where} comes from elsewhere")


def _same(a, b):
    try:
        return bool(a == b)
    except Exception:  # objects whose == is not a truth value
        return repr(a) == repr(b)


def _mismatch(name, what):
    return RuntimeError(
        f"checkpoint: recomputing '{name}' for the backward did not record what its "
        f"forward did ({what}); a checkpointed function must run the same ops on the same "
        "shapes each time: no branching on random numbers or on state changed since the "
        "forward (a module switched to eval(), a cache filled), no in-place change of "
        "what it reads"
    )


class _Replay:
    """Dropout in a recomputation: the forward's masks again, from their logged seeds."""

    def __init__(self, draws, name):
        self.draws, self.name, self.used = draws, name, 0

    def __call__(self, B, shape, keep, seed):
        i = self.used
        if i >= len(self.draws) or self.draws[i][:2] != (shape, keep):
            raise _mismatch(self.name, f"its dropout mask {i} differs from the forward's "
                                       "in shape or probability, or is one more")  # fmt: skip
        self.used = i + 1
        return B.bernoulli(shape, keep, self.draws[i][2])


def _generators(f):
    """The NumPy generators a recomputation of ``f`` may draw from (``nn.Dropout`` draws
    its seed from one): the default one, and those of the modules that ``f`` is, is bound
    to, closes over or names; their states are put back after the recomputation."""
    found = {id(g): g for g in (init.default_generator(),)}
    seen = set()
    stack = [f]
    while stack and len(seen) < 10_000:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, Module):
            for m in obj.modules():
                for v in vars(m).values():
                    if hasattr(v, "bit_generator"):
                        found[id(v)] = v
        elif hasattr(obj, "bit_generator"):
            found[id(obj)] = obj
        elif isinstance(obj, functools.partial):
            stack += [obj.func, *obj.args, *obj.keywords.values()]
        elif hasattr(obj, "__self__") and hasattr(obj, "__func__"):  # a bound method
            stack += [obj.__self__, obj.__func__]
        elif hasattr(obj, "__code__") and hasattr(obj, "__globals__"):  # a function
            stack += [c.cell_contents for c in obj.__closure__ or () if _filled(c)]
            stack += [obj.__globals__[k] for k in obj.__code__.co_names if k in obj.__globals__]
            stack += list(obj.__defaults__ or ())
        elif isinstance(obj, (list, tuple)):
            stack += obj[:256]  # a long list of data holds no module, most likely
        elif isinstance(obj, dict):
            stack += list(obj.values())[:256]
    return list(found.values())


def _filled(cell):
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:  # a free variable not bound yet
        return False
    return True
