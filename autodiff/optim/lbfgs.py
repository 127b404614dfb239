"""L-BFGS with torch's strong-Wolfe line search, as torch.optim.LBFGS."""

from __future__ import annotations

import math

from .. import checks
from ..engine import tracing
from ..engine.grad_mode import enable_grad
from ..engine.namespace import recorder_of
from ..engine.versions import bump
from .optimizer import Optimizer, _is_array, _lazy, _persist


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
        B = self._backend()
        flat = B.concat(views, axis=0)
        if _lazy(B):  # read back many times in a step: computed (the backward pass) once
            (flat,) = B.persist([flat])
        return flat

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
        tracing.refuse_state("LBFGS.step")
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
        if _lazy(B):
            _persist(B, self._params, [state])
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
