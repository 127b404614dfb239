"""A property-based fuzzer: random programs of 3-12 ops, run on our namespace and on
array_api_compat's torch namespace (torch.autograd) from the same program text, their
gradients compared first and second order (and with central differences). One program
in four is complex (complex128 inputs, the steps that take complex values, losses
``Re(sum(v * w))``: PyTorch's convention is checked too).

    python -m tests.fuzz --programs 2000 --seed 1

prints each failing program (its steps, as code) and a summary. The test-suite runs a
fixed seed and a bounded count (tests/test_fuzz.py).

A program starts from one to three float64 inputs of random shapes (0-d, size-1 and
size-0 axes included) and applies steps drawn from the table below, each written once
against the standard (``m`` is the namespace). A step whose shapes don't fit is drawn
again: a dry run on NumPy decides. Values are kept away from kinks and poles (``abs``
of values near 0, ``max`` ties, division by ~0) by the steps themselves, so a mismatch
is a wrong gradient, not a non-differentiable point.
"""

from __future__ import annotations

import argparse
import math
import re
import sys

import numpy as np

SHAPES = [(), (3,), (2, 3), (1, 3), (2, 1), (3, 1, 2), (0, 3), (2, 0)]


# step name -> (arity, code with a, b: the operands). Each is an expression in ``m``.
UNARY = {
    "exp": "m.exp(m.tanh(a))",
    "sin": "m.sin(a)",
    "tanh": "m.tanh(a)",
    "square": "m.square(a)",
    "sqrt": "m.sqrt(a * a + 0.5)",
    "log": "m.log(m.abs(a) + 1.0)",
    "abs": "m.abs(a + 0.3)",
    "neg_recip": "-1.0 / (a * a + 1.0)",
    "sum_all": "m.sum(a)",
    "sum_0": "m.sum(a, axis=0)",
    "mean_last_keep": "m.mean(a, axis=-1, keepdims=True)",
    "max_last": "m.max(a + 0.0, axis=-1)",
    "prod_0": "m.prod(m.tanh(a) + 1.5, axis=0)",
    "cumsum_0": "m.cumulative_sum(a, axis=0)",
    "std_last": "m.std(a * 3.0, axis=-1, correction=0.0)",
    "reshape_flat": "m.reshape(a, (-1,))",
    "transpose": "m.matrix_transpose(a)",
    "flip": "m.flip(a, axis=0)",
    "expand0": "m.expand_dims(a, axis=0)",
    "slice": "a[..., :2]",
    "take0": "m.take(a, m.asarray([0, 0]), axis=0)",
    "where_pos": "m.where(a > 0.1, a * 2.0, -a)",
    "setitem": "_setitem(m, a)",
    "clip": "m.clip(a, -0.5, 0.7)",
    "concat_self": "m.concat([a, a * 0.5], axis=0)",
    "stack_self": "m.stack([a, m.sin(a)], axis=0)",
    "softmax_last": "_softmax(m, a)",
    "conj": "m.conj(a) * (1.0 + 0.5j) if m.isdtype(a.dtype, 'complex floating') else a",
    "real": "m.real(a)",
    "imag": "m.imag(a) if m.isdtype(a.dtype, 'complex floating') else a",
    "gram_inv": "m.linalg.inv(_gram(m, a))",
    "gram_det": "m.linalg.det(_gram(m, a))",
    "gram_solve": "m.linalg.solve(_gram(m, a), a)",
    "gram_cholesky": "m.linalg.cholesky(_gram(m, a))",
    "gram_eigvalsh": "m.linalg.eigvalsh(_gram(m, a))",
    "vector_norm": "m.linalg.vector_norm(a, axis=-1)",
    "relu": "_nn(m, 'relu')(a + 0.013)",
    "gelu": "_nn(m, 'gelu')(a)",
    "silu": "_nn(m, 'silu')(a)",
    "softplus": "_nn(m, 'softplus')(a)",
    "log_softmax": "_nn(m, 'log_softmax')(a)",
}
# The steps a complex program draws from (the others are defined for real values).
COMPLEX_OK = {
    "exp", "sin", "tanh", "square", "sqrt", "abs", "neg_recip", "sum_all", "sum_0",
    "mean_last_keep", "prod_0", "cumsum_0", "reshape_flat", "transpose", "flip", "expand0",
    "slice", "take0", "setitem", "concat_self", "stack_self", "gram_inv", "gram_det",
    "gram_solve", "vector_norm", "add", "sub", "mul", "div", "matmul", "conj", "real",
    "imag", "vecdot",
}  # fmt: skip

