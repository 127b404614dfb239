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
The schedules live in :mod:`autodiff._schedules` and are re-exported here.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers

from . import checks
from ._schedules import (
    CosineAnnealingLR,
    CosineAnnealingWarmRestarts,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    LRScheduler,
    MultiStepLR,
    OneCycleLR,
    ReduceLROnPlateau,
    SequentialLR,
    StepLR,
)
from .graph import bump, enable_grad
from .namespace import recorder_of
from .tensor import Tensor

__all__ = [
    "Optimizer",
    "SGD",
    "Adam",
    "AdamW",
    "RMSprop",
    "Adagrad",
    "Adamax",
    "NAdam",
    "RAdam",
    "LBFGS",
    "clip_grad_norm_",
    "clip_grad_value_",
    "LRScheduler",
    "StepLR",
    "MultiStepLR",
    "ExponentialLR",
    "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts",
    "LinearLR",
    "LambdaLR",
    "OneCycleLR",
    "SequentialLR",
    "ReduceLROnPlateau",
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

    _nonnegative: tuple = ()  # the hyper-parameters that must be >= 0 (besides lr)

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
        for key in self._nonnegative:
            checks.number(name, key, group[key], 0)
        for i, b in enumerate(group.get("betas", ())):
            checks.number(name, f"betas[{i}]", b, 0, 1, open_high=True)

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

    _nonnegative = ("momentum", "weight_decay")

    def _check_group(self, group):
        super()._check_group(group)
        m = group["momentum"]
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

    _nonnegative = ("eps", "weight_decay")

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


def _lerp(B, m, g, w):
    """``m.lerp_(g, w)`` with torch's two formulas (the small-weight one for w < 0.5)."""
    t = g - m
    if w < 0.5:
        t *= w
        m += t
        return m
    t *= 1 - w
    return B.asarray(g - t)  # numpy makes 0-d results scalars


def _pair(v):
    """A list or tuple as a tuple; anything else as given (the group check names it)."""
    return tuple(v) if isinstance(v, (list, tuple)) else v


def _l2(g, d, wd):
    """torch's ``grad.add(param, alpha=wd)``: a new array, the gradient left untouched."""
    return g + wd * d


class RMSprop(Optimizer):
    """RMSprop (Hinton), as torch.optim.RMSprop.

    ``v = alpha*v + (1-alpha)*g*g``; centered: ``ga = lerp(ga, g, 1-alpha)``,
    ``avg = sqrt(v - ga*ga) + eps``, else ``avg = sqrt(v) + eps``; with momentum
    ``buf = momentum*buf + g/avg``, ``p -= lr*buf``, else ``p -= lr*g/avg``.
    """

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
        B = recorder_of(p).backend
        d = p.data
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        momentum, wd = group["momentum"], group["weight_decay"]
        if not state:
            state["step"] = 0
            state["square_avg"] = B.zeros_like(d)
            if momentum > 0:
                state["momentum_buffer"] = B.zeros_like(d)
            if group["centered"]:
                state["grad_avg"] = B.zeros_like(d)
        if group["maximize"]:
            g = -g
        state["step"] += 1
        if wd != 0:
            g = _l2(g, d, wd)
        v = state["square_avg"]
        t = g * (1 - alpha)
        t *= g
        v *= alpha
        v += t
        if group["centered"]:
            ga = state["grad_avg"] = _lerp(B, state["grad_avg"], g, 1 - alpha)
            avg = B.sqrt(v - ga * ga)
        else:
            avg = B.sqrt(v)
        avg = B.asarray(avg + eps)
        if momentum > 0:
            buf = state["momentum_buffer"]
            buf *= momentum
            buf += g / avg
            d -= lr * buf
        else:
            t = g * lr
            t /= avg
            d -= t
        return d


class Adagrad(Optimizer):
    """Adagrad (Duchi et al.), as torch.optim.Adagrad.

    ``clr = lr / (1 + (t-1)*lr_decay)``, ``s += g*g`` (``s`` starts at
    ``initial_accumulator_value``), ``p -= clr * g / (sqrt(s) + eps)``. The state
    is created with the optimizer, as torch does.
    """

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
                shape, dtype = tuple(p.data.shape), p.data.dtype
                if rec.is_complex(dtype):  # (real, imaginary) pairs, as _complex_update
                    shape, dtype = shape + (2,), B.real(p.data).dtype
                self.state[p] = {
                    "step": 0,
                    "sum": B.full(
                        shape,
                        group["initial_accumulator_value"],
                        dtype=dtype,
                        device=B.device_of(p.data),
                    ),
                }

    _nonnegative = ("lr_decay", "weight_decay", "initial_accumulator_value", "eps")

    def _update(self, p, g, group, state):
        B = recorder_of(p).backend
        d = p.data
        if not state:  # a group added after construction
            state["step"] = 0
            state["sum"] = B.full(
                d.shape, group["initial_accumulator_value"], dtype=d.dtype, device=B.device_of(d)
            )
        state["step"] += 1
        step = state["step"]
        if group["maximize"]:
            g = -g
        if group["weight_decay"] != 0:
            g = _l2(g, d, group["weight_decay"])
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        s = state["sum"]
        s += g * g
        std = B.sqrt(s)
        std += group["eps"]
        t = g * clr
        t /= std
        d -= t
        return d


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

    _nonnegative = ("eps", "weight_decay")

    def _update(self, p, g, group, state):
        B = recorder_of(p).backend
        d = p.data
        beta1, beta2 = group["betas"]
        if not state:
            state["step"] = 0
            state["exp_avg"] = B.zeros_like(d)
            state["exp_inf"] = B.zeros_like(d)
        if group["maximize"]:
            g = -g
        state["step"] += 1
        if group["weight_decay"] != 0:
            g = _l2(g, d, group["weight_decay"])
        m = state["exp_avg"] = _lerp(B, state["exp_avg"], g, 1 - beta1)
        u = state["exp_inf"]
        u *= beta2
        t = B.abs(g)
        t += group["eps"]
        u = state["exp_inf"] = B.asarray(B.maximum(u, t))
        clr = group["lr"] / (1 - beta1 ** state["step"])
        t = m * clr
        t /= u
        d -= t
        return d


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

    _nonnegative = ("eps", "weight_decay", "momentum_decay")

    def _update(self, p, g, group, state):
        B = recorder_of(p).backend
        d = p.data
        lr, wd, md = group["lr"], group["weight_decay"], group["momentum_decay"]
        beta1, beta2 = group["betas"]
        if not state:
            state["step"] = 0
            state["mu_product"] = 1.0
            state["exp_avg"] = B.zeros_like(d)
            state["exp_avg_sq"] = B.zeros_like(d)
        if group["maximize"]:
            g = -g
        state["step"] += 1
        step = state["step"]
        bias_correction2 = 1 - beta2**step
        if wd != 0:
            if group["decoupled_weight_decay"]:
                d *= 1 - lr * wd
            else:
                g = _l2(g, d, wd)
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * md)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * md)))
        mu_product = state["mu_product"] = state["mu_product"] * mu
        m = state["exp_avg"] = _lerp(B, state["exp_avg"], g, 1 - beta1)
        v = state["exp_avg_sq"]
        t = g * (1 - beta2)
        t *= g
        v *= beta2
        v += t
        denom = B.sqrt(v / bias_correction2)
        denom = B.asarray(denom + group["eps"])
        mu_product_next = mu_product * mu_next
        t = g * (lr * (1.0 - mu) / (1.0 - mu_product))
        t /= denom
        d -= t
        t = m * ((lr * mu_next) / (1.0 - mu_product_next))
        t /= denom
        d -= t
        return d


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

    _nonnegative = ("eps", "weight_decay")

    def _update(self, p, g, group, state):
        B = recorder_of(p).backend
        d = p.data
        lr, wd = group["lr"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        if not state:
            state["step"] = 0
            state["exp_avg"] = B.zeros_like(d)
            state["exp_avg_sq"] = B.zeros_like(d)
        if group["maximize"]:
            g = -g
        state["step"] += 1
        step = state["step"]
        if wd != 0:
            if group["decoupled_weight_decay"]:
                d *= 1 - lr * wd
            else:
                g = _l2(g, d, wd)
        m = state["exp_avg"] = _lerp(B, state["exp_avg"], g, 1 - beta1)
        v = state["exp_avg_sq"]
        t = g * (1 - beta2)
        t *= g
        v *= beta2
        v += t
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        upd = m / bias_correction1
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
        upd *= lr
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


def clip_grad_value_(parameters, clip_value):
    """Clamp every gradient in place to ``[-clip_value, clip_value]``, as torch.

    ``g = clip(g, -clip_value, clip_value)``; parameters without a gradient are skipped.
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    params = list(parameters)
    clip_value = float(checks.number("clip_grad_value_", "clip_value", clip_value, 0))
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(
                f"clip_grad_value_: parameters must be Tensors, got a {type(p).__name__}"
            )
    for p in params:
        if p.grad is None:
            continue
        B = recorder_of(p).backend
        g = p.grad.data
        g[...] = B.clip(g, -clip_value, clip_value)
        bump(p.grad)


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimizer of the cubic through (x1, f1, g1), (x2, f2, g2), clamped to bounds."""
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square >= 0:
        d2 = math.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def _strong_wolfe(dot, amax, obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9,
                  tolerance_change=1e-9, max_ls=25):  # fmt: skip
    """torch's line search (bracketing, then cubic zoom) for the strong Wolfe conditions."""
    d_norm = amax(d)
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = dot(g_new, d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(
            t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step)
        )
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new, gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = dot(g_new, d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(
            bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1]
        )
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = dot(g_new, d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos] = t
            bracket_f[high_pos] = f_new
            bracket_g[high_pos] = g_new
            bracket_gtd[high_pos] = gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos] = bracket[low_pos]
                bracket_f[high_pos] = bracket_f[low_pos]
                bracket_g[high_pos] = bracket_g[low_pos]
                bracket_gtd[high_pos] = bracket_gtd[low_pos]
            bracket[low_pos] = t
            bracket_f[low_pos] = f_new
            bracket_g[low_pos] = g_new
            bracket_gtd[low_pos] = gtd_new
    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals


