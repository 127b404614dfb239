"""What the functional ops ask of a dtype, once per dtype."""

from __future__ import annotations

from typing import NamedTuple


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
