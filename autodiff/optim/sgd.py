"""SGD, as torch.optim.SGD (single-tensor kernel: the same rounding as torch)."""

from __future__ import annotations

from ..engine.namespace import recorder_of
from .optimizer import Optimizer, _gradient


class SGD(Optimizer):
    """Stochastic gradient descent with optional (Nesterov) momentum, as torch.optim.SGD.

    ``g = ±grad + wd*p``; ``buf = g`` on the first step, then
    ``buf = momentum*buf + (1-dampening)*g``; ``g = g + momentum*buf`` (Nesterov)
    or ``g = buf``; ``p -= lr*g``.
    """

    def __init__(
        self,
        params,
        lr=1e-3,
        momentum=0,
        dampening=0,
        weight_decay=0,
        nesterov=False,
        maximize=False,
    ):
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            maximize=maximize,
        )
        super().__init__(params, defaults)

    _nonnegative = ("momentum", "weight_decay")

    def _check_group(self, group):
        super()._check_group(group)
        m = group["momentum"]
        self._require(
            not group["nesterov"] or (m > 0 and group["dampening"] == 0),
            "nesterov momentum needs momentum > 0 and dampening = 0",
        )

    def _update(self, p, g, group, state):
        lr, momentum = group["lr"], group["momentum"]
        grad = g
        g, d = _gradient(g, p.data, group)
        own = g is not grad  # whether g is a temporary of ours (then it may be changed in place)
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = recorder_of(p).backend.asarray(g, copy=True)
            else:
                buf *= momentum
                damp = 1 - group["dampening"]
                buf += g if damp == 1 else damp * g
                state["momentum_buffer"] = buf
            if group["nesterov"]:
                t = buf * momentum
                t += g
                g, own = t, True
            else:
                g, own = buf, False
        if own:
            g *= lr
            d -= g
        else:
            d -= lr * g
        return d
