"""Argument checks shared by every public function, module, optimizer and transform.

Each check is a few comparisons (no array is touched), so an op may run them on every
call. A wrong type is a TypeError, a wrong value a ValueError; the message names the
owner (the op, module or optimizer), the argument and what it got::

    integer("Linear", "in_features", -1, low=0)
    ValueError: Linear: in_features must be an int >= 0, got -1

The module imports nothing from the project, so every layer can use it.
"""

from __future__ import annotations

import numbers

__all__ = ["integer", "number", "flag", "choice", "function", "integers"]


def _is_bool(v) -> bool:
    # NumPy's bool is numpy.bool (NumPy 2) or numpy.bool_, and no Python bool
    return isinstance(v, bool) or type(v).__name__ in ("bool", "bool_")


def _is_int(v) -> bool:
    # bool is an int to Python, never to us: Linear(True, 2) is a mistake.
    return isinstance(v, numbers.Integral) and not _is_bool(v)


def _bounds(low, high, open_low, open_high) -> str:
    if high is None:
        return f"{'>' if open_low else '>='} {low}"
    if low is None:
        return f"{'<' if open_high else '<='} {high}"
    return f"in {'(' if open_low else '['}{low}, {high}{')' if open_high else ']'}"


def _range(owner, name, v, low, high, open_low, open_high, kind):
    if (
        low is not None
        and (v <= low if open_low else v < low)
        or high is not None
        and (v >= high if open_high else v > high)
    ):
        raise ValueError(
            f"{owner}: {name} must be {kind} {_bounds(low, high, open_low, open_high)}, got {v!r}"
        )
    return v


def integer(owner, name, v, low=None, high=None):
    """``v`` if it is an int (not a bool) in ``[low, high]``."""
    if not _is_int(v):
        raise TypeError(f"{owner}: {name} must be an int, got {v!r} ({type(v).__name__})")
    return _range(owner, name, v, low, high, False, False, "an int")


def integers(owner, name, v, low=None):
    """``v`` as a tuple of ints >= ``low``: an int is a tuple of one."""
    vs = (v,) if _is_int(v) else v
    if not isinstance(vs, (tuple, list)) or not all(_is_int(i) for i in vs):
        raise TypeError(f"{owner}: {name} must be an int or a tuple of ints, got {v!r}")
    for i in vs:
        _range(owner, name, i, low, None, False, False, "ints")
    return tuple(vs)


def number(owner, name, v, low=None, high=None, *, open_low=False, open_high=False):
    """``v`` if it is a real number (not a bool) within the bounds (open where said)."""
    if not isinstance(v, numbers.Real) or _is_bool(v):
        raise TypeError(f"{owner}: {name} must be a number, got {v!r} ({type(v).__name__})")
    if v != v:
        raise ValueError(f"{owner}: {name} must be a number, got nan")
    return _range(owner, name, v, low, high, open_low, open_high, "a number")


def flag(owner, name, v):
    """``v`` if it is a bool (NumPy's too)."""
    if not _is_bool(v):
        raise TypeError(f"{owner}: {name} must be True or False, got {v!r} ({type(v).__name__})")
    return bool(v)


def choice(owner, name, v, options):
    """``v`` if it is one of ``options``."""
    if not isinstance(v, (str, type(None), numbers.Number)) or v not in options:
        shown = ", ".join(repr(o) for o in options)
        raise ValueError(f"{owner}: {name} must be one of {shown}, got {v!r}")
    return v


def function(owner, name, v):
    """``v`` if it can be called."""
    if not callable(v):
        raise TypeError(f"{owner}: {name} must be callable, got {type(v).__name__}")
    return v
