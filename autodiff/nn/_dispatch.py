"""How a ``F.name(x, ...)`` call finds the namespace of its arguments."""

from __future__ import annotations

from typing import NamedTuple

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


class DtypeFacts(NamedTuple):
    integral: bool
    lowest: float | None  # the lowest finite value; None unless real floating


# (type of dtype, dtype) -> DtypeFacts; keyed by the type too, so that dtypes of two
# libraries are never compared
_FACTS: dict = {}


def dtype_facts(xp, dtype) -> DtypeFacts:
    """Whether ``dtype`` is an integer dtype and its lowest finite value, asked of ``xp``
    once per dtype (isdtype and finfo take microseconds: too slow for every call)."""
    key = (type(dtype), dtype)
    facts = _FACTS.get(key)
    if facts is None:
        floating = xp.isdtype(dtype, "real floating")
        facts = _FACTS[key] = DtypeFacts(
            bool(xp.isdtype(dtype, "integral")), float(xp.finfo(dtype).min) if floating else None
        )
    return facts
