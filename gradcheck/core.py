"""Central differences in float64 against the registered VJP rules.

``check_grad(f, *inputs)`` compares the gradient of the scalar
``sum(f(*inputs) * u)`` (``u`` a fixed random cotangent) with central
differences of the same scalar, element by element. ``check_second`` does the
same for the gradient itself (the VJP of the VJP, through ``create_graph``).
Inputs are NumPy float64 arrays; the function runs on any wrapped namespace.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import autodiff as ad
from autodiff.tensor import Tensor

__all__ = ["check_grad", "check_second", "Result", "GradcheckError"]


class GradcheckError(AssertionError):
    pass


@dataclass
class Result:
    """The worst element of a comparison."""

    ok: bool
    max_abs: float = 0.0
    max_rel: float = 0.0
    where: tuple | None = None  # (input number, index)
    analytic: float = 0.0
    numeric: float = 0.0
    notes: list = field(default_factory=list)

    def __str__(self):
        if self.where is None:
            return "ok" if self.ok else "failed"
        i, idx = self.where
        return (
            f"input {i} at {idx}: analytic {self.analytic:.6g}, numeric {self.numeric:.6g} "
            f"(abs err {self.max_abs:.2e}, rel err {self.max_rel:.2e})"
        )


def _outputs(out):
    if isinstance(out, Tensor):
        return [out]
    return [o for o in out if isinstance(o, Tensor)]


def _to_numpy(t):
    return np.asarray(t.data) if hasattr(t.data, "__array__") else np.from_dlpack(t.data)


class _Problem:
    """f on a namespace, reduced to a scalar with fixed random cotangents."""

    def __init__(self, f, inputs, xp, seed, dtype):
        self.f, self.xp, self.dtype = f, xp, dtype
        self.inputs = [np.asarray(a, dtype=np.float64) for a in inputs]
        self.device = None
        outs = _outputs(f(*[self.tensor(a) for a in self.inputs]))
        rng = np.random.default_rng(seed)
        self.cotangents = [rng.standard_normal(o.shape) for o in outs]

    def tensor(self, a, requires_grad=False):
        kw = {} if self.device is None else {"device": self.device}
        t = self.xp.asarray(np.asarray(a, dtype=self.dtype), **kw)
        if requires_grad:
            t.requires_grad = True
        return t

    def scalar(self, tensors):
        total = None
        for o, u in zip(_outputs(self.f(*tensors)), self.cotangents):
            term = self.xp.sum(
                o
                * self.xp.asarray(
                    u.astype(o.dtype.name if hasattr(o.dtype, "name") else self.dtype),
                    device=o.device,
                )
            )
            total = term if total is None else total + term
        return total

    def value(self, arrays):
        with ad.no_grad():
            return float(self.scalar([self.tensor(a) for a in arrays]).data)

    def numeric(self, eps, value=None):
        value = value or self.value
        grads = []
        for i, a in enumerate(self.inputs):
            g = np.zeros_like(a)
            for idx in np.ndindex(a.shape):
                plus = [b.copy() for b in self.inputs]
                minus = [b.copy() for b in self.inputs]
                plus[i][idx] += eps
                minus[i][idx] -= eps
                g[idx] = (value(plus) - value(minus)) / (2 * eps)
            grads.append(g)
        return grads


def _compare(analytic, numeric, atol, rtol):
    res = Result(ok=True)
    for i, (a, n) in enumerate(zip(analytic, numeric)):
        if a.shape != n.shape:
            return Result(False, np.inf, np.inf, (i, ()), notes=[f"shape {a.shape} != {n.shape}"])
        if a.size == 0:
            continue
        err = np.abs(a - n)
        rel = err / np.maximum(np.abs(n), 1e-12)
        bad = err > atol + rtol * np.abs(n)
        k = np.unravel_index(np.argmax(np.where(bad, err, -1) if bad.any() else err), a.shape)
        if not np.all(np.isfinite(a)) and np.all(np.isfinite(n)):
            bad = bad | ~np.isfinite(a)
            k = np.unravel_index(np.argmax(~np.isfinite(a)), a.shape)
        if bad.any() or err[k] >= res.max_abs:
            res = Result(
                ok=res.ok and not bad.any(),
                max_abs=float(err[k]) if np.isfinite(err[k]) else np.inf,
                max_rel=float(rel[k]) if np.isfinite(rel[k]) else np.inf,
                where=(i, tuple(int(j) for j in k)),
                analytic=float(a[k]),
                numeric=float(n[k]),
            )
            if bad.any():
                return res
    return res


def _check_meta(grads, tensors):
    for i, (g, t) in enumerate(zip(grads, tensors)):
        if g is None:
            raise GradcheckError(f"input {i}: no gradient reached it")
        if g.shape != t.shape or g.dtype != t.dtype or g.device != t.device:
            raise GradcheckError(
                f"input {i}: gradient has shape {g.shape}, dtype {g.dtype}, device "
                f"{g.device}; the input has {t.shape}, {t.dtype}, {t.device}"
            )


def check_grad(f, *inputs, xp=None, eps=1e-6, atol=1e-6, rtol=1e-5, seed=0, device=None,
               dtype=None, raise_on_fail=True) -> Result:  # fmt: skip
    """First order: the VJP of ``f`` against central differences in float64."""
    xp = xp or ad.Autodiff(np)
    prob = _Problem(f, inputs, xp, seed, dtype or "float64")
    prob.device = device
    tensors = [prob.tensor(a, requires_grad=True) for a in prob.inputs]
    prob.scalar(tensors).backward()
    _check_meta([t.grad for t in tensors], tensors)
    analytic = [_to_numpy(t.grad).astype(np.float64) for t in tensors]
    res = _compare(analytic, prob.numeric(eps), atol, rtol)
    if raise_on_fail and not res.ok:
        raise GradcheckError(f"first-order gradient mismatch: {res}")
    return res


def check_second(f, *inputs, xp=None, eps=1e-5, atol=1e-5, rtol=1e-4, seed=0, device=None,
                 raise_on_fail=True) -> Result:  # fmt: skip
    """Second order: the gradient of ``sum(grad * v)`` (the VJP of the VJP,
    recorded with ``create_graph=True``) against central differences of the
    first-order gradient."""
    xp = xp or ad.Autodiff(np)
    prob = _Problem(f, inputs, xp, seed, "float64")
    prob.device = device
    rng = np.random.default_rng(seed + 1)
    vs = [rng.standard_normal(a.shape) for a in prob.inputs]

    def first(arrays, create):
        ts = [prob.tensor(a, requires_grad=True) for a in arrays]
        prob.scalar(ts).backward(create_graph=create)
        return ts

    def h_value(arrays):
        ts = first(arrays, False)
        return float(sum(np.sum(_to_numpy(t.grad) * v) for t, v in zip(ts, vs)))

    ts = first(prob.inputs, True)
    h = None
    for t, v in zip(ts, vs):
        if t.grad is None or not t.grad.requires_grad:
            continue  # this gradient does not depend on the inputs (a linear op)
        term = xp.sum(t.grad * xp.asarray(v.astype(np.float64), device=t.device))
        h = term if h is None else h + term
    leaves = [prob.tensor(a, requires_grad=True) for a in prob.inputs]
    if h is None:
        analytic = [np.zeros_like(a) for a in prob.inputs]
    else:
        for t in ts:
            t.grad = None
        h.backward()
        analytic = [
            np.zeros_like(a) if t.grad is None else _to_numpy(t.grad)
            for t, a in zip(ts, prob.inputs)
        ]
    del leaves
    res = _compare(analytic, prob.numeric(eps, h_value), atol, rtol)
    if raise_on_fail and not res.ok:
        raise GradcheckError(f"second-order gradient mismatch: {res}")
    return res
