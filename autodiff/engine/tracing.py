"""Whether ``jit`` is recording a program (``autodiff.transforms.jit``), and what
refuses to run while it does."""

from __future__ import annotations

import threading

__all__ = ["active", "refuse_state", "module_called", "optimizer_called", "state_use", "number",
           "seed"]  # fmt: skip


class _Active(threading.local):
    """``active[0]``: the program this thread records; None outside a trace. Per thread:
    a trace in one thread leaves the eager code of the others alone."""

    program = None

    def __getitem__(self, i):
        return self.program

    def __setitem__(self, i, program):
        self.program = program


active = _Active()


def refuse_state(what: str) -> None:
    """Raise NotImplementedError when ``what``, which writes state that a replay would not
    write again (an optimizer's step), runs inside a function that ``jit`` traces."""
    if active[0] is not None:
        raise NotImplementedError(
            f"{what} inside a function under jit: writing state (parameters, optimizer "
            "state, hyper-parameters) is not supported by jit yet; call it outside the "
            "jitted function"
        )


def state_use(t, what: str, write: bool = False) -> None:
    """When ``jit`` traces and ``t`` is a Tensor the traced function does not take
    (state: a module's buffer, a parameter): a write (``what``, in place) makes it state
    of the program (lifted), so that each replay writes it; a read to the host raises
    NotImplementedError (the trace would read it once, a replay never)."""
    if active[0] is None or t._rec in arrays.values():
        return
    if write:
        active[0].lift(t)
        return
    raise NotImplementedError(
        f"jit: {what} of a Tensor the traced function does not take as an argument "
        f"(shape {tuple(t.shape)}: a module's buffer, a parameter, optimizer state) would "
        "run once, when tracing, and never on a replay: reading state to Python is not "
        "supported by jit"
    )


def optimizer_called(opt) -> None:
    """Note, when ``jit`` traces, that the optimizer ``opt`` steps or zeroes gradients:
    its parameters and state become state of the program."""
    if active[0] is not None:
        active[0].optimizer(opt)


def seed(draw):
    """``draw()``, a seed from a host generator (a dropout module's); while ``jit`` traces,
    a draw the program makes again on each replay: a fresh mask each call, from the
    generator's state then, as in eager."""
    return draw() if active[0] is None else active[0].seed(draw)


class Number:
    """A Python number a transform returns (``grad`` of a function of a Python number)
    from a traced 0-d Tensor: ``jit`` reads it when each replay ends."""

    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor


def number(t):
    """``t.item()``, or while ``jit`` traces, a :class:`Number` of ``t`` (a host read
    there would bake the traced value into the program)."""
    return t.item() if active[0] is None else Number(t)


recorders: dict = {}  # eager backend key -> the Recorder of its trace namespace (jit's)
arrays: dict = {}  # trace array type -> the Recorder of its trace namespace


def redirect(op, args, kwargs, caller):
    """``op(*args, **kwargs)`` on the trace namespace, for a call of the Recorder
    ``caller`` that met traced values while ``jit`` traces: a namespace captured outside
    the traced function (``xp = Autodiff(np)``) meeting the function's traced Tensors or
    arrays. None when not tracing, when ``caller`` is the trace namespace itself or when
    no traced value is among the arguments (the caller goes on, or raises its error)."""
    if active[0] is None:
        return None
    trace = traced_recorder(args)
    if trace is None:
        return None
    lifted = False
    for a in (*args, *kwargs.values()):
        # a Tensor (its class has a namespace: tensor.py imports this module, not back)
        if hasattr(type(a), "_ns") and a._rec is not trace:
            if recorders.get(a._rec.backend.key) is not trace:
                raise TypeError(
                    f"{op.name}: tensors of two different namespaces in one call "
                    f"({type(a)._ns.__name__} and a traced one of {trace.backend.key})"
                )
            active[0].lift(a)  # state the function reads: an input of the program
            lifted = True
    if trace is caller and not lifted:
        return None
    fn = trace.xp
    for part in op.name.split("."):
        fn = getattr(fn, part)
    # the arguments come in the op's own convention (``concat(*arrays)``), not the
    # public function's (``concat(arrays)``)
    return getattr(fn, "internal", fn)(*args, **kwargs)


def traced_recorder(args):
    """The trace namespace's Recorder of the first traced Tensor or trace array among
    ``args`` (None if there is none)."""
    traced = set(recorders.values())
    for a in args:
        if type(a) in arrays:
            return arrays[type(a)]
        rec = getattr(a, "_rec", None)
        if rec in traced:
            return rec
    return None


def module_called(module):
    """Note, when ``jit`` traces, that ``module`` was called: a replay checks that it
    still has the mode, parameters and settings the trace read."""
    if active[0] is not None:
        active[0].module(module)


def creation(rec, name):
    """The trace namespace's creation function ``name`` when ``jit`` traces and ``rec``
    (a namespace captured outside the traced function) has a trace namespace; else None."""
    if active[0] is None:
        return None
    trace = recorders.get(rec.backend.key)
    return None if trace is None else getattr(trace.xp, name)
