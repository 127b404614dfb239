"""How a ``F.name(x, ...)`` call finds the namespace of its arguments."""

from __future__ import annotations

from typing import NamedTuple

from ..namespace import recorder_of
from ..tensor import Tensor


def recorder(*arrays):
    """The Recorder of the first Tensor's namespace (or of the first raw array's):
    ``recorder(x).xp.nn.relu(x)`` records the op; raw arrays are wrapped by it."""
    for a in arrays:
        if isinstance(a, Tensor):
            return recorder_of(a)
    for a in arrays:
        if a is not None and not isinstance(a, (int, float, bool)):
            return recorder_of(a)
    raise TypeError("expected at least one array argument")


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