# Steps with points where they are not (twice) differentiable, and the test of the dry
# run's value that keeps a program away from them.
KINKS = {
    "std_last": lambda out: np.any(np.abs(out) < 1e-3),  # std of equal values
    "vector_norm": lambda out: np.any(np.abs(out) < 1e-3),
    # repeated eigenvalues: no second derivative (2 I, from a zero matrix)
    "gram_eigvalsh": lambda out: out.shape[-1] > 1 and np.any(np.diff(out, axis=-1) < 1e-3),
}
BINARY = {
    "add": "a + b",
    "sub": "a - b",
    "mul": "a * b",
    "div": "a / (b * b + 0.5)",
    "maximum": "m.maximum(a, b + 0.013)",
    "matmul": "a @ b",
    "where_ab": "m.where(a > b, a, b * 0.5)",
    "pow": "(a * a + 0.5) ** m.tanh(b)",
    "atan2": "m.atan2(a, b * b + 0.5)",
    "vecdot": "m.vecdot(a, b)",
}


def _setitem(m, a):
    out = a * 1.0
    out[..., :1] = 0.5 * a[..., :1]
    return out


def _gram(m, a):
    """A symmetric positive definite matrix made of ``a`` (..., n, k): a a^T + 2 I."""
    return a @ m.matrix_transpose(a) + 2.0 * m.eye(a.shape[-2], dtype=a.dtype)


def _nn(m, name):
    """The nn.functional op ``name`` of ``m``'s library: ours, or torch's for torch's
    namespace (its softmax family takes ``dim``, ours ``axis``)."""
    if getattr(m, "__name__", "").startswith("array_api_compat.torch"):
        import torch

        f = getattr(torch.nn.functional, name)
        return (lambda a: f(a, dim=-1)) if name == "log_softmax" else f
    if m.__name__ == "numpy":  # the dry run: NumPy formulas of the same functions
        return _NUMPY_NN[name]
    from autodiff.nn import functional as F

    f = getattr(F, name)
    return (lambda a: f(a, axis=-1)) if name == "log_softmax" else f


def _np_log_softmax(a):
    z = a - a.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


_NUMPY_NN = {
    "relu": lambda a: np.maximum(a, 0.0),
    "gelu": lambda a: a * 0.5 * (1 + np.vectorize(math.erf, otypes=[float])(a / 2**0.5)),
    "silu": lambda a: a / (1 + np.exp(-a)),
    "softplus": lambda a: np.log1p(np.exp(a)),
    "log_softmax": _np_log_softmax,
}


def _softmax(m, a):
    e = m.exp(a - m.max(a, axis=-1, keepdims=True))
    return e / m.sum(e, axis=-1, keepdims=True)


def _run(m, steps, inputs):
    """The values of a program on namespace ``m``: its inputs, then one per step."""
    vals = list(inputs)
    env = {"m": m, "_setitem": _setitem, "_softmax": _softmax, "_gram": _gram, "_nn": _nn}
    for code, i, j in steps:
        env["a"], env["b"] = vals[i], (vals[j] if j is not None else None)
        vals.append(eval(code, env))  # noqa: S307 - our own table of expressions
    return vals


