"""What a jitted function reads and writes beyond its arguments: ``jit``'s *state*.

State is module parameters and buffers, their gradients, a Tensor ``f`` closes over and
the arrays an optimizer keeps (momentum buffers, moment estimates). The trace meets it
as it goes: a Tensor of the eager namespace is *lifted* (made a Tensor of the trace
namespace while the trace runs, its buffer an input slot of the program), and so is
its gradient; an optimizer that steps lifts its parameters and the arrays of its state.
Each is a *cell* (a Tensor's buffer, a Tensor's gradient, an entry of a dict) that a
replay reads before it runs and writes after it, so state changes as eager would
change it: in place where the backend writes in place (the replay writes the very
buffer), by rebinding where it does not. What a replay assumes (the modules' modes,
parameters and settings, the optimizers' hyper-parameters and counters, each cell's
type, shape and dtype, which gradients exist) is its guard; when it no longer holds,
``f`` is traced again. A trace that *creates* state (an optimizer's first step makes
its momentum buffers) leaves it created, as eager would, and is not replayed: the next
call traces again, with that state as input.

A trace that fails leaves the state as it was (buffers written in place are copied
back).
"""

from __future__ import annotations

from ..engine import versions

_SETTINGS = (bool, int, float, complex, str, type(None), tuple)


def module_key(m):
    """What a replay assumes of the module ``m`` and its submodules: its mode, which
    Tensors are its parameters and buffers, and its settings (the plain Python values of
    its attributes: a layer's ``eps``, a dropout's ``p``), which the trace read once."""
    key = []
    for sub in m.modules():
        plain = tuple(sorted((k, v) for k, v in vars(sub).items()
                             if type(v) in _SETTINGS))  # fmt: skip
        tensors = tuple((k, id(v)) for k, v in list(sub._parameters.items())
                        + list(sub._buffers.items()))  # fmt: skip
        key.append((type(sub), plain, tensors))
    return tuple(key)


# The Python numbers of an optimizer that a replay reads anew (each a cell, traced as a
# number, see jit's TraceNumber): the learning rate of each group (a schedule changes it
# every epoch or step), and the entries of its state the class names (``_traced_numbers``:
# a step count, NAdam's momentum product). Without them an Adam step, or any step under a
# schedule, would trace again on every call.
_GROUP_NUMBERS = ("lr",)


def _numbers(opt):
    return getattr(type(opt), "_traced_numbers", ())


def _is_number(v):
    return type(v) in (int, float)


def optimizer_key(opt):
    """What a replay assumes of the optimizer ``opt``: its hyper-parameters and the
    plain values of its state (a counter a replay doesn't read anew), and which arrays
    and numbers (by type) its state holds."""
    numbers = _numbers(opt)

    def plain(k, v, lifted):
        if type(v) not in _SETTINGS or (k in lifted and _is_number(v)):
            return k, type(v).__name__
        return k, v

    groups = tuple(
        (tuple(id(p) for p in g["params"]),
         tuple(sorted(plain(k, v, _GROUP_NUMBERS) for k, v in g.items()
                      if type(v) in _SETTINGS)))
        for g in opt.param_groups
    )  # fmt: skip
    state = tuple(
        (id(p), tuple(sorted(plain(k, v, numbers) for k, v in s.items())))
        for p, s in opt.state.items()
    )  # fmt: skip
    return groups, state


def _shape_of(a):
    if a is None or _is_number(a):
        return type(a)
    return (type(a), tuple(a.shape), a.dtype)


def _param_backend(opt, traced):
    """The eager backend of ``opt``'s parameters (None if it has none)."""
    for g in opt.param_groups:
        for p in g["params"]:
            d = p.data
            return _backend_of(d.value if isinstance(d, traced) else d)  # lifted: its value
    return None


