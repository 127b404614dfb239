"""Grad mode: whether operations are recorded, per thread (``no_grad``, ``enable_grad``).

The recording wrappers (namespace.py) read it on every call: while no thread has
recording off they skip even the thread-local read (``grad_off``).
"""

from __future__ import annotations

import functools
import threading

__all__ = ["no_grad", "enable_grad", "is_grad_enabled", "mode", "grad_off", "transforming"]


class _Mode(threading.local):
    enabled = True


mode = _Mode()
# How many threads have recording off. While none has, every thread records and
# the hot paths skip the thread-local read: ``if not grad_off[0] or mode.enabled``.
grad_off = [0]
_lock = threading.Lock()


class _Transforming(threading.local):
    depth = 0  # how many transforms' functions are running in this thread


# Written by the transforms (transforms/common.py ``calling``); read by a Tensor's
# conversions to Python numbers, which would cut the graph of a differentiated function.
transforming = _Transforming()


def is_grad_enabled() -> bool:
    return mode.enabled


def _set_mode(value: bool) -> None:
    with _lock:
        if mode.enabled != value:
            grad_off[0] += -1 if value else 1
            mode.enabled = value


class _GradMode:
    _value: bool

    def __enter__(self):
        self._prev = mode.enabled
        _set_mode(self._value)

    def __exit__(self, *exc):
        _set_mode(self._prev)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradMode):
    """Context manager (and decorator): operations inside are not recorded."""

    _value = False


class enable_grad(_GradMode):
    """Context manager (and decorator): recording on, even inside ``no_grad``."""

    _value = True