def make_program(rng):
    """(input arrays, steps): each step (code, operand index, operand index or None).
    One program in four is complex: complex128 inputs, steps from COMPLEX_OK."""
    n_in = int(rng.integers(1, 4))
    shapes = [SHAPES[int(rng.integers(len(SHAPES)))] for _ in range(n_in)]
    inputs = [rng.uniform(-1.5, 1.5, s) for s in shapes]
    cplx = rng.random() < 0.25
    if cplx:
        inputs = [np.asarray(a + 1j * rng.uniform(-1.0, 1.0, a.shape)) for a in inputs]
    unary = [n for n in UNARY if not cplx or n in COMPLEX_OK]
    binary = [n for n in BINARY if not cplx or n in COMPLEX_OK]
    import numpy as m  # the dry run: NumPy decides whether the shapes fit

    vals = list(inputs)
    steps = []
    target = int(rng.integers(3, 13))
    tries = 0
    while len(steps) < target and tries < 200:
        tries += 1
        if rng.random() < 0.35 and len(vals) > 1:
            name = binary[int(rng.integers(len(binary)))]
            code = BINARY[name]
            i, j = (int(k) for k in rng.choice(len(vals), size=2))
        else:
            name = unary[int(rng.integers(len(unary)))]
            code = UNARY[name]
            i, j = int(rng.integers(len(vals))), None
        try:
            with np.errstate(all="ignore"):
                (out,) = _run(m, [(code, 0, None if j is None else 1)],
                              [vals[i]] + ([vals[j]] if j is not None else []))[-1:]  # fmt: skip
        except Exception:
            continue
        out = np.asarray(out)
        if (
            out.dtype.kind not in "fc"
            or out.ndim > 4
            or out.size > 64
            or not np.all(np.isfinite(out))
        ):
            continue
        if name in KINKS and KINKS[name](out):
            continue
        steps.append((code, i, j))
        vals.append(out)
    return inputs, steps


def _loss(m, vals, weights, to):
    """sum over every value of Re(sum(v * w)): every step's gradient is exercised (w is
    complex for a complex v)."""
    total = 0.0
    for v, w in zip(vals, weights):
        total = total + m.sum(m.real(v * to(w)))
    return total


def _host(g, like):
    """A torch gradient as NumPy (torch may hand back a lazy zero tensor)."""
    if g is None or g._is_zerotensor():
        return np.zeros_like(like)
    return g.detach().resolve_conj().resolve_neg().numpy()


OK, FAIL, SKIP = "ok", "fail", "skip"


def _backend_refuses(xp, steps, inputs):
    """Whether the backend itself (no autodiff) raises on the program."""
    from autodiff.namespace import recorder_of

    B = recorder_of(xp.asarray(0.0)).backend
    try:
        with np.errstate(all="ignore"):
            _run(B, steps, [B.asarray(a) for a in inputs])
    except Exception:
        return True
    return False


def check(inputs, steps, xp, seed=0, central=True):
    """(OK, "") if our gradients (first and second order) equal torch's and central
    differences; (FAIL, the first mismatch); (SKIP, why) where torch can't run the
    program or computes other shapes (its backend, not ours)."""
    import torch
    from array_api_compat import torch as ct

    rng = np.random.default_rng(seed)
    with np.errstate(all="ignore"):
        import numpy as m

        shapes = [np.shape(v) for v in _run(m, steps, inputs)]
    kinds = [np.iscomplexobj(v) for v in _run(m, steps, inputs)]

    def draw(shape, c):
        return rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if c else 0)

    weights = [draw(sh, c) for sh, c in zip(shapes, kinds)]
    vs = [draw(np.shape(a), np.iscomplexobj(a)) for a in inputs]

    ts = [xp.asarray(a, requires_grad=True) for a in inputs]
    try:
        vals = _run(xp, steps, ts)
    except Exception as exc:
        if _backend_refuses(xp, steps, inputs):  # array_api_strict: out-of-bounds slices
            return SKIP, f"the backend refuses it: {type(exc).__name__}: {exc}"
        raise
    loss = _loss(xp, vals, weights, xp.asarray)
    loss.backward(create_graph=True)
    ours = [np.zeros_like(a) if t.grad is None else np.asarray(t.grad.detach()) for t, a in
            zip(ts, inputs)]  # fmt: skip
    hv = [t.grad for t in ts if t.grad is not None and t.grad.requires_grad]
    ours2 = [np.zeros_like(a) for a in inputs]
    if hv:
        h = sum(xp.sum(xp.real(t.grad * xp.asarray(np.conj(v)))) for t, v in zip(ts, vs)
                if t.grad is not None and t.grad.requires_grad)  # fmt: skip
        for t in ts:
            t.grad = None
        h.backward()
        ours2 = [np.zeros_like(a) if t.grad is None else np.asarray(t.grad) for t, a in
                 zip(ts, inputs)]  # fmt: skip

    tts = [torch.tensor(a, requires_grad=True) for a in inputs]
    try:
        tvals = _run(ct, steps, tts)
    except Exception as exc:  # torch (through array-api-compat) can't run it: not ours
        return SKIP, f"torch can't run it: {type(exc).__name__}: {exc}"
    if [tuple(v.shape) for v in tvals] != [tuple(s) for s in shapes]:
        # NumPy's cumulative_sum of a 0-d array is 1-D, torch's 0-d: nothing to compare
        return SKIP, "torch's values have other shapes than NumPy's"
    tloss = _loss(ct, tvals, weights, torch.tensor)
    tg = torch.autograd.grad(tloss, tts, create_graph=True, allow_unused=True)
    theirs = [_host(g, a) for g, a in zip(tg, inputs)]
    terms = [(g * torch.tensor(np.conj(v))).real.sum() for g, v in zip(tg, vs)
             if g is not None and g.requires_grad]  # fmt: skip
    theirs2 = [np.zeros_like(a) for a in inputs]
    if terms:
        t2 = torch.autograd.grad(sum(terms), tts, allow_unused=True)
        theirs2 = [_host(g, a) for g, a in zip(t2, inputs)]

    for order, a_list, b_list in ((1, ours, theirs), (2, ours2, theirs2)):
        for k, (a, b) in enumerate(zip(a_list, b_list)):
            if a.shape != b.shape or not np.allclose(a, b, rtol=1e-7, atol=1e-9):
                return FAIL, f"order {order}, input {k}: ours {a!r}, torch {b!r}"
    if central:
        eps = 1e-6
        with np.errstate(all="ignore"):
            for k, a in enumerate(inputs):
                num = np.zeros_like(a)
                # a complex input: along its real and its imaginary part (PyTorch's
                # convention: grad = dL/dx + i dL/dy)
                for step in (1.0, 1j) if np.iscomplexobj(a) else (1.0,):
                    for idx in np.ndindex(a.shape):
                        f = []
                        for sgn in (1, -1):
                            pert = [x.copy() for x in inputs]
                            pert[k][idx] += sgn * eps * step
                            vals = _run(m, steps, pert)
                            f.append(sum(float(np.sum(np.real(np.asarray(v) * w)))
                                         for v, w in zip(vals, weights)))  # fmt: skip
                        num[idx] += step * (f[0] - f[1]) / (2 * eps)
                if not np.allclose(ours[k], num, rtol=1e-5, atol=1e-6):
                    return (
                        FAIL,
                        f"central differences, input {k}: ours {ours[k]!r}, numeric {num!r}",
                    )
    return OK, ""


