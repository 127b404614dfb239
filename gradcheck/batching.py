"""The batching check: ``vmap`` of each op against a loop of it, driven by the specs.

For every sample of an op's spec, three perturbed copies of its inputs are stacked
along a new first axis; ``vmap`` of the sample's call over them must equal the call on
each copy (values, float64), and where the op has a batching rule, no op of the call
may fall back to the loop (the fallback's warning names the op). ``gradcheck
--batching`` runs it (``--batching --op NAME`` for one op); ``tests/test_vmap.py``
runs it on numpy and array_api_strict.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
from autodiff.backends import to_host

import autodiff as ad
from autodiff.engine import batching, registry

__all__ = ["check_batching", "perturbed", "run"]

RTOL, ATOL = 1e-9, 1e-11
_FALLBACK = re.compile(r"vmap: no batching rule for '([^']+)'")


def perturbed(inputs, copies=3, seed=0):
    """``copies`` versions of the sample's inputs, stacked along a new first axis: each
    scaled a little (which keeps signs, symmetry, order and most domains) and nudged."""
    rng = np.random.default_rng(seed + 777)
    out = []
    for a in inputs:
        a = np.asarray(a)
        u = rng.uniform(-1, 1, a.shape)
        if np.iscomplexobj(a):
            u = u + 1j * rng.uniform(-1, 1, a.shape)
        out.append(np.stack([a * (1 + 0.03 * k) + 1e-3 * k * u for k in range(copies)]))
    return out


def _arrays(out):
    """The outputs of a call as NumPy arrays (a tuple of outputs flattened)."""
    if isinstance(out, (tuple, list)):
        return [a for o in out for a in _arrays(o)]
    data = out.data if isinstance(out, ad.Tensor) else out
    return [np.asarray(to_host(data))]


def _floating(xp, o):
    return isinstance(o, ad.Tensor) and xp.isdtype(o.dtype, ("real floating", "complex floating"))


def _check_grads(xp, sample, args, in_axes, example, seed):
    """Per-example gradients: ``vmap(grad(s))`` of the pairing ``s`` of the op's floating
    outputs with fixed cotangents, against a loop of ``grad(s)``: the rule's ops are
    recorded on the whole batch, the primals broadcast, and each example must get its own
    gradient (an unbatched input's too)."""
    rng = np.random.default_rng(seed + 99)
    with ad.no_grad():
        outs = _flat(sample.call(xp, *example(0)))
    us = [rng.standard_normal(tuple(o.shape)) if _floating(xp, o) else None for o in outs]
    if all(u is None for u in us):
        return []

    def scalar(*t):
        total = 0.0
        for o, u in zip(_flat(sample.call(xp, *t)), us):
            if u is not None:
                total = total + xp.sum(xp.real(o * xp.asarray(u, dtype=xp.real(o).dtype)))
        return total

    nums = tuple(range(len(args)))
    g = ad.grad(scalar, argnums=nums)
    try:
        loop = [g(*example(k)) for k in range(3)]
    except Exception:  # not differentiable at these inputs for the engine: not ours
        return []
    try:
        got = ad.vmap(g, in_axes=in_axes)(*[xp.asarray(a) for a in args])
    except Exception as exc:
        return [f"vmap(grad): {type(exc).__name__}: {exc}"]
    bad = []
    for i in nums:
        want = np.stack([np.asarray(to_host(_data(loop[k][i]))) for k in range(3)])
        have = np.asarray(to_host(_data(got[i])))
        if have.shape != want.shape or not np.allclose(have, want, rtol=1e-8, atol=1e-10,
                                                       equal_nan=True):  # fmt: skip
            err = np.max(np.abs(have - want)) if have.shape == want.shape else None
            bad.append(f"vmap(grad) input {i}: shape {have.shape} vs {want.shape}, max err {err}")
    return bad


def _data(a):
    return a.data if isinstance(a, ad.Tensor) else a


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [a for o in out for a in _flat(o)]
    return [out]


def check_batching(name, xp=None, seed=0, grads=True):
    """Check op ``name`` over its spec's samples: every input mapped, then (for samples of
    several inputs) each input in turn the same for every example (in_axes None); values,
    and with ``grads`` per-example gradients through ``vmap(grad)``. A list of records
    ``(label, status, detail)``; status "ok", "fallback" (right values, by the loop: the
    op has no rule), "refused" (vmap's clear error for what it can't batch, as JAX: a
    boolean mask that differs per example), "FAIL" (values differ, or an op with a rule
    fell back) or "ERROR"."""
    from .specs import SPECS

    xp = xp or ad.Autodiff(np)
    kind = registry.get(name).batch_kind
    results = []
    for sample in SPECS[name].samples(seed):
        stacked = perturbed(sample.inputs, seed=seed)
        k = len(stacked)
        variants = [(sample.label, (0,) * k)]
        if k > 1:
            variants += [
                (
                    f"{sample.label}; input {j} unbatched",
                    tuple(None if i == j else 0 for i in range(k)),
                )
                for j in range(k)
            ]
        for label, in_axes in variants:
            status, detail = _check_variant(xp, sample, stacked, in_axes, kind, name, grads, seed)
            results.append((label, status, detail))
            if status == "unsupported":
                break
    return results


def _check_variant(xp, sample, stacked, in_axes, kind, name, grads, seed):
    """(status, detail) of one sample with one ``in_axes`` (0 or None per input)."""
    args = [s if a == 0 else s[0] for s, a in zip(stacked, in_axes)]

    def example(k):
        return [xp.asarray(s[k] if a == 0 else s[0]) for s, a in zip(stacked, in_axes)]

    try:
        with ad.no_grad():
            loop = [_arrays(sample.call(xp, *example(k))) for k in range(3)]
    except Exception as exc:  # the backend can't run the sample (as gradcheck's)
        return "unsupported", f"{type(exc).__name__}: {exc}"
    batching._warned.clear()  # each fallback warns once: see every one here
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with ad.no_grad():
                got = ad.vmap(lambda *t: sample.call(xp, *t), in_axes=in_axes)(
                    *[xp.asarray(a) for a in args]
                )
        got = _arrays(got)
    except ValueError as exc:  # vmap's own refusals (a per-example boolean mask)
        status = "refused" if str(exc).startswith("vmap:") else "ERROR"
        return status, f"{type(exc).__name__}: {exc}"
    except Exception as exc:
        return "ERROR", f"{type(exc).__name__}: {exc}"
    fell = sorted({m.group(1) for w in caught for m in [_FALLBACK.search(str(w.message))] if m})
    bad = []
    for j, g in enumerate(got):
        want = np.stack([loop[k][j] for k in range(3)])
        if g.shape != want.shape or not np.allclose(g, want, rtol=RTOL, atol=ATOL,
                                                    equal_nan=True):  # fmt: skip
            err = np.max(np.abs(g - want)) if g.shape == want.shape else None
            bad.append(f"output {j}: shape {g.shape} vs {want.shape}, max err {err}")
    if not bad and grads:
        bad = _check_grads(xp, sample, args, in_axes, example, seed)
    if bad:
        return "FAIL", "; ".join(bad)
    if fell and (kind != "fallback" or fell != [name]):
        return "FAIL", f"fell back to the loop for {fell}"
    if fell:
        return "fallback", "the loop (no batching rule)"
    return "ok", ""


def run(xp, names, progress=None):
    """Yield ``(op, kind, sample, status, detail)`` for every sample of ``names``."""
    for i, name in enumerate(names):
        if progress:
            progress(i, len(names), name)
        kind = registry.get(name).batch_kind
        for label, status, detail in check_batching(name, xp):
            yield name, kind, label, status, detail


def main(xp, backend, names, quiet=False, progress=None):
    """The ``--batching`` report; returns the exit status."""
    rows = list(run(xp, names, progress))
    per_op = {}
    for name, kind, _, status, _ in rows:
        agg = per_op.setdefault(name, {"kind": kind, "n": 0, "bad": 0})
        agg["n"] += 1
        agg["bad"] += status in ("FAIL", "ERROR")
    if not quiet:
        print(f"{'op':28s} {'batching':9s} {'checks':>6s}  status")
        for name, agg in per_op.items():
            status = "ok" if not agg["bad"] else f"FAIL ({agg['bad']})"
            print(f"{name:28s} {agg['kind']:9s} {agg['n']:6d}  {status}")
    failed = [r for r in rows if r[3] in ("FAIL", "ERROR")]
    for name, _, label, status, detail in rows:
        if status in ("unsupported", "refused"):
            print(f"{status.upper()} {name} [{label}] batching: {detail}")
    for name, _, label, status, detail in failed:
        print(f"{status} {name} [{label}] batching: {detail}")
    kinds = {}
    for agg in per_op.values():
        kinds[agg["kind"]] = kinds.get(agg["kind"], 0) + 1
    parts = ", ".join(f"{kinds[k]} {k}" for k in registry.BATCH_KINDS if k in kinds)
    checked = sum(r[3] != "unsupported" for r in rows)
    refused = sum(r[3] == "refused" for r in rows)
    print(f"batching: {len(per_op)} ops ({parts}), {checked} checks on {backend}: "
          f"{checked - len(failed)} passed ({refused} refused clearly), "
          f"{len(failed)} failed")  # fmt: skip
    return 1 if failed else 0
