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
