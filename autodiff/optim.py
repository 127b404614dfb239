"""Optimizers and learning-rate schedules with torch.optim's signatures and update rules.

>>> import numpy as np, autodiff as ad
>>> from autodiff.optim import Adam
>>> xp = ad.Autodiff(np)
>>> w = xp.asarray(np.ones(3), requires_grad=True)
>>> opt = Adam([w], lr=1e-2)
>>> opt.zero_grad(); xp.sum(w * w).backward(); opt.step()

Parameters are updated in place, on their own buffer: the user keeps the same
Tensor objects (and, on NumPy, the same ``ndarray``). All arithmetic is done on
the raw arrays of the backend with functions of the Array API standard, so the
optimizers run unchanged on NumPy, CuPy and array-api-strict, and the state
(momentum buffers, moment estimates) lives on the parameter's device with its
dtype. No graph is ever recorded; each write bumps the parameter's version
counter, so a graph that saved the old value refuses to run backward instead of
giving a silently wrong gradient.

The order of floating-point operations follows torch's single-tensor
(``foreach=False``) kernels, so trajectories agree with torch to rounding.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import types

from . import checks
from .graph import bump, enable_grad
from .namespace import recorder_of
from .tensor import Tensor

__all__ = [
    "Optimizer",
    "SGD",
    "Adam",
    "AdamW",
    "clip_grad_norm_",
    "LRScheduler",
    "StepLR",
    "CosineAnnealingLR",
    "LinearLR",
    "LambdaLR",
]


def _is_array(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, numbers.Number)


@functools.cache
def _templates(cls) -> dict:
    """The keyword defaults of an optimizer's constructor: what each hyper-parameter's
    type must be (a number, a bool, a pair of numbers)."""
    return {
        k: p.default
        for k, p in inspect.signature(cls.__init__).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


class Optimizer:
    """Base class: parameter groups, per-parameter state, ``zero_grad``, ``state_dict``.

    ``params`` is an iterable of Tensors, or of dicts (parameter groups) with a
    ``"params"`` entry and per-group values overriding ``defaults``.
    """

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        self.state: dict = {}  # parameter Tensor -> {name: raw array or number}
        self.param_groups: list[dict] = []
        if isinstance(params, (Tensor, dict)):
            raise TypeError(
                f"{self._name}: params must be an iterable of Tensors or of dicts "
                f"(parameter groups), got a single {type(params).__name__}"
            )
        groups = list(params)
        if not groups:
            raise ValueError(f"{self._name}: got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    @property
    def _name(self) -> str:
        return type(self).__name__

    def __repr__(self):
        lines = [f"{self._name} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(k for k in group if k != "params"):
                lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)

    # -- parameter groups ------------------------------------------------------
    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters (a dict with ``"params"``; missing values from defaults)."""
        name = self._name
        if not isinstance(param_group, dict):
            raise TypeError(
                f"{name}: a parameter group must be a dict, got {type(param_group).__name__}"
            )
        if "params" not in param_group:
            raise ValueError(f"{name}: a parameter group needs a 'params' entry")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            # A set has no stable order, so state_dict indices would not match.
            raise TypeError(f"{name}: parameters must be an ordered collection, not a set")
        params = list(params)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        mine: set = set()
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"{name}: parameter {i} of the group is a {type(p).__name__}, "
                    "not an autodiff Tensor"
                )
            if not p.is_leaf:
                raise ValueError(
                    f"{name}: parameter {i} of the group is not a leaf (it was computed "
                    "from other tensors); optimize the leaf, or use .detach()"
                )
            if not p.requires_grad:
                raise ValueError(
                    f"{name}: parameter {i} of the group does not require grad; "
                    "create it with requires_grad=True"
                )
            if id(p) in mine:
                raise ValueError(f"{name}: parameter {i} appears twice in the group")
            if id(p) in seen:
                raise ValueError(
                    f"{name}: parameter {i} of the group is already in another parameter group"
                )
            mine.add(id(p))
        group = {k: v for k, v in param_group.items() if k != "params"}
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        self._check_group(group)
        group["params"] = params
        self.param_groups.append(group)

    def _check_group(self, group: dict) -> None:
        """Raise TypeError for a hyper-parameter of the wrong type (a number given as a
        string...), then ValueError for an invalid value (subclasses extend)."""
        name = self._name
        for key, default in _templates(type(self)).items():
            if key not in group:
                continue
            value = group[key]
            if isinstance(default, bool):
                if not (isinstance(value, numbers.Integral) and value in (0, 1)):  # as torch
                    checks.flag(name, key, value)
            elif isinstance(default, numbers.Real):
                checks.number(name, key, value)
            elif isinstance(default, tuple):
                if not isinstance(value, (tuple, list)) or len(value) != len(default):
                    raise TypeError(
                        f"{name}: {key} must be a pair of numbers, got {value!r} "
                        f"({type(value).__name__})"
                    )
                for i, v in enumerate(value):
                    checks.number(name, f"{key}[{i}]", v)
            # None and other defaults: checked where they are used
        checks.number(name, "lr", group["lr"], 0)

    def _require(self, ok, message: str) -> None:
        if not ok:
            raise ValueError(f"{self._name}: {message}")

    # -- stepping --------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients: to None (default), or to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                elif g.is_leaf:
                    g.data[...] = 0  # in place: code holding the grad buffer sees zeros
                    bump(g)
                else:  # a grad with history (create_graph=True): cut it, as torch does
                    rec = recorder_of(p)
                    p.grad = rec.wrap(rec.backend.zeros_like(g.data))

    def step(self, closure=None):
        """One update of every parameter that has a gradient (others are skipped).

        ``closure`` (optional) re-evaluates the model and returns the loss; it is
        called with grad recording on and its value returned.
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad.data
                if g.shape != p.data.shape:
                    raise ValueError(
                        f"{self._name}: a gradient has shape {g.shape}, its parameter "
                        f"has shape {p.data.shape}"
                    )
                # The update returns the new buffer: the same object wherever the
                # backend has in-place operators, a new one where arrays are immutable.
                state = self.state.setdefault(p, {})
                rec = recorder_of(p)
                if rec.is_complex(p.data.dtype):
                    p.data = self._complex_update(rec, p, g, group, state)
                else:
                    p.data = self._update(p, g, group, state)
                bump(p)
        return loss

    def _complex_update(self, rec, p, g, group, state):
        """A complex parameter is updated as the pairs (real, imaginary) of its values,
        as torch does (``view_as_real``): Adam's moments are per part, not |g|^2. Its
        state holds those pairs (shape + (2,))."""
        B = rec.backend

        def pairs(a):
            return B.stack([B.real(a), B.imag(a)], axis=-1)

        new = self._update(rec.wrap(pairs(p.data)), pairs(g), group, state)
        z = B.astype(new[..., 0], p.data.dtype) + B.astype(new[..., 1], p.data.dtype) * 1j
        if B.is_array(p.data) and hasattr(p.data, "__setitem__"):
            try:
                p.data[...] = z  # the same buffer, where the backend writes in place
                return p.data
            except (TypeError, ValueError):
                pass
        return z

    def _update(self, p, g, group, state):  # pragma: no cover - abstract
        """Update ``p.data`` from the raw gradient ``g``; return the new buffer."""
        raise NotImplementedError

    # -- checkpoints -----------------------------------------------------------
    def state_dict(self) -> dict:
        """A snapshot in torch's layout: ``{"state": {index: {...}}, "param_groups": [...]}``.

        Parameters are numbered in group order; arrays are copies (later steps
        do not change a saved state dict).
        """
        index: dict = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = []
            for p in group["params"]:
                index[id(p)] = len(index)
                packed["params"].append(index[id(p)])
            groups.append(packed)
        state = {}
        for p, s in self.state.items():
            if id(p) in index and s:
                B = recorder_of(p).backend
                state[index[id(p)]] = {
                    k: (B.asarray(v, copy=True) if _is_array(v) else v) for k, v in s.items()
                }
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a :meth:`state_dict` (checked first; arrays copied onto each
        parameter's namespace, device and dtype). Nothing changes if it is invalid."""
        name = f"{self._name}.load_state_dict"
        if not isinstance(state_dict, dict) or not {"state", "param_groups"} <= set(state_dict):
            raise ValueError(f"{name}: expected a dict with 'state' and 'param_groups'")
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"{name}: the state dict has {len(saved_groups)} parameter groups, "
                f"the optimizer has {len(self.param_groups)}"
            )
        by_index = {}
        for i, (saved, group) in enumerate(zip(saved_groups, self.param_groups)):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(
                    f"{name}: parameter group {i} has {len(saved['params'])} parameters in "
                    f"the state dict and {len(group['params'])} in the optimizer"
                )
            by_index.update(zip(saved["params"], group["params"]))
        new_state = {}
        for idx, entry in state_dict["state"].items():
            p = by_index.get(idx)
            if p is None:
                raise ValueError(f"{name}: state of parameter {idx}, which no group lists")
            rec = recorder_of(p)
            B = rec.backend
            device = B.device_of(p.data)
            shape, dtype = tuple(p.data.shape), p.data.dtype
            if rec.is_complex(dtype):  # kept as (real, imaginary) pairs: _complex_update
                shape, dtype = shape + (2,), B.real(p.data).dtype
            restored = {}
            for key, value in entry.items():
                if _is_array(value):
                    if tuple(value.shape) != shape:
                        raise ValueError(
                            f"{name}: state '{key}' of parameter {idx} has shape "
                            f"{tuple(value.shape)}, the parameter's state has {shape}"
                        )
                    value = B.asarray(value, dtype=dtype, device=device, copy=True)
                restored[key] = value
            new_state[p] = restored
        new_groups = []
        for saved, group in zip(saved_groups, self.param_groups):
            new = {k: v for k, v in saved.items() if k != "params"}
            self._check_group({**self.defaults, **new})
            new["params"] = group["params"]
            new_groups.append(new)
        self.state = new_state
        self.param_groups = new_groups


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

    def _check_group(self, group):
        super()._check_group(group)
        m = checks.number(self._name, "momentum", group["momentum"], 0)
        checks.number(self._name, "weight_decay", group["weight_decay"], 0)
        self._require(
            not group["nesterov"] or (m > 0 and group["dampening"] == 0),
            "nesterov momentum needs momentum > 0 and dampening = 0",
        )

    def _update(self, p, g, group, state):
        d = p.data
        lr, wd, momentum = group["lr"], group["weight_decay"], group["momentum"]
        own = False  # whether g is a temporary of ours (then it may be changed in place)
        if wd != 0:
            # torch: (±grad) + wd*p; addition is commutative, so wd*p ± grad rounds the same.
            t = d * wd
            if group["maximize"]:
                t -= g
            else:
                t += g
            g, own = t, True
        elif group["maximize"]:
            g, own = -g, True
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
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
        )
        super().__init__(params, defaults)

    def _check_group(self, group):
        super()._check_group(group)
        for i, b in enumerate(group["betas"]):
            checks.number(self._name, f"betas[{i}]", b, 0, 1, open_high=True)
        checks.number(self._name, "eps", group["eps"], 0)
        checks.number(self._name, "weight_decay", group["weight_decay"], 0)

    def _update(self, p, g, group, state):
        B = recorder_of(p).backend
        d = p.data
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        if not state:
            state["step"] = 0
            state["exp_avg"] = B.zeros_like(d)
            state["exp_avg_sq"] = B.zeros_like(d)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = B.zeros_like(d)
        if group["maximize"]:
            g = -g
        if wd != 0:
            if self._decoupled:
                d *= 1 - lr * wd
            else:
                g = g + wd * d
        state["step"] += 1
        step = state["step"]
        m, v = state["exp_avg"], state["exp_avg_sq"]
        # m.lerp_(g, w) with torch's two formulas (the small-weight one for w < 0.5).
        w = 1 - beta1
        t = g - m
        if w < 0.5:
            t *= w
            m += t
        else:
            t *= 1 - w
            m = B.asarray(g - t)  # numpy makes 0-d results scalars
        state["exp_avg"] = m
        # v.mul_(b2).addcmul_(g, g, value=1-b2): v*b2 + ((1-b2)*g)*g
        t = g * (1 - beta2)
        t *= g
        v *= beta2
        v += t
        state["exp_avg_sq"] = v
        step_size = lr / (1 - beta1**step)
        bias_correction2_sqrt = (1 - beta2**step) ** 0.5
        if group["amsgrad"]:
            v = state["max_exp_avg_sq"] = B.asarray(B.maximum(state["max_exp_avg_sq"], v))
        denom = B.sqrt(v)
        denom /= bias_correction2_sqrt
        denom += eps
        # p.addcdiv_(m, denom, value=-step_size): p + (-step_size*m)/denom
        t = m * step_size
        t /= denom
        d -= t
        return d


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


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale the gradients in place so that their joint norm is at most ``max_norm``.

    ``total = ||(||g_1||, ..., ||g_n||)||``; each ``g *= min(max_norm/(total+1e-6), 1)``.
    Returns ``total`` as a 0-d Tensor without history. The coefficient stays an
    array (no read back to the host), so the gradients are always multiplied.
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    params = list(parameters)
    if not params:
        raise ValueError("clip_grad_norm_: got no parameters")
    checks.number("clip_grad_norm_", "max_norm", max_norm, 0)
    if norm_type in ("inf", "-inf"):  # torch takes these spellings too
        norm_type = float(norm_type)
    norm_type = checks.number("clip_grad_norm_", "norm_type", norm_type)
    checks.flag("clip_grad_norm_", "error_if_nonfinite", error_if_nonfinite)
    if not all(isinstance(p, Tensor) for p in params):
        bad = next(type(p).__name__ for p in params if not isinstance(p, Tensor))
        raise TypeError(f"clip_grad_norm_: parameters must be Tensors, got a {bad}")
    norm_type = float(norm_type)
    grads = [p.grad for p in params if p.grad is not None]
    rec = recorder_of(params[0])
    B = rec.backend
    if not grads:
        p = params[0].data
        return rec.wrap(B.zeros((), dtype=p.dtype, device=B.device_of(p)))
    norms = [B.asarray(B.linalg.vector_norm(g.data, ord=norm_type)) for g in grads]
    total = B.linalg.vector_norm(B.stack(norms), ord=norm_type)
    total = B.asarray(total)  # numpy gives a scalar for a 0-d result
    if error_if_nonfinite and not bool(B.all(B.isfinite(total))):
        raise RuntimeError(
            f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
            "non-finite, so it can't be clipped; pass error_if_nonfinite=False to skip the check"
        )
    coef = B.minimum(B.asarray(max_norm / (total + 1e-6)), 1.0)
    for g in grads:
        c = coef if coef.dtype == g.data.dtype else B.astype(coef, g.data.dtype)
        g.data *= c
        bump(g)
    return rec.wrap(total)


