"""The Adam family, as torch.optim: Adam, AdamW, Adamax, NAdam, RAdam.

They share the opening of a step (maximize, weight decay) and the moment estimates
``m = lerp(m, g, 1-b1)``, ``v = b2*v + (1-b2)*g*g`` (:func:`_moments`); each keeps
the order of floating-point operations of torch's single-tensor kernel.
"""

from __future__ import annotations

from .optimizer import Optimizer, _begin, _descend, _lerp, _pair, _square_avg


def _moments(B, state, g, beta1, beta2):
    """Count the step and update the moment estimates in ``state``: returns (t, m, v)."""
    state["step"] += 1
    m = state["exp_avg"] = _lerp(B, state["exp_avg"], g, 1 - beta1)
    v = state["exp_avg_sq"] = _square_avg(state["exp_avg_sq"], g, beta2)
    return state["step"], m, v


class Adam(Optimizer):
    """Adam (Kingma & Ba), as torch.optim.Adam; ``weight_decay`` is L2 added to the gradient.

    ``m = lerp(m, g, 1-b1)``, ``v = b2*v + (1-b2)*g*g``,
    ``p -= (lr/(1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps)``; AMSGrad uses ``max(v)``.
    """

    _decoupled = False

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        amsgrad=False,
        maximize=False,
    ):
        defaults = dict(
            lr=lr,
            betas=_pair(betas),
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
        )
        super().__init__(params, defaults)

    _traced_numbers = ("step",)  # read anew by each ad.jit replay (jit_state)
    _nonnegative = ("eps", "weight_decay")

    def _update(self, p, g, group, state):
        names = ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if group["amsgrad"] else ())
        B, g, d = _begin(p, g, group, state, names, self._decoupled)
        lr, (beta1, beta2) = group["lr"], group["betas"]
        step, m, v = _moments(B, state, g, beta1, beta2)
        step_size = lr / (1 - beta1**step)
        bias_correction2_sqrt = (1 - beta2**step) ** 0.5
        if group["amsgrad"]:
            v = state["max_exp_avg_sq"] = B.asarray(B.maximum(state["max_exp_avg_sq"], v))
        denom = B.sqrt(v)
        denom /= bias_correction2_sqrt
        denom += group["eps"]
        return _descend(d, m, step_size, denom)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), as torch.optim.AdamW:
    ``p *= 1 - lr*weight_decay``, then the Adam step."""

    _decoupled = True

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=1e-2,
        amsgrad=False,
        maximize=False,
    ):
        super().__init__(
            params,
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
        )


class Adamax(Optimizer):
    """Adamax (Adam with the infinity norm), as torch.optim.Adamax.

    ``m = lerp(m, g, 1-b1)``, ``u = max(b2*u, |g| + eps)``,
    ``p -= (lr/(1-b1^t)) * m / u``.
    """

    def __init__(
        self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, maximize=False
    ):
        defaults = dict(
            lr=lr, betas=_pair(betas), eps=eps, weight_decay=weight_decay, maximize=maximize
        )
        super().__init__(params, defaults)

    _traced_numbers = ("step",)  # read anew by each ad.jit replay (jit_state)
    _nonnegative = ("eps", "weight_decay")

    def _update(self, p, g, group, state):
        B, g, d = _begin(p, g, group, state, ("exp_avg", "exp_inf"))
        beta1, beta2 = group["betas"]
        state["step"] += 1
        m = state["exp_avg"] = _lerp(B, state["exp_avg"], g, 1 - beta1)
        u = state["exp_inf"]
        u *= beta2
        t = B.abs(g)
        t += group["eps"]
        u = state["exp_inf"] = B.asarray(B.maximum(u, t))
        return _descend(d, m, group["lr"] / (1 - beta1 ** state["step"]), u)


class NAdam(Optimizer):
    """NAdam (Adam with Nesterov momentum, Dozat), as torch.optim.NAdam.

    ``mu_t = b1*(1 - 0.96^(t*momentum_decay)/2)``, ``P_t = prod mu``;
    ``m = lerp(m, g, 1-b1)``, ``v = b2*v + (1-b2)*g*g``,
    ``den = sqrt(v/(1-b2^t)) + eps``,
    ``p -= lr*(1-mu_t)/(1-P_t) * g/den + lr*mu_{t+1}/(1-P_t*mu_{t+1}) * m/den``.
    ``mu_product`` is a Python float (torch keeps it in the default dtype).
    """

    def __init__(
        self,
        params,
        lr=2e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        momentum_decay=4e-3,
        decoupled_weight_decay=False,
        maximize=False,
    ):
        defaults = dict(
            lr=lr,
            betas=_pair(betas),
            eps=eps,
            weight_decay=weight_decay,
            momentum_decay=momentum_decay,
            decoupled_weight_decay=decoupled_weight_decay,
            maximize=maximize,
        )
        super().__init__(params, defaults)

    _traced_numbers = ("step", "mu_product")  # read anew by each ad.jit replay (jit_state)
    _nonnegative = ("eps", "weight_decay", "momentum_decay")

    def _update(self, p, g, group, state):
        names = ("exp_avg", "exp_avg_sq")
        B, g, d = _begin(p, g, group, state, names, group["decoupled_weight_decay"])
        state.setdefault("mu_product", 1.0)
        lr, md, (beta1, beta2) = group["lr"], group["momentum_decay"], group["betas"]
        step, m, v = _moments(B, state, g, beta1, beta2)
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * md)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * md)))
        mu_product = state["mu_product"] = state["mu_product"] * mu
        denom = B.sqrt(v / (1 - beta2**step))
        denom = B.asarray(denom + group["eps"])
        d = _descend(d, g, lr * (1.0 - mu) / (1.0 - mu_product), denom)
        return _descend(d, m, (lr * mu_next) / (1.0 - mu_product * mu_next), denom)


class RAdam(Optimizer):
    """RAdam (rectified Adam, Liu et al.), as torch.optim.RAdam.

    ``m``, ``v`` as Adam; ``rho_inf = 2/(1-b2) - 1``,
    ``rho_t = rho_inf - 2t*b2^t/(1-b2^t)``; if ``rho_t > 5``:
    ``p -= lr * m/(1-b1^t) * sqrt(1-b2^t)/(sqrt(v)+eps) * r_t`` with
    ``r_t = sqrt((rho_t-4)(rho_t-2)rho_inf / ((rho_inf-4)(rho_inf-2)rho_t))``,
    else ``p -= lr * m/(1-b1^t)``.
    """

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        decoupled_weight_decay=False,
        maximize=False,
    ):
        defaults = dict(
            lr=lr,
            betas=_pair(betas),
            eps=eps,
            weight_decay=weight_decay,
            decoupled_weight_decay=decoupled_weight_decay,
            maximize=maximize,
        )
        super().__init__(params, defaults)

    # no _traced_numbers: its step count decides a branch (rho_t > 5) in Python, so a
    # step under ad.jit is traced again for each count
    _nonnegative = ("eps", "weight_decay")

    def _update(self, p, g, group, state):
        names = ("exp_avg", "exp_avg_sq")
        B, g, d = _begin(p, g, group, state, names, group["decoupled_weight_decay"])
        beta1, beta2 = group["betas"]
        step, m, v = _moments(B, state, g, beta1, beta2)
        bias_correction2 = 1 - beta2**step
        upd = m / (1 - beta1**step)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
        upd *= group["lr"]
        if rho_t > 5.0:
            rect = (
                (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
            ) ** 0.5
            den = B.sqrt(v)
            den += group["eps"]
            # torch's scalar / tensor is tensor.reciprocal() * scalar
            adaptive = B.asarray(1.0 / den)
            adaptive *= bias_correction2**0.5
            upd *= adaptive
            upd *= rect
        d -= upd
        return d