class State:
    """The state one trace met: its cells in input order, what they hold at the end,
    and the guards of a replay. ``trace_of(B)`` gives the TraceArray class and the
    Recorder of the trace namespace of the eager backend ``B``."""

    def __init__(self, program, trace_of, trace_array):
        self.program, self.trace_of, self.trace_array = program, trace_of, trace_array
        self.cells = []  # ("data", t) | ("grad", t) | ("entry", dict, key), input order
        self.lifted = []  # (Tensor, eager class, buffer, copy of it) of each lifted Tensor
        self.entries = []  # (dict, key, array, copy) of each lifted optimizer array
        self.params = []  # (parameter, its gradient when lifted)
        self.modules, self.optimizers = {}, {}
        self.writes = []  # (cell, slot or None): written back after each replay
        self.created = False  # the trace made state: not replayable
        self.guards = []

    def _input(self, cell, value, cls):
        slot = self.program.new_slot()
        self.program.inputs.append(slot)
        self.cells.append(cell)
        return cls(value, slot)

    def lift(self, t):
        """Make the eager Tensor ``t`` (and its gradient) state of the program."""
        cls, rec = self.trace_of(t._rec.backend)
        eager = type(t)
        self.lifted.append((t, eager, t.data, _copy(t.data)))
        t.data = self._input(("data", t), t.data, cls)
        t.__class__ = rec.cls
        g = t._grad
        self.params.append((t, g))
        if g is not None and type(g) is eager:
            self.lifted.append((g, eager, g.data, _copy(g.data)))
            g.data = self._input(("grad", t), g.data, cls)
            g.__class__ = rec.cls

    def module(self, m):
        """Note the module ``m`` that ``f`` called, and lift its parameters and buffers
        before its forward reads them: what it computes from them alone is recorded too
        (a replay after an update must not reuse a value computed from the old ones)."""
        if id(m) in self.modules:
            return
        self.modules[id(m)] = (m, module_key(m))
        for sub in m.modules():
            for t in list(sub._parameters.values()) + list(sub._buffers.values()):
                if t is not None and not isinstance(t.data, self.trace_array):
                    self.lift(t)

    def optimizer(self, opt):
        """Lift what the optimizer ``opt`` reads and writes: its parameters (with their
        gradients) and the arrays of its state."""
        if id(opt) in self.optimizers:
            return
        before = {p: set(s) for p, s in opt.state.items()}
        self.optimizers[id(opt)] = (opt, optimizer_key(opt), before)
        for group in opt.param_groups:
            for p in group["params"]:
                if not isinstance(p.data, self.trace_array):
                    self.lift(p)
        for s in opt.state.values():
            for k, v in list(s.items()):
                B = _backend_of(v)
                if B is not None:
                    cls, _ = self.trace_of(B)
                    self.entries.append((s, k, v, _copy(v)))
                    s[k] = self._input(("entry", s, k), v, cls)
        numbers = [(g, k) for g in opt.param_groups for k in _GROUP_NUMBERS]
        numbers += [(s, k) for s in opt.state.values() for k in _numbers(opt)]
        B = _param_backend(opt, self.trace_array)
        for d, k in numbers:
            v = d.get(k)
            if _is_number(v) and B is not None:
                self.entries.append((d, k, v, None))
                d[k] = self._input(("entry", d, k), v, self.trace_of(B)[0]._number)

    def release(self, failed):
        """The eager classes and values back in every cell: on success what the trace
        computed (and what each replay must write back noted), on failure what was there
        before (copied back into buffers written in place)."""
        traced = self.trace_array
        final = {}  # id(lifted Tensor) -> the slot of its buffer at the end
        for t, eager, data, saved in reversed(self.lifted):
            d = t.data
            t.__class__ = eager
            if failed:
                t.data = _restored(data, saved)
            elif isinstance(d, traced):
                t.data, final[id(t)] = d.value, d.slot
            else:
                self.created = True  # a buffer no replay can give: trace again
        for p, g in self.params:
            if failed:
                p._grad = g
                continue
            self.writes.append((("data", p), final.get(id(p))))
            now = p._grad
            if now is None:
                self.writes.append((("grad", p), None))
            elif id(now) in final:  # the gradient it had, written
                self.writes.append((("grad", p), final[id(now)]))
            elif isinstance(now.data, traced):  # a gradient the trace made
                slot = now.data.slot
                now.__class__, now.data = type(p), now.data.value
                self.writes.append((("grad", p), slot))
        for s, k, v, saved in self.entries:
            now = s.get(k)
            if failed:
                s[k] = _restored(v, saved)
            elif isinstance(now, traced):
                s[k] = now.value
                self.writes.append((("entry", s, k), now.slot))
        for opt, _, before in self.optimizers.values():
            for p, s in list(opt.state.items()):
                for k, v in list(s.items()):
                    if isinstance(v, traced):  # made by this trace
                        s[k] = v.value
                        self.created = True
                if failed:  # what the failed trace added goes again
                    for k in set(s) - before.get(p, set()):
                        del s[k]
                    if p not in before:
                        del opt.state[p]
        self.writes = [(c, slot) for c, slot in self.writes if slot is not None or c[0] == "grad"]
        self.guards = [(cell, _shape_of(_read(cell))) for cell in self.cells]
        self.grads_none = [p for p, g in self.params if g is None]
        # nothing to check before a replay (a pure function): holds() is not called
        self.stateless = not (self.guards or self.grads_none or self.modules or self.optimizers)

    def holds(self):
        """Whether a replay may run: the state is what the program was traced with."""
        if self.stateless:
            return True
        for cell, shape in self.guards:
            if _shape_of(_read(cell)) != shape:
                return False
        if any(p._grad is not None for p in self.grads_none):
            return False
        if any(module_key(m) != key for m, key in self.modules.values()):
            return False
        return all(optimizer_key(o) == key for o, key, _ in self.optimizers.values())

    def arrays(self):
        return [_read(cell) for cell in self.cells]

    def write(self, values):
        """After a replay: each cell its new value."""
        for (cell, _), v in zip(self.writes, values):
            kind = cell[0]
            if kind == "data":
                t = cell[1]
                if t.data is not v:
                    t.data = v
                versions.bump(t)
            elif kind == "grad":
                p = cell[1]
                p._grad = None if v is None else p._rec.wrap(v)
            else:
                cell[1][cell[2]] = v


def _read(cell):
    kind = cell[0]
    if kind == "data":
        return cell[1].data
    if kind == "grad":
        g = cell[1]._grad
        return None if g is None else g.data
    return cell[1].get(cell[2])


def _backend_of(v):
    from ..engine.namespace import recorder_of

    if v is None or isinstance(v, _SETTINGS):
        return None
    try:
        return recorder_of(v).backend
    except TypeError:
        return None


def _copy(a):
    """A copy of the buffer ``a`` to restore it from, where it can be written in place."""
    B = _backend_of(a)
    if B is None or not B.mutable:
        return None
    return B.asarray(a, copy=True)


def _restored(a, saved):
    """``a`` with the values it had (``saved``), written back into the same buffer."""
    if saved is not None:
        a[...] = saved
    return a
