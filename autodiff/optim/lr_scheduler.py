"""Learning-rate schedules with torch.optim.lr_scheduler's signatures and sequences.

Torch's path (``autodiff.optim.lr_scheduler.StepLR``), re-exported by
:mod:`autodiff.optim` (``autodiff.optim.StepLR``...). A schedule only
reads and writes the optimizer's ``param_groups`` (plain Python numbers), so this
module imports nothing of the optimizers: an optimizer is anything with
``param_groups`` and ``step``. The recursive (chainable) forms follow torch's, so the
lr sequences agree with torch's to rounding.
"""

from __future__ import annotations

import bisect
import math
import types
from collections import Counter

from .. import checks


def _check_optimizer(owner, optimizer) -> None:
    groups = getattr(optimizer, "param_groups", None)
    if not isinstance(groups, list) or not callable(getattr(optimizer, "step", None)):
        raise TypeError(
            f"{owner}: optimizer must be an Optimizer, got {type(optimizer).__name__} "
            "(it is not an Optimizer)"
        )


def _per_group(owner, name, value, optimizer, low=None, high=None) -> list:
    """One number per parameter group: a number for all, or a list/tuple of them."""
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{owner}: expected {n} values of {name}, got {len(value)}")
        return [checks.number(owner, f"{name}[{i}]", v, low, high) for i, v in enumerate(value)]
    return [checks.number(owner, name, value, low, high)] * n