# -- learning-rate schedules ---------------------------------------------------
class LRScheduler:
    """Base of the schedules (torch.optim.lr_scheduler semantics).

    Construction records ``initial_lr`` in each group and takes the first step
    (``last_epoch`` becomes 0); call :meth:`step` after each ``optimizer.step()``.
    """

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(
                f"{type(self).__name__}: {type(optimizer).__name__} is not an Optimizer"
            )
        checks.integer(type(self).__name__, "last_epoch", last_epoch, -1)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"{type(self).__name__}: param_groups[{i}] has no 'initial_lr'; "
                        "resuming with last_epoch >= 0 needs the optimizer's state restored"
                    )
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list:
        """The learning rates at ``last_epoch`` (torch's chainable, recursive form)."""
        raise NotImplementedError

    def get_last_lr(self) -> list:
        """The learning rates set by the last :meth:`step`."""
        return self._last_lr

    def step(self) -> None:
        """Advance one epoch and write the new learning rates into the optimizer."""
        self._step_count += 1
        self.last_epoch += 1
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        """Every attribute but the optimizer."""
        return {k: v for k, v in vars(self).items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)


class StepLR(LRScheduler):
    """``lr = base_lr * gamma ** (epoch // step_size)``."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        checks.integer("StepLR", "step_size", step_size, 1)
        checks.number("StepLR", "gamma", gamma, 0)
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [g["lr"] for g in groups]
        return [g["lr"] * self.gamma for g in groups]


class CosineAnnealingLR(LRScheduler):
    """``lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2``,
    computed with torch's recursive update (so it also follows lr changed by hand)."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        checks.integer("CosineAnnealingLR", "T_max", T_max, 1)
        checks.number("CosineAnnealingLR", "eta_min", eta_min, 0)
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        e, T, lo = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return [g["lr"] for g in groups]
        if self._step_count == 1 and e > 0:
            return [lo + (b - lo) * (1 + math.cos(e * math.pi / T)) / 2 for b in self.base_lrs]
        if (e - 1 - T) % (2 * T) == 0:
            # The previous lr is at the minimum, where the ratio below is 0/0.
            return [
                g["lr"] + (b - lo) * (1 - math.cos(math.pi / T)) / 2
                for b, g in zip(self.base_lrs, groups)
            ]
        ratio = (1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T))
        return [ratio * (g["lr"] - lo) + lo for g in groups]


