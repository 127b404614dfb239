"""``detect_anomaly``: the forward and backward checks that name the op, the direction and
the user's line where a NaN or an infinity is first made.

The hot paths pay one list test per recorded op while it is off (``anomaly[0]``).
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import warnings

from .grad_mode import transforming
from .node import Outer, Zeros

__all__ = ["detect_anomaly", "anomaly", "check_forward", "check_backward", "in_rule",
           "HostReadWarning", "host_read"]  # fmt: skip

_lock = threading.Lock()


class detect_anomaly:
    """Context manager (and decorator): the first recorded op whose forward makes NaN or
    inf from finite inputs, or whose VJP rule makes a non-finite gradient, raises a
    RuntimeError naming the op, the direction, the output or input, and the line of the
    user's code that called the op. Process-wide (as ``torch.autograd.detect_anomaly``);
    it reads every recorded value back to the host (a device sync), so it is for
    debugging: the hot paths pay one list test per recorded op while it is off.

    Legitimate infinities (``log(0)`` in a mask, ``-inf`` attention masks) raise too."""

    def __enter__(self):
        with _lock:
            anomaly[0] += 1

    def __exit__(self, *exc):
        with _lock:
            anomaly[0] -= 1

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly():
                return fn(*args, **kwargs)

        return wrapper


anomaly = [0]  # > 0 while detect_anomaly is on


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _caller():
    """``file:line: code`` of the innermost frame outside this package (the user's)."""
    import linecache

    here = _PACKAGE
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(here):
        f = f.f_back
    if f is None:
        return "an unknown place"
    line = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    return f"{f.f_code.co_filename}:{f.f_lineno}" + (f": {line}" if line else "")


def _finite(B, a):
    return bool(B.all(B.isfinite(a)))


def _what(B, a):
    return "nan" if bool(B.any(B.isnan(a))) else "inf"


class _InRule(threading.local):
    where = None  # inside a rule recorded under create_graph: the node's own place


in_rule = _InRule()


def check_forward(B, node, outs, inputs):
    """detect_anomaly's forward check of a new ``node``: remembers where it was called;
    raises if an output is not finite while its floating inputs are. Inside a recorded
    rule (create_graph) it only remembers: the rule's results are checked as a whole,
    as a backward, by ``check_backward``."""
    if in_rule.where is not None:
        node.where = in_rule.where
        return
    node.where = where = _caller()
    for k, o in enumerate(outs):
        if not B.is_array(o) or not B.isdtype(o.dtype, ("real floating", "complex floating")):
            continue
        if _finite(B, o):
            continue
        bad = [i for i, a in enumerate(inputs) if B.is_array(a) and not _finite(B, a)]
        cause = (f"input {bad[0]} was not finite already (not made by a recorded op)"
                 if bad else "from finite inputs")  # fmt: skip
        raise RuntimeError(
            f"detect_anomaly: the forward of '{node.op.name}' made {_what(B, o)} in output "
            f"{k}, {cause}; the op was called at {where}"
        )


def check_backward(B, node, grads, raw):
    """detect_anomaly's check of a rule's results: every gradient it made is finite."""
    for i, gi in enumerate(grads):
        if gi is None:
            continue
        parts = (gi.a, gi.b) if isinstance(gi, Outer) else (gi.g if isinstance(gi, Zeros) else gi,)
        for part in parts:
            d = part if raw else getattr(part, "data", part)
            if B.is_array(d) and not _finite(B, d):
                where = getattr(node, "where", None) or "a place recorded before detect_anomaly"
                raise RuntimeError(
                    f"detect_anomaly: the backward of '{node.op.name}' made {_what(B, d)} in "
                    f"the gradient of its input {i}; the op was called at {where}"
                )


class HostReadWarning(UserWarning):
    """A tensor being differentiated was read as a Python number (``float(t)``,
    ``int(t)``, ``t.item()``...) inside a transform: whatever is computed from that
    number is a constant to the transform, so the gradient through it is lost.

    >>> import warnings, numpy as np, autodiff as ad
    >>> xp = ad.Autodiff(np)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     g = ad.grad(lambda w: xp.sum(w * float(xp.sum(w))))(np.array([1.0, 2.0]))
    >>> caught[0].category.__name__, g.tolist()  # the truth is [6.0, 6.0]
    ('HostReadWarning', [3.0, 3.0])
    """


def _user_stacklevel():
    """The ``stacklevel`` of the innermost frame outside this package, seen from the
    caller of this function: the warning names the user's line, and the default filter
    shows it once per line."""
    f, level = sys._getframe(1), 1
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_PACKAGE):
        f, level = f.f_back, level + 1
    return level


def host_read(t, what):
    """Check a conversion ``what`` (``float()``, ``item()``...) of the tensor ``t`` that
    requires grad to a Python number: inside a transform's function the number cuts
    the graph silently, so it warns (HostReadWarning, once per line of the user's code),
    and raises under ``detect_anomaly``. Outside transforms it is a plain read (logging
    a loss after ``backward()``). ``bool()`` is not checked: a branch on a value has
    no gradient to lose."""
    if not transforming.depth:
        return
    msg = (
        f"{what} of a tensor that is being differentiated: the Python number it returns "
        "is a constant to the transform, so the gradient through it is lost (the graph "
        "is cut). Keep it a tensor (use the namespace's functions), or call .detach() "
        "first if no gradient should flow"
    )
    if anomaly[0]:
        raise RuntimeError(f"detect_anomaly: {msg}; at {_caller()}")
    warnings.warn(msg, HostReadWarning, stacklevel=_user_stacklevel())