class LRScheduler:
    """Base of the schedules (torch.optim.lr_scheduler semantics).

    Construction records ``initial_lr`` in each group and takes the first step
    (``last_epoch`` becomes 0); call :meth:`step` after each ``optimizer.step()``.
    """

    def __init__(self, optimizer, last_epoch: int = -1):
        _check_optimizer(type(self).__name__, optimizer)
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
        self._initial_step()

    def _initial_step(self) -> None:
        """Reset the step count and take the first step (as torch; SequentialLR calls it)."""
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
        self._update_lr()

    def _update_lr(self, epoch=None) -> None:
        """Set the lrs at the next epoch, or at ``epoch`` (closed form where there is one)."""
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed = getattr(self, "_get_closed_form_lr", None)
            values = closed() if closed is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        """Every attribute but the optimizer."""
        return {k: v for k, v in vars(self).items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a :meth:`state_dict`: its keys must be this schedule's attributes;
        nothing changes if it is invalid."""
        name = f"{type(self).__name__}.load_state_dict"
        if not isinstance(state_dict, dict):
            raise TypeError(f"{name}: expected a dict, got {type(state_dict).__name__}")
        own = self.state_dict()
        unknown = [k for k in state_dict if k not in own]
        if unknown:
            raise ValueError(
                f"{name}: keys {unknown} are no state of a {type(self).__name__} "
                f"(expected some of {sorted(own)})"
            )
        touched = [self, *getattr(self, "_schedulers", ())]
        before = [dict(vars(x)) for x in touched]
        try:
            self._load(dict(state_dict))
        except Exception:
            for x, attrs in zip(touched, before):  # an error changes nothing
                x.__dict__.clear()
                x.__dict__.update(attrs)
            raise

    def _load(self, state_dict: dict) -> None:
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

    def _get_closed_form_lr(self):
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


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

    def _get_closed_form_lr(self):
        e, T, lo = self.last_epoch, self.T_max, self.eta_min
        return [lo + (b - lo) * (1 + math.cos(math.pi * e / T)) / 2 for b in self.base_lrs]


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

    def _get_closed_form_lr(self):
        e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
        return [b * (s + (f - s) * min(n, e) / n) for b in self.base_lrs]


class LambdaLR(LRScheduler):
    """``lr = base_lr * lr_lambda(epoch)``; one function, or one per parameter group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        _check_optimizer("LambdaLR", optimizer)
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

    def _load(self, state_dict):
        lambdas = state_dict.pop("lr_lambdas", [None] * len(self.lr_lambdas))
        if (
            not isinstance(lambdas, list)
            or len(lambdas) != len(self.lr_lambdas)
            or any(not (saved is None or isinstance(saved, dict)) for saved in lambdas)
        ):
            raise ValueError(
                f"LambdaLR.load_state_dict: lr_lambdas must be a list of {len(self.lr_lambdas)} "
                f"dicts or None (the state of callable objects), got {lambdas!r}"
            )
        self.__dict__.update(state_dict)
        for f, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                f.__dict__.update(saved)


class MultiStepLR(LRScheduler):
    """``lr = base_lr * gamma ** (number of milestones <= epoch)`` (a milestone listed
    twice counts twice)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        if isinstance(milestones, (str, bytes)) or not hasattr(milestones, "__iter__"):
            raise TypeError(f"MultiStepLR: milestones must be a list of ints, got {milestones!r}")
        milestones = list(milestones)
        for i, m in enumerate(milestones):
            checks.integer("MultiStepLR", f"milestones[{i}]", m, 0)
        checks.number("MultiStepLR", "gamma", gamma, 0)
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch not in self.milestones:
            return [g["lr"] for g in groups]
        return [g["lr"] * self.gamma ** self.milestones[self.last_epoch] for g in groups]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [
            b * self.gamma ** bisect.bisect_right(milestones, self.last_epoch)
            for b in self.base_lrs
        ]


class ExponentialLR(LRScheduler):
    """``lr = base_lr * gamma ** epoch`` (recursively: ``lr *= gamma`` each step)."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        checks.number("ExponentialLR", "gamma", gamma, 0)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self._is_initial:
            return [g["lr"] for g in groups]
        return [g["lr"] * self.gamma for g in groups]

    def _get_closed_form_lr(self):
        return [b * self.gamma**self.last_epoch for b in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR (Loshchilov & Hutter): cosine annealing restarted every ``T_i`` epochs.

    ``lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2``; at a
    restart ``T_cur = 0`` and ``T_i *= T_mult`` (``T_0`` first). ``step(epoch)``
    takes a (fractional) epoch, as torch.
    """

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        name = "CosineAnnealingWarmRestarts"
        checks.integer(name, "T_0", T_0, 1)
        checks.integer(name, "T_mult", T_mult, 1)
        checks.number(name, "eta_min", eta_min)
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        lo = self.eta_min
        c = 1 + math.cos(math.pi * self.T_cur / self.T_i)
        return [lo + (b - lo) * c / 2 for b in self.base_lrs]

    def step(self, epoch=None) -> None:
        """Advance one epoch, or go to ``epoch`` (a number >= 0)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            checks.number("CosineAnnealingWarmRestarts.step", "epoch", epoch, 0)
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult**n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin), as torch: per batch, not per epoch.

    The lr goes from ``max_lr/div_factor`` up to ``max_lr`` over ``pct_start`` of
    ``total_steps``, then down to ``initial_lr/final_div_factor`` (three_phase: back
    to the initial lr first), each phase annealed by
    ``cos``: ``end + (start-end)*(1+cos(pi*pct))/2`` or ``linear``:
    ``start + (end-start)*pct``. With ``cycle_momentum`` the momentum (or ``betas[0]``)
    moves the opposite way between ``max_momentum`` and ``base_momentum``.
    """

    def __init__(
        self,
        optimizer,
        max_lr,
        total_steps=None,
        epochs=None,
        steps_per_epoch=None,
        pct_start=0.3,
        anneal_strategy="cos",
        cycle_momentum=True,
        base_momentum=0.85,
        max_momentum=0.95,
        div_factor=25.0,
        final_div_factor=1e4,
        three_phase=False,
        last_epoch=-1,
    ):
        name = "OneCycleLR"
        _check_optimizer(name, optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            checks.integer(name, "total_steps", total_steps, 1)
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            checks.integer(name, "epochs", epochs, 1)
            checks.integer(name, "steps_per_epoch", steps_per_epoch, 1)
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError(f"{name}: give total_steps, or epochs and steps_per_epoch")
        checks.number(name, "pct_start", pct_start, 0, 1)
        checks.choice(name, "anneal_strategy", anneal_strategy, ("cos", "linear"))
        checks.flag(name, "cycle_momentum", cycle_momentum)
        checks.flag(name, "three_phase", three_phase)
        checks.number(name, "div_factor", div_factor, 0, open_low=True)
        checks.number(name, "final_div_factor", final_div_factor, 0, open_low=True)
        n = self.total_steps
        if three_phase:
            self._schedule_phases = [
                dict(end_step=float(pct_start * n) - 1, start_lr="initial_lr",
                     end_lr="max_lr", start_momentum="max_momentum",
                     end_momentum="base_momentum"),
                dict(end_step=float(2 * pct_start * n) - 2, start_lr="max_lr",
                     end_lr="initial_lr", start_momentum="base_momentum",
                     end_momentum="max_momentum"),
                dict(end_step=n - 1, start_lr="initial_lr", end_lr="min_lr",
                     start_momentum="max_momentum", end_momentum="max_momentum"),
            ]  # fmt: skip
        else:
            self._schedule_phases = [
                dict(end_step=float(pct_start * n) - 1, start_lr="initial_lr",
                     end_lr="max_lr", start_momentum="max_momentum",
                     end_momentum="base_momentum"),
                dict(end_step=n - 1, start_lr="max_lr", end_lr="min_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum"),
            ]  # fmt: skip
        self._anneal_func_type = anneal_strategy
        max_lrs = _per_group(name, "max_lr", max_lr, optimizer, 0)
        if last_epoch == -1:
            for m, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = m / div_factor
                group["max_lr"] = m
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = bool(cycle_momentum)
        if self.cycle_momentum:
            defaults = getattr(optimizer, "defaults", {})
            if "momentum" not in defaults and "betas" not in defaults:
                raise ValueError(
                    f"{name}: cycle_momentum needs an optimizer with momentum or betas "
                    f"({type(optimizer).__name__} has neither); pass cycle_momentum=False"
                )
            self.use_beta1 = "betas" in defaults
            maxs = _per_group(name, "max_momentum", max_momentum, optimizer, 0)
            bases = _per_group(name, "base_momentum", base_momentum, optimizer, 0)
            if last_epoch == -1:
                for m, b, group in zip(maxs, bases, optimizer.param_groups):
                    if self.use_beta1:
                        group["betas"] = (m, *group["betas"][1:])
                    else:
                        group["momentum"] = m
                    group["max_momentum"] = m
                    group["base_momentum"] = b
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(
                f"OneCycleLR: tried to step {step} times; total_steps is {self.total_steps}"
            )
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end = phase["end_step"]
                if step <= end or i == len(self._schedule_phases) - 1:
                    pct = (step - start) / (end - start)
                    lr = self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        mom = self._anneal(
                            group[phase["start_momentum"]], group[phase["end_momentum"]], pct
                        )
                    break
                start = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                if self.use_beta1:
                    group["betas"] = (mom, *group["betas"][1:])
                else:
                    group["momentum"] = mom
        return lrs


class SequentialLR(LRScheduler):
    """Run ``schedulers[i]`` from ``milestones[i-1]`` on (each restarted at its milestone).

    ``len(milestones) == len(schedulers) - 1``; all must drive ``optimizer``.
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        name = "SequentialLR"
        _check_optimizer(name, optimizer)
        checks.integer(name, "last_epoch", last_epoch, -1)
        schedulers = list(schedulers)
        if not schedulers:
            raise ValueError(f"{name}: expected at least one scheduler, got none")
        for i, s in enumerate(schedulers):
            if isinstance(s, ReduceLROnPlateau):
                raise ValueError(
                    f"{name}: schedulers[{i}] is a ReduceLROnPlateau, whose step needs a metric"
                )
            if not isinstance(s, LRScheduler):
                raise TypeError(f"{name}: schedulers[{i}] is a {type(s).__name__}, not a scheduler")
            if s.optimizer is not optimizer:
                raise ValueError(f"{name}: schedulers[{i}] drives another optimizer")
        milestones = list(milestones)
        for i, m in enumerate(milestones):
            checks.integer(name, f"milestones[{i}]", m, 0)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                f"{name}: expected {len(schedulers) - 1} milestones for {len(schedulers)} "
                f"schedulers, got {len(milestones)}"
            )
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        for s in schedulers:  # undo the first step each took when it was made
            s.last_epoch -= 1
        idx = bisect.bisect_right(milestones, 0)
        schedulers[idx]._initial_step()
        self._last_lr = schedulers[idx].get_last_lr()

    def step(self) -> None:
        self.last_epoch += 1
        idx = bisect.bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self) -> dict:
        """Its own attributes and each scheduler's state dict."""
        sd = {k: v for k, v in vars(self).items() if k not in ("optimizer", "_schedulers")}
        sd["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return sd

    def _load(self, state_dict: dict) -> None:
        inner = state_dict.pop("_schedulers", None)
        if not isinstance(inner, list) or len(inner) != len(self._schedulers):
            raise ValueError(
                f"SequentialLR.load_state_dict: '_schedulers' must be a list of "
                f"{len(self._schedulers)} state dicts"
            )
        self.__dict__.update(state_dict)
        for s, saved in zip(self._schedulers, inner):
            s.load_state_dict(saved)


class ReduceLROnPlateau(LRScheduler):
    """Multiply the lr by ``factor`` when a metric stopped improving for ``patience`` steps.

    Better means ``a < best*(1-threshold)`` (min, rel), ``a < best - threshold`` (min,
    abs), ``a > best*(1+threshold)`` (max, rel) or ``a > best + threshold`` (max, abs);
    ``lr = max(lr*factor, min_lr)`` unless that changes it by at most ``eps``; then
    ``cooldown`` steps are not counted. Call ``step(metric)``.
    """

    def __init__(
        self,
        optimizer,
        mode="min",
        factor=0.1,
        patience=10,
        threshold=1e-4,
        threshold_mode="rel",
        cooldown=0,
        min_lr=0,
        eps=1e-8,
    ):
        name = "ReduceLROnPlateau"
        _check_optimizer(name, optimizer)
        checks.choice(name, "mode", mode, ("min", "max"))
        checks.number(name, "factor", factor, 0, 1, open_high=True)
        checks.integer(name, "patience", patience, 0)
        checks.number(name, "threshold", threshold, 0)
        checks.choice(name, "threshold_mode", threshold_mode, ("rel", "abs"))
        checks.integer(name, "cooldown", cooldown, 0)
        checks.number(name, "eps", eps, 0)
        self.factor = factor
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            self.default_min_lr = None
            self.min_lrs = _per_group(name, "min_lr", min_lr, optimizer, 0)
        else:
            self.default_min_lr = checks.number(name, "min_lr", min_lr, 0)
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = [g["lr"] for g in optimizer.param_groups]
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self._reset()

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def _is_better(self, a, best) -> bool:
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def step(self, metrics) -> None:  # the metric is read back: the user asked for it
        """Record the metric of this epoch (a number, or a 0-d array or Tensor)."""
        try:
            current = float(metrics)
        except (TypeError, ValueError):
            raise TypeError(
                f"ReduceLROnPlateau.step: metrics must be a number, got {type(metrics).__name__}"
            ) from None
        self.last_epoch += 1
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"ReduceLROnPlateau: the optimizer has {len(groups)} parameter groups, "
                    f"min_lr has {len(self.min_lrs)} values"
                )
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, lo in zip(groups, self.min_lrs):
            old = float(group["lr"])
            new = max(old * self.factor, lo)
            if old - new > self.eps:
                group["lr"] = new