def program_text(inputs, steps):
    lines = [f"x{k} = {np.array2string(np.asarray(a), separator=', ')}  # shape {np.shape(a)}"
             for k, a in enumerate(inputs)]  # fmt: skip
    n = len(inputs)
    for s, (code, i, j) in enumerate(steps):
        text = re.sub(r"\ba\b", f"x{i}", code)
        if j is not None:
            text = re.sub(r"\bb\b", f"x{j}", text)
        lines.append(f"x{n + s} = {text}")
    return "\n".join(lines)


def fuzz(programs, seed, xp=None):
    """{OK: count, SKIP: count, FAIL: [(program text, what)]}."""
    import autodiff as ad

    xp = xp or ad.Autodiff(np)
    rng = np.random.default_rng(seed)
    out = {OK: 0, SKIP: 0, FAIL: []}
    for p in range(programs):
        inputs, steps = make_program(rng)
        try:
            status, what = check(inputs, steps, xp, seed=p)
        except Exception as exc:  # a crash on valid input is a failure too
            status, what = FAIL, f"{type(exc).__name__}: {exc}"
        if status == FAIL:
            out[FAIL].append((program_text(inputs, steps), what))
        else:
            out[status] += 1
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.splitlines()[0])
    p.add_argument("--programs", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="numpy", help="numpy or array_api_strict")
    args = p.parse_args(argv)
    import importlib

    import autodiff as ad

    xp = ad.Autodiff(importlib.import_module(args.backend))
    out = fuzz(args.programs, args.seed, xp)
    for text, what in out[FAIL]:
        print(f"---\n{text}\n# {what}")
    print(f"{args.programs} programs on {args.backend}, seed {args.seed}: {out[OK]} matched "
          f"torch.autograd and central differences (first and second order), "
          f"{len(out[FAIL])} failed, {out[SKIP]} that torch or the backend can't run "
          "alike")  # fmt: skip
    return 1 if out[FAIL] else 0


if __name__ == "__main__":
    sys.exit(main())
