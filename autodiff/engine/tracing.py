"""Whether ``jit`` is recording a program (``autodiff.transforms.jit``), and what
refuses to run while it does."""

from __future__ import annotations

__all__ = ["active", "refuse_state"]

active: list = [None]  # the program being recorded; None outside a trace


def refuse_state(what: str) -> None:
    """Raise NotImplementedError when ``what``, which writes state that a replay would not
    write again (an optimizer's step), runs inside a function that ``jit`` traces."""
    if active[0] is not None:
        raise NotImplementedError(
            f"{what} inside a function under jit: writing state (parameters, optimizer "
            "state, hyper-parameters) is not supported by jit yet; call it outside the "
            "jitted function"
        )


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
    from .tensor import Tensor

    trace = traced_recorder(args)
    if trace is None:
        return None
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor) and a._rec is not trace:
            raise NotImplementedError(
                f"jit: {op.name}: the traced function read a Tensor of {type(a)._ns.__name__} "
                "that it does not take as an argument (a module parameter or buffer, "
                "optimizer state, a Tensor made outside it): reading state is not "
                "supported by jit yet; pass it as an argument"
            )
    if trace is caller:
        return None
    fn = trace.xp
    for part in op.name.split("."):
        fn = getattr(fn, part)
    return fn(*args, **kwargs)


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


def creation(rec, name):
    """The trace namespace's creation function ``name`` when ``jit`` traces and ``rec``
    (a namespace captured outside the traced function) has a trace namespace; else None."""
    if active[0] is None:
        return None
    trace = recorders.get(rec.backend.key)
    return None if trace is None else getattr(trace.xp, name)
