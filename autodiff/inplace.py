"""In-place writes into tensors: ``x[key] = v`` and ``x op= y``.

While recording, a write into a tensor that requires grad (or of a value that
does) is copy-on-write: the new value is computed into a fresh buffer and
recorded as a node (``__setitem__``, or the operator's op), and the tensor moves
onto it; buffers that earlier nodes saved keep the values they saw. Any other
write goes into the buffer itself and bumps its version counter, so nodes that
saved it refuse to run. A leaf that requires grad, and a view of a recorded
tensor, can't be written while recording: a clear error at the write.
"""

from __future__ import annotations

from . import graph
from .graph import mode
from .registry import get
from .tensor import INPLACE_OPERATORS, Tensor

__all__ = ["setitem", "inplace"]

_DUNDER = {name: dunder for dunder, name in INPLACE_OPERATORS.items()}


def _check_writable(t, what):
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


def _check_view(t, what):
    if t._base is not None and t._base._rg and mode.enabled:
        _check_writable(t, what)


def _rebind(t, res):
    """Move tensor ``t`` onto the value and node of ``res``."""
    t.data = res.data
    t._node = res._node
    t._index = res._index
    t._rg = res._rg
    t._version = res._version
    t._base = None


def setitem(t, key, value):
    """``t[key] = value``."""
    rec = t._rec
    rkey = rec.raw_key(key)
    v = rec.raw(value, "__setitem__")
    if mode.enabled and (t._rg or (isinstance(value, Tensor) and value._rg)):
        _check_writable(t, "__setitem__")
        new = rec.backend.asarray(t.data, copy=True)
        try:
            new[rkey] = v
        except Exception as exc:
            graph.add_op_name(exc, "__setitem__")
            raise
        res = rec.record(get("__setitem__"), new, (t, value), (t.data, v), {"key": rkey})
        _rebind(t, res)
        return
    _check_view(t, "__setitem__")
    try:
        t.data[rkey] = v
    except Exception as exc:
        graph.add_op_name(exc, "__setitem__")
        raise
    graph.bump(t)


def inplace(t, name, other):
    """``t op= other`` for the binary op ``name`` ("add" for ``+=``); returns ``t``."""
    rec = t._rec
    what = f"in-place {name}"
    if mode.enabled and (t._rg or (isinstance(other, Tensor) and other._rg)):
        _check_writable(t, what)
        res = getattr(rec.xp, name)(t, other)
        if res.shape != t.shape or res.dtype != t.dtype:
            raise TypeError(
                f"{what}: the result ({res.dtype}, shape {res.shape}) "
                f"doesn't fit the tensor ({t.dtype}, shape {t.shape})"
            )
        _rebind(t, res)
        return t
    _check_view(t, what)
    o = rec.raw(other, name)
    try:
        out = getattr(t.data, _DUNDER[name])(o)
    except Exception as exc:
        graph.add_op_name(exc, what)
        raise
    if out is NotImplemented:
        raise TypeError(f"{what}: unsupported operand {type(other).__name__}")
    t.data = out
    graph.bump(t)
    return t