class LinearLR(LRScheduler):
    """Linear warm-up: the factor goes from ``start_factor`` to ``end_factor`` over
    ``total_iters`` steps, then stays."""

    def __init__(
        self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1
    ):
        checks.number("LinearLR", "start_factor", start_factor, 0, 1, open_low=True)
        checks.number("LinearLR", "end_factor", end_factor, 0, 1)
        checks.integer("LinearLR", "total_iters", total_iters, 0)
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
        if e == 0:
            return [g["lr"] * s for g in groups]
        if self._is_initial or e > n:
            return [g["lr"] for g in groups]
        # ratio of consecutive factors: (s + (f-s)*e/n) / (s + (f-s)*(e-1)/n)
        return [g["lr"] * (1.0 + (f - s) / (n * s + (e - 1) * (f - s))) for g in groups]


class LambdaLR(LRScheduler):
    """``lr = base_lr * lr_lambda(epoch)``; one function, or one per parameter group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"LambdaLR: expected {n} lr_lambdas, got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        for f in self.lr_lambdas:
            checks.function("LambdaLR", "lr_lambda", f)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [b * f(self.last_epoch) for f, b in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self):
        """As the base, with the functions left out (the state of callable objects kept)."""
        sd = {k: v for k, v in vars(self).items() if k not in ("optimizer", "lr_lambdas")}
        sd["lr_lambdas"] = [
            None
            if isinstance(f, types.FunctionType) or not hasattr(f, "__dict__")
            else dict(vars(f))
            for f in self.lr_lambdas
        ]
        return sd

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        lambdas = state_dict.pop("lr_lambdas", [None] * len(self.lr_lambdas))
        self.__dict__.update(state_dict)
        for f, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                f.__dict__.update(saved)