class LBFGS(Optimizer):
    """L-BFGS (limited-memory BFGS), as torch.optim.LBFGS.

    ``step(closure)`` runs up to ``max_iter`` iterations, re-evaluating the loss
    through the closure.
    The direction is ``d = -H g`` by the two-loop recursion over the last
    ``history_size`` pairs ``s = t*d``, ``y = g_new - g`` (kept when ``y.s > 1e-10``),
    ``H0 = (y.s)/(y.y)``; the step is ``t = lr`` (the first one
    ``min(1, 1/|g|_1)*lr``), or found by the strong-Wolfe line search
    (``line_search_fn="strong_wolfe"``). All parameters form one flat vector (complex
    ones as (real, imaginary) pairs), so there is a single parameter group.
    """

    def __init__(
        self,
        params,
        lr=1,
        max_iter=20,
        max_eval=None,
        tolerance_grad=1e-7,
        tolerance_change=1e-9,
        history_size=100,
        line_search_fn=None,
    ):
        checks.integer("LBFGS", "max_iter", max_iter, 1)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(
            lr=lr,
            max_iter=max_iter,
            max_eval=max_eval,
            tolerance_grad=tolerance_grad,
            tolerance_change=tolerance_change,
            history_size=history_size,
            line_search_fn=line_search_fn,
        )
        super().__init__(params, defaults)
        self._params = self.param_groups[0]["params"]

    def add_param_group(self, param_group):
        if self.param_groups:
            raise ValueError("LBFGS: doesn't support parameter groups (per-parameter options)")
        super().add_param_group(param_group)

    def _check_group(self, group):
        name = self._name
        checks.number(name, "lr", group["lr"], 0)
        checks.integer(name, "max_iter", group["max_iter"], 1)
        checks.integer(name, "max_eval", group["max_eval"], 1)
        checks.number(name, "tolerance_grad", group["tolerance_grad"], 0)
        checks.number(name, "tolerance_change", group["tolerance_change"], 0)
        checks.integer(name, "history_size", group["history_size"], 1)
        checks.choice(name, "line_search_fn", group["line_search_fn"], (None, "strong_wolfe"))

    # -- the flat vector -------------------------------------------------------
    def _backend(self):
        return recorder_of(self._params[0]).backend

    def _flat_parts(self, rec, a):
        B = rec.backend
        if rec.is_complex(a.dtype):
            a = B.stack([B.real(a), B.imag(a)], axis=-1)
        return B.reshape(a, (-1,))

    def _gather_flat_grad(self):
        views = []
        for p in self._params:
            rec = recorder_of(p)
            B = rec.backend
            if p.grad is None:
                views.append(B.reshape(B.zeros_like(self._flat_parts(rec, p.data)), (-1,)))
            else:
                views.append(self._flat_parts(rec, p.grad.data))
        return self._backend().concat(views, axis=0)

    def _write(self, p, new):
        """Put the flat values ``new`` (pairs for a complex p) into p's buffer."""
        rec = recorder_of(p)
        B = rec.backend
        if rec.is_complex(p.data.dtype):
            new = B.reshape(new, tuple(p.data.shape) + (2,))
            dt = p.data.dtype
            new = B.astype(new[..., 0], dt) + B.astype(new[..., 1], dt) * 1j
        else:
            new = B.reshape(new, tuple(p.data.shape))
        try:
            p.data[...] = new
        except (TypeError, ValueError):  # an immutable backend: rebind
            p.data = new
        bump(p)

    def _add_grad(self, step_size, update):
        offset = 0
        for p in self._params:
            rec = recorder_of(p)
            flat = self._flat_parts(rec, p.data)
            n = flat.shape[0]
            self._write(p, flat + step_size * update[offset : offset + n])
            offset += n

    def _clone_param(self):
        return [self._flat_parts(recorder_of(p), recorder_of(p).backend.asarray(p.data, copy=True))
                for p in self._params]  # fmt: skip

    def _set_param(self, params_data):
        for p, x in zip(self._params, params_data):
            self._write(p, x)

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    def step(self, closure):
        """Up to ``max_iter`` L-BFGS iterations; ``closure`` zeroes the gradients,
        computes the loss, calls ``backward`` and returns the loss. Returns the loss
        of the first evaluation."""
        checks.function("LBFGS.step", "closure", closure)
        B = self._backend()

        def evaluate():
            with enable_grad():
                return closure()

        def dot(a, b):
            return float(B.sum(a * b))

        def amax(a):
            return float(B.max(B.abs(a)))

        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        state = self.state.setdefault(self._params[0], {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = evaluate()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if amax(flat_grad) <= tolerance_grad:
            return orig_loss
        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag = state.get("H_diag")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = dot(y, s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / dot(y, y)
                num_old = len(old_dirs)
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                q = -flat_grad
                for i in range(num_old - 1, -1, -1):
                    al[i] = dot(old_stps[i], q) * ro[i]
                    q = q + (-al[i]) * old_dirs[i]
                r = q * H_diag
                for i in range(num_old):
                    be_i = dot(old_dirs[i], r) * ro[i]
                    r = r + (al[i] - be_i) * old_stps[i]
                d = r
            prev_flat_grad = B.asarray(flat_grad, copy=True)
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(B.sum(B.abs(flat_grad)))) * lr
            else:
                t = lr
            gtd = dot(flat_grad, d)
            if gtd > -tolerance_change:
                break
            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = self._clone_param()

                def obj_func(x, t, d):
                    return self._directional_evaluate(evaluate, x, t, d)

                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    dot, amax, obj_func, x_init, t, d, loss, flat_grad, gtd,
                    max_ls=max_eval - current_evals,
                )  # fmt: skip
                self._add_grad(t, d)
                opt_cond = amax(flat_grad) <= tolerance_grad
            else:
                self._add_grad(t, d)
                if n_iter != max_iter:
                    loss = float(evaluate())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = amax(flat_grad) <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if amax(d * t) <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break
        state.update(
            d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
            prev_flat_grad=prev_flat_grad, prev_loss=prev_loss,
        )  # fmt: skip
        return orig_loss

    def state_dict(self):
        """As torch: the state of the first parameter holds the whole history (flat
        arrays and lists of them, copied)."""
        sd = super().state_dict()
        B = self._backend()
        for s in sd["state"].values():
            for k, v in s.items():
                if isinstance(v, list):
                    s[k] = [B.asarray(a, copy=True) if _is_array(a) else a for a in v]
        return sd

    def load_state_dict(self, state_dict):
        """Restore a :meth:`state_dict` (arrays copied onto the parameters' namespace)."""
        name = "LBFGS.load_state_dict"
        if not isinstance(state_dict, dict) or not {"state", "param_groups"} <= set(state_dict):
            raise ValueError(f"{name}: expected a dict with 'state' and 'param_groups'")
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self._params):
            raise ValueError(f"{name}: expected one group of {len(self._params)} parameters")
        saved = {k: v for k, v in groups[0].items() if k != "params"}
        self._check_group({**self.defaults, **saved})
        B = self._backend()
        p0 = self._params[0].data
        dev = B.device_of(p0)

        def conv(v):
            if _is_array(v):
                return B.asarray(v, dtype=B.real(p0).dtype, device=dev, copy=True)
            if isinstance(v, list):
                return [conv(a) for a in v]
            return v

        index = dict(zip(groups[0]["params"], self._params))
        state = {}
        for idx, entry in state_dict["state"].items():
            if idx not in index:
                raise ValueError(f"{name}: state of parameter {idx}, which no group lists")
            state[index[idx]] = {k: conv(v) for k, v in entry.items()}
        self.state = state
        self.param_groups = [{**saved, "params": self._params}]


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
