"""Error messages that name the op: the backend's error with the op's name, and the
rule an error came from."""

from __future__ import annotations

__all__ = ["add_op_name", "add_context"]


def add_context(exc, text):
    if exc.args and isinstance(exc.args[0], str) and text not in exc.args[0]:
        exc.args = (f"{exc.args[0]} ({text})",) + exc.args[1:]


def add_op_name(exc, name):
    """Prefix the backend's error message with the op's name (same error type)."""
    msg = exc.args[0] if exc.args else None
    if isinstance(msg, str):
        if not msg.startswith(f"{name}:"):
            exc.args = (f"{name}: {msg}",) + exc.args[1:]
    elif hasattr(exc, "_msg"):  # numpy's AxisError formats its message from attributes
        if not str(exc).startswith(f"{name}:"):
            exc._msg = name if exc._msg is None else f"{name}: {exc._msg}"
    elif not exc.args:
        exc.args = (f"{name}: failed",)
