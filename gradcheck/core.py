"""Central differences in float64 against the registered VJP rules.

``check_grad(f, *inputs)`` compares the VJP of ``f`` with central differences:

- ``mode="full"``: the whole Jacobian, one backward pass per output element and
  two evaluations per input element; the worst element is reported with its
  output index, input and index, analytic and numeric values.
- ``mode="fast"``: random projections ``u^T J v`` (as JAX and PyTorch do): one
  backward pass and two evaluations per projection, for large inputs.
- ``mode="auto"``: full when the Jacobian has at most ``FULL_LIMIT`` elements, and
  the backend is eager: on a lazy one (dask) each backward pass builds a task graph
  of its own, so auto takes the projections there.

Numbers are always differenced in float64, whatever the dtype checked: for a
float32 check the analytic gradient is computed in float32 and compared at
float32 tolerances. An element where the one-sided differences disagree is a
non-differentiable point (a kink, as Chainer's ``detect_nondifferentiable``
reports): a mismatch there is reported as ``nondiff``, not as a wrong rule.

``check_second`` checks the VJP of the VJP (through ``create_graph=True``).
Inputs are NumPy arrays; the function runs on any wrapped namespace.

Forward mode: ``check_jvp`` compares ``ad.jvp``'s ``J v`` (one forward pass through the
ops' JVP rules) with central differences along random directions ``v``, element by
element, and with the VJP rules (``<u, J v> = <J^T u, v>`` for random ``u``);
``check_jvp_second`` differentiates ``<u, J(x) v>`` by reverse mode through the recorded
forward pass (a primal that requires grad) against central differences of it.

Complex values are checked as pairs of reals: a complex input is perturbed along
its real and its imaginary part, a complex output ``o`` is paired with a complex
cotangent ``u`` as ``sum(Re(conj(u) o))``, and the gradient (PyTorch's convention,
``dL/dx + i dL/dy``) is compared with the differences of both parts. A complex
``dtype`` ("complex128", "complex64") also makes every real input complex, by
adding a fixed imaginary part, so the whole registry can be checked on complex
inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from autodiff.backends import to_host

import autodiff as ad
from autodiff.engine.tensor import Tensor

__all__ = [
    "check_grad",
    "check_second",
    "check_jvp",
    "check_jvp_second",
    "check_op",
    "as_checked",
    "Result",
    "GradcheckError",
    "TOLERANCES",
]

FULL_LIMIT = 4096
# (atol, rtol) of a check, by dtype.
TOLERANCES = {"float64": (1e-6, 1e-5), "float32": (2e-3, 2e-2)}
SECOND_TOLERANCES = {"float64": (1e-5, 1e-4), "float32": (5e-3, 5e-2)}
for _d in (TOLERANCES, SECOND_TOLERANCES):
    _d["complex128"], _d["complex64"] = _d["float64"], _d["float32"]
# the real and the complex dtype of each precision
PRECISION = {
    "float64": ("float64", "complex128"),
    "float32": ("float32", "complex64"),
    "complex128": ("float64", "complex128"),
    "complex64": ("float32", "complex64"),
}


class GradcheckError(AssertionError):
    pass


@dataclass
class Result:
    """Outcome of one check: status and the worst element."""

    ok: bool
    status: str = "ok"  # ok, FAIL, nondiff
    max_abs: float = 0.0
    max_rel: float = 0.0
    where: str = ""
    analytic: float = 0.0
    numeric: float = 0.0
    notes: list = field(default_factory=list)

    def __str__(self):
        if not self.where:
            return self.status
        return (
            f"{self.where}: analytic {self.analytic:.6g}, numeric {self.numeric:.6g} "
            f"(abs err {self.max_abs:.2e}, rel err {self.max_rel:.2e})"
            + (" at a non-differentiable point" if self.status == "nondiff" else "")
        )


def _outputs(out):
    if isinstance(out, Tensor):
        return [out]
    return [o for o in out if isinstance(o, Tensor)]


def _to_numpy(t):
    """Host values of a Tensor or array of any backend (a GPU's, torch's conjugate views)."""
    return np.asarray(to_host(t.data if isinstance(t, Tensor) else t))


def _host(items):
    """``_to_numpy`` of each Tensor or array of ``items``: lazy (dask) arrays computed
    together, in one graph, so that what they share is computed once."""
    raw = [t.data if isinstance(t, Tensor) else t for t in items]
    lazy = [i for i, a in enumerate(raw) if hasattr(a, "__dask_graph__")]
    if lazy:
        import dask

        done = dask.compute(*[raw[i] for i in lazy])
        for i, a in zip(lazy, done):
            raw[i] = a
    return [_to_numpy(a) for a in raw]


def as_checked(inputs, dtype):
    """The sample ``inputs`` as checked at ``dtype``: a complex dtype moves real ones off
    the real axis (a fixed imaginary part in [-0.5, 0.5])."""
    arrays = [np.asarray(a) for a in inputs]
    if dtype.startswith("complex"):
        rng = np.random.default_rng(4321)
        arrays = [a if np.iscomplexobj(a) else a + 0.5j * rng.uniform(-1, 1, a.shape)
                  for a in arrays]  # fmt: skip
    return arrays


def _realify(a):
    """A NumPy array as reals: a complex one as (..., 2) pairs (real, imaginary)."""
    a = np.asarray(a)
    if np.iscomplexobj(a):
        return np.stack([a.real, a.imag], axis=-1).astype(np.float64)
    return a.astype(np.float64)


class _Problem:
    """``f`` on a namespace, fed from NumPy float64 arrays: ``self.inputs`` are the
    inputs as reals (``_realify``), which the checks perturb. ``reference``: the same
    function written on ``Autodiff(numpy)``, which then computes the central differences
    (on a lazy backend, each evaluation would build and compute a graph of its own)."""

    def __init__(self, f, inputs, xp, dtype, device, reference=None):
        self.f, self.xp, self.device = f, xp, device
        self.ref_f = reference
        self.dtype, self.complex_dtype = PRECISION[dtype]
        arrays = as_checked(inputs, dtype)
        self.is_complex = [np.iscomplexobj(a) for a in arrays]
        self.inputs = [_realify(a) for a in arrays]

    def array(self, i, r):
        """Input ``i`` from its reals ``r``."""
        return r[..., 0] + 1j * r[..., 1] if self.is_complex[i] else r

    def tensor(self, a, dtype=None, requires_grad=False, ref=False):
        a = np.asarray(a)
        if dtype is None:
            dtype = self.complex_dtype if np.iscomplexobj(a) else self.dtype
        elif np.iscomplexobj(a) and not dtype.startswith("complex"):
            dtype = PRECISION[dtype][1]
        if ref:
            t = ad.Autodiff(np).asarray(a.astype(dtype))
        else:
            kw = {} if self.device is None else {"device": self.device}
            t = self.xp.asarray(a.astype(dtype), **kw)
        if requires_grad:
            t.requires_grad = True
        return t

    def tensors(self, reals, dtype=None, requires_grad=False, ref=False):
        return [self.tensor(self.array(i, r), dtype, requires_grad, ref)
                for i, r in enumerate(reals)]  # fmt: skip

    def numeric(self):
        """(f, namespace, ref) that the central differences evaluate."""
        if self.ref_f is None:
            return self.f, self.xp, False
        return self.ref_f, ad.Autodiff(np), True

    def outputs(self, reals):
        """f at the inputs ``reals``, in float64, as real NumPy arrays (no graph)."""
        f, _, ref = self.numeric()
        with ad.no_grad():
            outs = _outputs(f(*self.tensors(reals, "float64", ref=ref)))
        return [_realify(o) for o in _host(outs)]

    def pairing(self, outs, cotangents, ref=False):
        """sum over outputs of Re(conj(u) o): the scalar whose gradient is the VJP, for
        cotangents ``u`` given as reals (``_realify``'s layout)."""
        xp = ad.Autodiff(np) if ref else self.xp
        total = None
        for o, u in zip(outs, cotangents):
            if np.dtype(_np_dtype(o)).kind == "c":
                c = np.conj(u[..., 0] + 1j * u[..., 1])
                term = xp.sum(xp.real(o * self.tensor(c, str(_np_dtype(o)), ref=ref)))
            else:
                term = xp.sum(o * self.tensor(u, dtype=str(_np_dtype(o)), ref=ref))
            total = term if total is None else total + term
        return total


def _shape(o):
    """The shape of output ``o`` as reals."""
    return tuple(o.shape) + ((2,) if np.dtype(_np_dtype(o)).kind == "c" else ())


def _one_sided(prob, i, idx, h, outs0):
    """(left, right) one-sided differences of every output at input i, idx."""
    plus = [a.copy() for a in prob.inputs]
    minus = [a.copy() for a in prob.inputs]
    plus[i][idx] += h
    minus[i][idx] -= h
    fp, fm = prob.outputs(plus), prob.outputs(minus)
    right = np.concatenate([(p - o).ravel() / h for p, o in zip(fp, outs0)])
    left = np.concatenate([(o - m).ravel() / h for m, o in zip(fm, outs0)])
    return left, right


def _is_kink(left, right):
    """One-sided slopes that disagree by far more than h * f'' (about 1e-6 here)
    or float64 rounding: the derivative jumps at this point."""
    return np.abs(left - right) > 1e-3 * (1 + np.maximum(np.abs(left), np.abs(right)))


def _verify_meta(grads, tensors):
    for i, (g, t) in enumerate(zip(grads, tensors)):
        if g is None:
            raise GradcheckError(f"input {i}: no gradient reached it")
        if g.shape != t.shape or g.dtype != t.dtype or g.device != t.device:
            raise GradcheckError(
                f"input {i}: gradient has shape {g.shape}, dtype {g.dtype}, device "
                f"{g.device}; the input has {t.shape}, {t.dtype}, {t.device}"
            )


def _vjp(prob, tensors, outs, cotangents):
    """The VJP of ``f`` at ``tensors`` for one cotangent per output (NumPy arrays): the
    gradient Tensors, not yet read back (see :func:`_reals`)."""
    total = prob.pairing(outs, cotangents)
    for t in tensors:
        t.grad = None
    total.backward(retain_graph=True)
    _verify_meta([t.grad for t in tensors], tensors)
    return [t.grad for t in tensors]


def _reals(groups):
    """Lists of Tensors as lists of real NumPy arrays, all read back at once."""
    flat = _host([t for g in groups for t in g])
    out, k = [], 0
    for g in groups:
        out.append([_realify(a) for a in flat[k : k + len(g)]])
        k += len(g)
    return out


def _index(k):
    return "[" + ", ".join(str(int(v)) for v in k) + "]"


def _np_dtype(t):
    name = getattr(t.dtype, "name", None) or str(t.dtype).rsplit(".", 1)[-1]
    return np.dtype(name)


def _compare(pairs, atol, rtol, kinks=None):
    """Worst mismatch over ``pairs`` of (label, analytic, numeric) arrays."""
    worst = Result(ok=True)
    for label, a, n, kink in pairs:
        err = np.abs(a - n)
        err = np.where(np.isnan(err), np.inf, err)
        bad = err > atol + rtol * np.abs(n)
        rel = err / np.maximum(np.abs(n), 1e-12)
        score = np.where(bad, np.inf, err) if bad.any() else err
        k = np.unravel_index(int(np.argmax(score)), np.shape(a)) if np.size(a) else None
        if k is None:
            continue
        real_bad = bad & ~kink if kink is not None else bad
        status = "FAIL" if real_bad.any() else ("nondiff" if bad.any() else "ok")
        cand = Result(
            ok=status != "FAIL",
            status=status,
            max_abs=float(err[k]),
            max_rel=float(rel[k]),
            where=label(k),
            analytic=float(np.asarray(a)[k]),
            numeric=float(np.asarray(n)[k]),
        )
        rank = {"FAIL": 2, "nondiff": 1, "ok": 0}
        if (rank[cand.status], cand.max_abs) > (rank[worst.status], worst.max_abs):
            worst = cand
    return worst


def _full(prob, tensors, outs, eps, atol, rtol):
    shapes = [_shape(o) for o in outs]
    sizes = [int(np.prod(s)) for s in shapes]
    n_out = sum(sizes)
    outs0 = prob.outputs(prob.inputs)
    rows = []
    for k in range(n_out):
        flat = np.zeros(n_out)
        flat[k] = 1.0
        cts, start = [], 0
        for s, sz in zip(shapes, sizes):
            cts.append(flat[start : start + sz].reshape(s))
            start += sz
        rows.append(_vjp(prob, tensors, outs, cts))
    rows = _reals(rows)
    pairs = []
    for i, a in enumerate(prob.inputs):
        analytic = np.stack([r[i].ravel() for r in rows]) if rows else np.zeros((0, a.size))
        numeric = np.zeros_like(analytic)
        kink = np.zeros(analytic.shape, dtype=bool)
        for j, idx in enumerate(np.ndindex(a.shape)):
            left, right = _one_sided(prob, i, idx, eps, outs0)
            numeric[:, j] = (left + right) / 2
            kink[:, j] = _is_kink(left, right)

        def label(k, i=i, shape=a.shape):
            out_k, in_k = k
            return f"d out[{out_k}] / d input {i}{_index(np.unravel_index(in_k, shape))}"

        pairs.append((label, analytic, numeric, kink))
    return _compare(pairs, atol, rtol)


def _fast(prob, tensors, outs, eps, atol, rtol, seed, projections=3):
    rng = np.random.default_rng(seed + 12345)
    a_vals, n_vals, grads, directions = [], [], [], []
    for _ in range(projections):
        us = [rng.standard_normal(_shape(o)) for o in outs]
        vs = [rng.standard_normal(a.shape) for a in prob.inputs]
        grads.append(_vjp(prob, tensors, outs, us))
        directions.append(vs)
        plus = prob.outputs([a + eps * v for a, v in zip(prob.inputs, vs)])
        minus = prob.outputs([a - eps * v for a, v in zip(prob.inputs, vs)])
        n_vals.append(
            sum(float(np.sum(u * (p - m))) / (2 * eps) for u, p, m in zip(us, plus, minus))
        )
    for gs, vs in zip(_reals(grads), directions):
        a_vals.append(sum(float(np.sum(g * v)) for g, v in zip(gs, vs)))
    scale = max(1.0, max(abs(v) for v in n_vals))
    return _compare(
        [(lambda k: f"projection {k[0]} (u^T J v)", np.array(a_vals), np.array(n_vals), None)],
        atol * scale,
        rtol,
    )


def check_grad(f, *inputs, xp=None, mode="auto", dtype="float64", eps=1e-6, atol=None,
               rtol=None, seed=0, device=None, raise_on_fail=True,
               reference=None) -> Result:  # fmt: skip
    """First order: the VJP of ``f`` against central differences in float64 (of
    ``reference``, ``f`` written on ``Autodiff(numpy)``, where given)."""
    xp = xp or ad.Autodiff(np)
    atol = TOLERANCES[dtype][0] if atol is None else atol
    rtol = TOLERANCES[dtype][1] if rtol is None else rtol
    prob = _Problem(f, inputs, xp, dtype, device, reference)
    tensors = prob.tensors(prob.inputs, requires_grad=True)
    outs = _outputs(f(*tensors))
    n_jac = sum(int(np.prod(_shape(o))) for o in outs) * sum(a.size for a in prob.inputs)
    if mode == "auto":
        lazy = tensors[0]._rec.backend.lazy if tensors else False
        mode = "full" if n_jac <= FULL_LIMIT and not lazy else "fast"
    if mode == "full":
        res = _full(prob, tensors, outs, eps, atol, rtol)
    elif mode == "fast":
        res = _fast(prob, tensors, outs, eps, atol, rtol, seed)
    else:
        raise ValueError(f"check_grad: mode must be full, fast or auto, not {mode!r}")
    res.notes.append(mode)
    if raise_on_fail and not res.ok:
        raise GradcheckError(f"first-order gradient mismatch: {res}")
    return res


def check_second(f, *inputs, xp=None, dtype="float64", eps=1e-5, atol=None, rtol=None,
                 seed=0, device=None, raise_on_fail=True, reference=None) -> Result:  # fmt: skip
    """Second order: the gradient of ``h = sum(grad f . v)`` (the VJP of the VJP,
    recorded with ``create_graph=True``) against central differences of the
    first-order gradient computed in float64."""
    xp = xp or ad.Autodiff(np)
    atol = SECOND_TOLERANCES[dtype][0] if atol is None else atol
    rtol = SECOND_TOLERANCES[dtype][1] if rtol is None else rtol
    prob = _Problem(f, inputs, xp, dtype, device, reference)
    rng = np.random.default_rng(seed + 1)
    nf, _, ref = prob.numeric()
    with ad.no_grad():
        outs0 = _outputs(nf(*prob.tensors(prob.inputs, "float64", ref=ref)))
    us = [rng.standard_normal(_shape(o)) for o in outs0]
    vs = [rng.standard_normal(a.shape) for a in prob.inputs]

    def h_value(reals):
        ts = prob.tensors(reals, "float64", requires_grad=True, ref=ref)
        prob.pairing(_outputs(nf(*ts)), us, ref=ref).backward()
        grads = _reals([[t.grad for t in ts]])[0]
        return float(sum(np.sum(g * v) for g, v in zip(grads, vs)))

    ts = prob.tensors(prob.inputs, requires_grad=True)
    prob.pairing(_outputs(f(*ts)), us).backward(create_graph=True)
    h = None
    for t, v in zip(ts, vs):
        if t.grad is not None and t.grad.requires_grad:  # else: constant in the inputs
            term = prob.pairing([t.grad], [v])
            h = term if h is None else h + term
    analytic = [np.zeros_like(a) for a in prob.inputs]
    if h is not None:
        for t in ts:
            t.grad = None
        h.backward()
        got = _reals([[t.grad for t in ts if t.grad is not None]])[0][::-1]
        analytic = [
            np.zeros_like(a) if t.grad is None else got.pop() for t, a in zip(ts, prob.inputs)
        ]
    pairs = [(lambda k, i=i: f"d2 / d input {i}{_index(k)}", analytic[i], numeric, None)
             for i, numeric in enumerate(_central(prob.inputs, h_value, eps))]  # fmt: skip
    res = _compare(pairs, atol, rtol)
    if raise_on_fail and not res.ok:
        raise GradcheckError(f"second-order gradient mismatch: {res}")
    return res


def _central(inputs, h, eps):
    """The central-difference gradient of the scalar ``h(inputs)``, one array per input."""
    grads = []
    for i, a in enumerate(inputs):
        numeric = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            plus = [b.copy() for b in inputs]
            minus = [b.copy() for b in inputs]
            plus[i][idx] += eps
            minus[i][idx] -= eps
            numeric[idx] = (h(plus) - h(minus)) / (2 * eps)
        grads.append(numeric)
    return grads


def _directions(prob, rng):
    """A random direction per input, as reals (``_realify``'s layout) and as arrays."""
    vs = [rng.standard_normal(a.shape) for a in prob.inputs]
    return vs, [prob.array(i, v) for i, v in enumerate(vs)]


def _jvp_of(prob, tensors, directions, dtype=None, ref=False):
    """``ad.jvp`` of the problem's function (with ``ref``, of its reference on NumPy):
    its output Tensors and their tangents."""
    f = prob.numeric()[0] if ref else prob.f

    def outs_of(*ts):
        return tuple(_outputs(f(*ts)))

    tangents = tuple(prob.tensor(d, dtype, ref=ref) for d in directions)
    return ad.jvp(outs_of, tuple(tensors), tangents)


def check_jvp(f, *inputs, xp=None, dtype="float64", eps=1e-6, atol=None, rtol=None, seed=0,
              device=None, directions=2, raise_on_fail=True, reference=None) -> Result:  # fmt: skip
    """First order, forward mode: ``J v`` from ``ad.jvp`` against central differences
    along ``v`` (each output element), and against the VJP: ``<u, J v> = <J^T u, v>``."""
    xp = xp or ad.Autodiff(np)
    atol = TOLERANCES[dtype][0] if atol is None else atol
    rtol = TOLERANCES[dtype][1] if rtol is None else rtol
    prob = _Problem(f, inputs, xp, dtype, device, reference)
    rng = np.random.default_rng(seed + 777)
    tensors = prob.tensors(prob.inputs)
    outs0 = prob.outputs(prob.inputs)
    grad_tensors = prob.tensors(prob.inputs, requires_grad=True)
    grad_outs = _outputs(f(*grad_tensors))
    drawn, lazy = [], []  # the analytic values, read back together after the loop
    for _ in range(directions):
        vs, arrays = _directions(prob, rng)
        tangents = list(_jvp_of(prob, tensors, arrays)[1])
        us = [rng.standard_normal(_shape(o)) for o in grad_outs]
        drawn.append((vs, us, len(tangents)))
        lazy.append(tangents + _vjp(prob, grad_tensors, grad_outs, us))
    pairs, a_vals, v_vals = [], [], []
    for k, ((vs, us, n), values) in enumerate(zip(drawn, _reals(lazy))):
        analytic, grads = values[:n], values[n:]
        plus = prob.outputs([a + eps * v for a, v in zip(prob.inputs, vs)])
        minus = prob.outputs([a - eps * v for a, v in zip(prob.inputs, vs)])
        for o, (a, p, m, c) in enumerate(zip(analytic, plus, minus, outs0)):
            if a.shape != p.shape:
                raise GradcheckError(
                    f"output {o}: the tangent has shape {a.shape} (as reals), the output {p.shape}"
                )
            left, right = (c - m) / eps, (p - c) / eps

            def label(idx, o=o, k=k):
                return f"d out{o}{_index(idx)} along v{k}"

            pairs.append((label, a, (left + right) / 2, _is_kink(left, right)))
        a_vals.append(sum(float(np.sum(u * a)) for u, a in zip(us, analytic)))
        v_vals.append(sum(float(np.sum(g * v)) for g, v in zip(grads, vs)))
    res = _compare(pairs, atol, rtol)
    scale = max([1.0] + [abs(v) for v in v_vals])
    both = _compare([(lambda k: f"<u, J v> against <J^T u, v>, direction {k[0]}",
                      np.array(a_vals), np.array(v_vals), None)], atol * scale, rtol)  # fmt: skip
    rank = {"FAIL": 2, "nondiff": 1, "ok": 0}
    if (rank[both.status], both.max_abs) > (rank[res.status], res.max_abs) and both.status != "ok":
        res = both
    res.notes.append("jvp")
    if raise_on_fail and not res.ok:
        raise GradcheckError(f"JVP mismatch: {res}")
    return res


def check_jvp_second(f, *inputs, xp=None, dtype="float64", eps=1e-5, atol=None, rtol=None,
                     seed=0, device=None, raise_on_fail=True,
                     reference=None) -> Result:  # fmt: skip
    """Second order, forward mode: the gradient of ``h(x) = <u, J(x) v>``, by reverse mode
    through the recorded forward pass (the primals require grad), against central
    differences of ``h`` computed with plain forward passes in float64."""
    xp = xp or ad.Autodiff(np)
    atol = SECOND_TOLERANCES[dtype][0] if atol is None else atol
    rtol = SECOND_TOLERANCES[dtype][1] if rtol is None else rtol
    prob = _Problem(f, inputs, xp, dtype, device, reference)
    rng = np.random.default_rng(seed + 778)
    outs0 = prob.outputs(prob.inputs)
    us = [rng.standard_normal(o.shape) for o in outs0]
    vs, arrays = _directions(prob, rng)
    ref = prob.numeric()[2]

    def h_value(reals):
        with ad.no_grad():
            ts = prob.tensors(reals, "float64", ref=ref)
            _, tangents = _jvp_of(prob, ts, arrays, "float64", ref=ref)
        return sum(float(np.sum(u * t)) for u, t in zip(us, _reals([list(tangents)])[0]))

    ts = prob.tensors(prob.inputs, requires_grad=True)
    _, tangents = _jvp_of(prob, ts, arrays)
    h = prob.pairing(list(tangents), us)
    analytic = [np.zeros_like(a) for a in prob.inputs]
    if h.requires_grad:  # else: J does not depend on the inputs (a linear op)
        h.backward()
        got = _reals([[t.grad for t in ts if t.grad is not None]])[0][::-1]
        analytic = [
            np.zeros_like(a) if t.grad is None else got.pop() for t, a in zip(ts, prob.inputs)
        ]
    pairs = [(lambda k, i=i: f"d <u, J v> / d input {i}{_index(k)}", analytic[i], numeric,
              None) for i, numeric in enumerate(_central(prob.inputs, h_value, eps))]  # fmt: skip
    res = _compare(pairs, atol, rtol)
    res.notes.append("jvp")
    if raise_on_fail and not res.ok:
        raise GradcheckError(f"second-order JVP mismatch: {res}")
    return res


def check_op(name, xp=None, *, order=2, dtype="float64", mode="auto", seed=0,
             raise_on_fail=True, jvp=False) -> list:  # fmt: skip
    """Check every sample of the spec of registered op ``name``: a list of
    ``(sample label, order, Result)``; with ``jvp``, its forward-mode checks too (orders
    "jvp 1", "jvp 2")."""
    from .specs import SPECS

    xp = xp or ad.Autodiff(np)
    spec = SPECS[name]
    results = []
    for sample in spec.samples(seed):
        f = lambda *t, s=sample: s.call(xp, *t)  # noqa: E731
        atol, rtol = spec.tolerances(TOLERANCES[dtype])
        res = check_grad(f, *sample.inputs, xp=xp, mode=mode, dtype=dtype, atol=atol,
                         rtol=rtol, seed=seed, raise_on_fail=False)  # fmt: skip
        results.append((sample.label, 1, res))
        if order >= 2 and spec.second_order:
            res2 = check_second(f, *sample.inputs, xp=xp, dtype=dtype, seed=seed,
                                raise_on_fail=False)  # fmt: skip
            results.append((sample.label, 2, res2))
        if jvp:
            res = check_jvp(f, *sample.inputs, xp=xp, dtype=dtype, atol=atol, rtol=rtol,
                            seed=seed, raise_on_fail=False)  # fmt: skip
            results.append((sample.label, "jvp 1", res))
            if order >= 2 and spec.second_order:
                res2 = check_jvp_second(f, *sample.inputs, xp=xp, dtype=dtype, seed=seed,
                                        raise_on_fail=False)  # fmt: skip
                results.append((sample.label, "jvp 2", res2))
    if raise_on_fail:
        bad = [f"{lab} (order {k}): {r}" for lab, k, r in results if not r.ok]
        if bad:
            raise GradcheckError(f"{name}: " + "; ".join(bad))
    return results
