"""``gradcheck``: prove every registered VJP and JVP rule against central differences.

Each sample gets the VJP checks (first order, and second where the op is twice
differentiable) and the JVP checks (``J v`` against central differences and against the
VJP rules, first order, and second where it matters); ``--rule`` picks one kind. The
per-op table and summary line of the VJP checks come first, then the JVP's.

Exit status: 0 when every check passes, 1 when any fails, 2 for a usage error
or an unavailable backend.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import sys
import time

import numpy as np

from autodiff.engine import registry
from autodiff.engine.namespace import recorder_of


def _namespace(name):
    import autodiff as ad

    modules = {
        "numpy": "numpy",
        "array_api_strict": "array_api_strict",
        "torch": "array_api_compat.torch",
        "cupy": "array_api_compat.cupy",
        "dask": "array_api_compat.dask.array",
    }
    try:
        return ad.Autodiff(importlib.import_module(modules.get(name, name)))
    except Exception as exc:  # ImportError, or not an Array API namespace
        raise SystemExit(f"gradcheck: backend {name!r} is not available ({exc})") from None


@contextlib.contextmanager
def _scheduler(xp):
    """A context to run one check in: on dask, its synchronous scheduler (the checks
    compute many tiny graphs, which threads only slow down), and without the
    ComplexWarning dask's guess of an output's type (its "meta") gives for every
    complex-to-real op (the values are computed right); elsewhere none."""
    if xp.__name__ != "autodiff.dask.array":
        yield
        return
    import warnings

    import dask

    with dask.config.set(scheduler="synchronous"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=np.exceptions.ComplexWarning,
                                module=r"dask\.")  # fmt: skip
        yield


def _record(op, status, detail, rule="vjp"):
    return {"op": op, "sample": None, "order": 1, "rule": rule, "status": status,
            "max_abs": None, "max_rel": None, "detail": detail}  # fmt: skip


def run(backend="numpy", ops=None, order=2, seed=0, dtype="float64", mode="auto",
        progress=None, rules=("vjp", "jvp"), jobs=1, registry_gaps=True):  # fmt: skip
    """Check ops on a backend; yields one record per (op, sample, rule, order): ``rule``
    "vjp" (reverse mode) or "jvp" (forward mode). ``jobs`` > 1 checks the ops in that
    many processes (the records come in the same order); ``registry_gaps``: first a
    record per registered op without a spec and per spec without an op."""
    from .core import TOLERANCES, check_grad, check_jvp, check_jvp_second, check_second
    from .specs import SPECS, missing_specs

    xp = _namespace(backend)
    npx = _namespace("numpy")
    lazy = recorder_of(xp.asarray(0.0)).backend.lazy
    if registry_gaps:
        no_spec, no_op = missing_specs()
        for name in no_spec:
            yield _record(name, "no spec", "registered op without a spec")
        for name in no_op:
            yield _record(name, "no op", "spec without a registered op")
    names = sorted(SPECS) if not ops else ops
    if jobs > 1 and len(names) > 1:
        unknown = [n for n in names if n not in SPECS]
        if unknown:
            raise SystemExit(f"gradcheck: no op named {unknown[0]!r} (see gradcheck --list)")
        settings = (backend, order, seed, dtype, mode, rules)
        yield from _in_processes(jobs, names, progress, settings)
        return
    for n, name in enumerate(names):
        if progress:
            progress(n, len(names), name)
        if name not in SPECS:
            raise SystemExit(f"gradcheck: no op named {name!r} (see gradcheck --list)")
        spec = SPECS[name]
        if dtype.startswith("complex") and not registry.get(name).complex:
            for rule in rules:
                yield _record(name, "real only", "defined for real inputs only", rule)
            continue
        for sample in spec.samples(seed):
            f = lambda *t, s=sample: s.call(xp, *t)  # noqa: E731
            # on a lazy backend the central differences are taken of the same function
            # on NumPy: each evaluation there is an eager call, not a graph to compute
            ref = (lambda *t, s=sample: s.call(npx, *t)) if lazy else None  # noqa: E731
            missing = _unsupported(xp, sample, dtype)
            if missing is not None:  # the backend's gap, not a rule's: reported once
                yield {"op": name, "sample": sample.label, "order": 1, "rule": rules[0],
                       "status": "unsupported", "max_abs": None, "max_rel": None,
                       "detail": missing}  # fmt: skip
                continue
            atol, rtol = spec.tolerances(TOLERANCES[dtype])
            first = {"atol": atol, "rtol": rtol, "mode": mode}
            checks = []
            if "vjp" in rules:
                checks.append(("vjp", 1, check_grad, first))
                if order >= 2 and spec.second_order:
                    checks.append(("vjp", 2, check_second, {}))
            if "jvp" in rules:
                checks.append(("jvp", 1, check_jvp, {"atol": atol, "rtol": rtol}))
                if order >= 2 and spec.second_order:
                    checks.append(("jvp", 2, check_jvp_second, {}))
            for rule, k, check, kw in checks:
                rec = {"op": name, "sample": sample.label, "order": k, "rule": rule}
                try:
                    with _scheduler(xp):
                        res = check(f, *sample.inputs, xp=xp, seed=seed, dtype=dtype,
                                    raise_on_fail=False, reference=ref, **kw)  # fmt: skip
                    rec.update(status=res.status, max_abs=res.max_abs, max_rel=res.max_rel,
                               detail="" if res.status == "ok" else str(res))  # fmt: skip
                except Exception as exc:  # an error in the rule is a failure too
                    rec.update(status="ERROR", max_abs=None, max_rel=None,
                               detail=f"{type(exc).__name__}: {exc}")  # fmt: skip
                yield rec


def _one_op(name, fingerprint, settings):
    """The records of one op (a worker's task): ``run``'s on it alone; None when this
    process's op or spec differs from the caller's (registered or changed at run time)."""
    from .specs import SPECS

    if name not in SPECS or _fingerprint(name) != fingerprint:
        return None
    backend, order, seed, dtype, mode, rules = settings
    return list(run(backend, [name], order, seed, dtype, mode, None, rules, 1, False))


def _fingerprint(name):
    """Where the op's functions (forward, rules) and its spec's samples come from: equal
    in a fresh process unless this one registered or changed them at run time."""
    import dataclasses

    from .specs import SPECS

    def where(fn):
        code = getattr(fn, "__code__", None)
        return (getattr(fn, "__module__", None), getattr(fn, "__qualname__", repr(fn)),
                code and code.co_firstlineno)  # fmt: skip

    parts = []
    op = registry.ops().get(name)
    for f in dataclasses.fields(op) if op is not None else ():
        value = getattr(op, f.name)
        for v in value if isinstance(value, tuple) else (value,):
            if callable(v):
                parts.append((f.name, where(v)))
    spec = SPECS.get(name)
    return tuple(parts), spec and (where(spec.make), spec.order2, spec.atol, spec.rtol)


def _in_processes(jobs, names, progress, settings):
    """``run``'s records of ``names``, checked in ``jobs`` fresh processes (spawned: a
    fork would copy the threads of the libraries loaded here), op by op, in order; an op
    this process registered or changed at run time is checked here."""
    import concurrent.futures
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    prints = [_fingerprint(n) for n in names]
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
        done = pool.map(_one_op, names, prints, [settings] * len(names))
        for n, (name, records) in enumerate(zip(names, done)):
            if progress:
                progress(n, len(names), name)
            if records is None:
                backend, order, seed, dtype, mode, rules = settings
                records = run(backend, [name], order, seed, dtype, mode, None, rules, 1, False)
            yield from records


def _jobs(value):
    """``--jobs``: a number of processes, 0 for one per CPU this process may use."""
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError(f"--jobs must be 0 or more, not {n}")
    if n == 0:
        import os

        n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, n)


def _unsupported(xp, sample, dtype="float64"):
    """Why the backend can't run the sample's forward at all (NotImplementedError from
    the library itself, e.g. unique_all in array_api_compat's torch; on complex inputs,
    a TypeError: array_api_strict's var takes real values only; on dask, an output whose
    shape depends on the values: unique_*, a boolean mask), else None."""
    import autodiff as ad

    from .core import as_checked

    complex_run = dtype.startswith("complex")
    try:
        with ad.no_grad(), _scheduler(xp):
            out = sample.call(xp, *[xp.asarray(a) for a in as_checked(sample.inputs, dtype)])
    except NotImplementedError as exc:
        return f"the backend lacks it: {exc}"
    except TypeError as exc:
        return f"the backend takes real inputs only here: {exc}" if complex_run else None
    except Exception:  # any other error is the checks' to report
        return None
    for o in out if isinstance(out, (tuple, list)) else (out,):
        shape = getattr(o, "shape", ())
        if any(n is None or n != n for n in shape):  # None, or dask's NaN
            return (f"the output's shape {tuple(shape)} depends on the values, which a lazy "
                    "backend doesn't know before computing (the checks need it)")  # fmt: skip
    return None


def _progress(i, n, name):
    sys.stderr.write(f"\r\033[K[{i + 1}/{n}] {name}")
    sys.stderr.flush()


def _fmt(v):
    return "-" if v is None else f"{v:.1e}"


def main(argv=None):
    p = argparse.ArgumentParser(prog="gradcheck", description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="numpy",
                   help="numpy, array_api_strict, torch, cupy, dask or an importable "
                   "module")  # fmt: skip
    p.add_argument("--op", action="append", dest="ops", metavar="NAME", help="check only this op")
    p.add_argument(
        "--dtype",
        choices=("float64", "float32", "complex128", "complex64"),
        default="float64",
        help="dtype of the analytic gradient (differences are always float64); a complex "
        "one makes every input complex, for the ops that take complex inputs",
    )
    p.add_argument(
        "--mode",
        choices=("full", "fast", "auto"),
        default="auto",
        help="full Jacobian, random projections, or full for small inputs",
    )
    p.add_argument(
        "--order",
        type=int,
        choices=(1, 2),
        default=2,
        help="2 also checks the VJP of the VJP where the op is twice differentiable",
    )
    p.add_argument(
        "--rule",
        choices=("vjp", "jvp", "both"),
        default="both",
        help="check the VJP rules (reverse mode), the JVP rules (forward mode), or both",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", "-j", type=_jobs, default="0", metavar="N",
                   help="check the ops in N processes (default 0: one per CPU)")  # fmt: skip
    p.add_argument("--json", metavar="PATH", help="write one record per (op, sample, order)")
    p.add_argument("--list", action="store_true", help="list the ops and their samples")
    p.add_argument(
        "--batching",
        action="store_true",
        help="check vmap instead: each op batched over 3 perturbed copies of its samples "
        "against a loop of it (values and per-example gradients), and that an op with a "
        "batching rule doesn't fall back to the loop",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="print failures and the summary only")
    args = p.parse_args(argv)
    from .specs import SPECS

    if args.list:  # by chapter of the spec (or family of nn ops), as the registry says
        ops = registry.ops()
        # where each rule comes from: Op.vjp_kind, Op.jvp_kind, Op.batch_kind
        print(f"{'op':28s} {'chapter':18s} {'samples':>7s}  {'vjp':8s} {'jvp':9s} "
              f"{'batch':9s} notes")  # fmt: skip
        for name, spec in sorted(SPECS.items(), key=lambda item: (ops[item[0]].chapter, item[0])):
            op = ops[name]
            notes = ("" if spec.second_order else "  (first order only)") + (
                "" if op.complex else "  (real inputs only)"
            )
            print(f"{name:28s} {op.chapter:18s} {len(spec.samples(args.seed)):7d}  "
                  f"{op.vjp_kind or '-':8s} {op.jvp_kind or '-':9s} {op.batch_kind:9s}"
                  f"{notes}".rstrip())  # fmt: skip
        missing = sorted(n for n, op in ops.items() if op.kind == registry.MISSING)
        for name in missing:  # registered without a rule: raises on a tensor that requires grad
            print(f"{name:28s} {ops[name].chapter:18s} MISSING (no rule yet)")
        print(f"{len(SPECS)} ops with specs, {len(missing)} without a rule")
        return 0
    if args.batching:
        from . import batching as check

        try:
            xp = _namespace(args.backend)
        except SystemExit as exc:
            print(exc, file=sys.stderr)
            return 2
        names = args.ops or sorted(SPECS)
        unknown = [n for n in names if n not in SPECS]
        if unknown:
            print(f"gradcheck: no op named {unknown[0]!r} (see gradcheck --list)", file=sys.stderr)
            return 2
        progress = _progress if sys.stderr.isatty() and not args.quiet else None
        status = check.main(xp, args.backend, names, args.quiet, progress)
        if progress:
            sys.stderr.write("\r\033[K")
        return status
    rules = ("vjp", "jvp") if args.rule == "both" else (args.rule,)
    t0 = time.perf_counter()
    records = []
    per_op = {rule: {} for rule in rules}
    progress = _progress if sys.stderr.isatty() and not args.quiet else None
    try:
        for rec in run(args.backend, args.ops, args.order, args.seed, args.dtype, args.mode,
                       progress, rules, args.jobs):  # fmt: skip
            records.append(rec)
            agg = per_op[rec["rule"]].setdefault(
                rec["op"], {"n": 0, "abs": 0.0, "rel": 0.0, "bad": []}
            )
            agg["n"] += 1
            for key, field in (("abs", "max_abs"), ("rel", "max_rel")):
                if rec[field] is not None and np.isfinite(rec[field]):
                    agg[key] = max(agg[key], rec[field])
            if rec["status"] not in ("ok", "nondiff", "unsupported", "real only"):
                agg["bad"].append(rec)
            elif rec["status"] != "ok":
                agg.setdefault(rec["status"], []).append(rec)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    if progress:
        sys.stderr.write("\r\033[K")
    dt = time.perf_counter() - t0
    failed = 0
    for rule in rules:
        failed += _report(args, rule, [r for r in records if r["rule"] == rule], per_op[rule], dt)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(records, fh, indent=1)
    return 1 if failed else 0


def _report(args, rule, records, per_op, dt):
    """Print the table, the notable records and the summary line of one kind of rule;
    returns how many checks failed."""
    passing = ("ok", "nondiff", "unsupported", "real only")
    failed = [r for r in records if r["status"] not in passing]
    kinks = [r for r in records if r["status"] == "nondiff"]
    unsupported = [r for r in records if r["status"] == "unsupported"]
    real_only = [r for r in records if r["status"] == "real only"]
    for r in real_only:
        per_op.pop(r["op"], None)
    jvp = rule == "jvp"
    tag = "jvp " if jvp else ""
    ops = registry.ops()

    def jvp_kind(name):
        return ops[name].jvp_kind if name in ops else None

    if not args.quiet:
        kind = f" {'jvp':9s}" if jvp else ""
        print(f"{'op':28s}{kind} {'checks':>6s} {'max abs err':>11s} {'max rel err':>11s}  status")
        for name, agg in per_op.items():
            status = "ok" if not agg["bad"] else f"FAIL ({len(agg['bad'])})"
            if agg.get("nondiff"):
                status += f", {len(agg['nondiff'])} at a kink"
            if agg.get("unsupported"):
                status += f", {len(agg['unsupported'])} not in the backend"
            errs = f"{_fmt(agg['abs']):>11s} {_fmt(agg['rel']):>11s}"
            kind = f" {jvp_kind(name) or '-':9s}" if jvp else ""
            print(f"{name:28s}{kind} {agg['n']:6d} {errs}  {status}")
    for r in kinks:
        print(f"KINK {r['op']} [{r['sample']}] {tag}order {r['order']}: {r['detail']}")
    for r in unsupported:
        print(f"UNSUPPORTED {r['op']} [{r['sample']}]{' jvp' if jvp else ''}: {r['detail']}")
    for r in failed:
        print(f"{r['status']} {r['op']} [{r['sample']}] {tag}order {r['order']}: {r['detail']}")
    at_kinks = f", {len(kinks)} at non-differentiable points" if kinks else ""
    lacking = f", {len(unsupported)} the backend can't run" if unsupported else ""
    passed = len(records) - len(failed) - len(unsupported) - len(real_only)
    skipped = f"; {len(real_only)} ops take real inputs only" if real_only else ""
    checks = len(records) - len(real_only)
    if jvp:
        kinds = {}
        for name in per_op:
            k = jvp_kind(name)
            kinds[k] = kinds.get(k, 0) + 1
        parts = ", ".join(f"{kinds[k]} {k}" for k in registry.JVP_KINDS if kinds.get(k))
        print(f"jvp: {len(per_op)} ops ({parts}), {checks} checks on {args.backend} "
              f"({args.dtype}): {passed} passed, {len(failed)} failed{at_kinks}{lacking}"
              f"{skipped}")  # fmt: skip
    else:
        print(f"{len(per_op)} ops, {checks} checks on {args.backend} "
              f"({args.dtype}, {args.mode}): {passed} passed, {len(failed)} failed{at_kinks}"
              f"{lacking} in {dt:.1f} s{skipped}")  # fmt: skip
    return len(failed)


if __name__ == "__main__":
    sys.exit(main())
