"""Adagrad, as torch.optim.Adagrad (single-tensor kernel: the same rounding as torch)."""

from __future__ import annotations

from ..engine.namespace import recorder_of
from .optimizer import Optimizer, _descend, _gradient, _state_like


def _fresh(B, shape, dtype, device, value) -> dict:
    """A parameter's state before its first step: the sum starts at ``value``."""
    return {"step": 0, "sum": B.full(shape, value, dtype=dtype, device=device)}


class Adagrad(Optimizer):
    """Adagrad (Duchi et al.), as torch.optim.Adagrad.

    ``clr = lr / (1 + (t-1)*lr_decay)``, ``s += g*g`` (``s`` starts at
    ``initial_accumulator_value``), ``p -= clr * g / (sqrt(s) + eps)``. The state
    is created with the optimizer, as torch does.
    """

    _traced_numbers = ("step",)  # read anew by each ad.jit replay (jit_state)

    def __init__(
        self,
        params,
        lr=1e-2,
        lr_decay=0,
        weight_decay=0,
        initial_accumulator_value=0,
        eps=1e-10,
        maximize=False,
    ):
        defaults = dict(
            lr=lr,
            lr_decay=lr_decay,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            eps=eps,
            maximize=maximize,
        )
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                rec = recorder_of(p)
                B = rec.backend
                shape, dtype = _state_like(rec, p)
                value = group["initial_accumulator_value"]
                self.state[p] = _fresh(B, shape, dtype, B.device_of(p.data), value)

    _nonnegative = ("lr_decay", "weight_decay", "initial_accumulator_value", "eps")

    def _update(self, p, g, group, state):
        B = recorder_of(p).backend
        d = p.data
        if not state:  # a group added after construction
            value = group["initial_accumulator_value"]
            state.update(_fresh(B, d.shape, d.dtype, B.device_of(d), value))
        g, d = _gradient(g, d, group)
        state["step"] += 1
        clr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
        s = state["sum"]
        s += g * g
        state["sum"] = s
        std = B.sqrt(s)
        std += group["eps"]
        return _descend(d, g, clr, std)
