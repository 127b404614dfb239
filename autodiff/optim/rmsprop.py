"""RMSprop, as torch.optim.RMSprop (single-tensor kernel: the same rounding as torch)."""

from __future__ import annotations

from .optimizer import Optimizer, _begin, _descend, _lerp, _square_avg


class RMSprop(Optimizer):
    """RMSprop (Hinton), as torch.optim.RMSprop.

    ``v = alpha*v + (1-alpha)*g*g``; centered: ``ga = lerp(ga, g, 1-alpha)``,
    ``avg = sqrt(v - ga*ga) + eps``, else ``avg = sqrt(v) + eps``; with momentum
    ``buf = momentum*buf + g/avg``, ``p -= lr*buf``, else ``p -= lr*g/avg``.
    """

    _traced_numbers = ("step",)  # read anew by each ad.jit replay (jit_state)

    def __init__(
        self,
        params,
        lr=1e-2,
        alpha=0.99,
        eps=1e-8,
        weight_decay=0,
        momentum=0,
        centered=False,
        maximize=False,
    ):
        defaults = dict(
            lr=lr,
            alpha=alpha,
            eps=eps,
            weight_decay=weight_decay,
            momentum=momentum,
            centered=centered,
            maximize=maximize,
        )
        super().__init__(params, defaults)

    _nonnegative = ("alpha", "eps", "weight_decay", "momentum")

    def _update(self, p, g, group, state):
        lr, alpha, momentum = group["lr"], group["alpha"], group["momentum"]
        names = ["square_avg"]
        if momentum > 0:
            names.append("momentum_buffer")
        if group["centered"]:
            names.append("grad_avg")
        B, g, d = _begin(p, g, group, state, names)
        state["step"] += 1
        v = state["square_avg"] = _square_avg(state["square_avg"], g, alpha)
        if group["centered"]:
            ga = state["grad_avg"] = _lerp(B, state["grad_avg"], g, 1 - alpha)
            avg = B.sqrt(v - ga * ga)
        else:
            avg = B.sqrt(v)
        avg = B.asarray(avg + group["eps"])
        if momentum > 0:
            buf = state["momentum_buffer"]
            buf *= momentum
            buf += g / avg
            state["momentum_buffer"] = buf
            d -= lr * buf
            return d
        return _descend(d, g, lr, avg)
