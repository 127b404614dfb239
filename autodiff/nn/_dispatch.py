"""How a ``F.name(x, ...)`` call finds the namespace of its arguments."""

from __future__ import annotations

from ..tensor import Tensor


def ops_of(*arrays):
    """The wrapped namespace's ops of the first Tensor (raw arrays are wrapped)."""
    for a in arrays:
        if isinstance(a, Tensor):
            return a._ops
    for a in arrays:
        if a is not None and not isinstance(a, (int, float, bool)):
            import array_api_compat

            from ..namespace import Autodiff

            return Autodiff(array_api_compat.array_namespace(a)).asarray(0.0)._ops
    raise TypeError("expected at least one array argument")


def constant(a):
    """``a`` cut from the graph when it is a Tensor (a raw array is one already):
    for values a rule treats as constants, like the max subtracted in softmax."""
    return a.detach() if isinstance(a, Tensor) else a
