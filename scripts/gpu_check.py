"""The GPU checks in one command: ``python scripts/gpu_check.py``.

1. the GPU tests (``pytest -m gpu``): CuPy kernels, no host round trip in training;
2. the benchmark cases (mlp, cnn, gru, attention; mlp and cnn also at batch 256 and
   1024) on ``Autodiff(cupy)`` and PyTorch CUDA eager, interleaved, with synchronized
   timing: medians, ratios and the peak GPU memory of one training step;
3. gradcheck over every registered op on cupy in float64.

Results go to ``benchmarks/gpu/RESULTS.md`` (with the date and the device) and to
stdout. A time guard (``--budget``, seconds) stops whatever runs past it and writes
what was measured. ``--bench CASE:BATCH``, ``--op NAME`` and ``--skip SECTION`` narrow
the run (for a quick look; the full run is what the results should record).

Exit status: 0 when every test and check passed, 1 when any failed or the run was
cut short, 2 when there is no CuPy or no CUDA device.
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks/ is not installed: import it from the checkout
RESULTS = "benchmarks/gpu/RESULTS.md"  # relative to ROOT
BENCH = [("mlp", None), ("mlp", 256), ("mlp", 1024), ("cnn", None), ("cnn", 256),
         ("cnn", 1024), ("gru", None), ("attention", None)]  # fmt: skip
BACKEND = "cupy"  # what gradcheck runs on (a test points it at numpy)
# The target: these training steps within 1.5x of PyTorch CUDA eager.
TARGET = {("mlp", 1024): 1.5, ("cnn", 1024): 1.5}


class OutOfTime(Exception):
    """The global time guard went off."""


def preflight():
    """CuPy and a CUDA device, or exit 2 with the reason (nothing is run or written)."""
    try:
        import cupy
    except ImportError as exc:
        _fail(f"CuPy is not installed ({exc}); install it with pip install -e '.[cuda]'")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError: no driver or no device
        _fail(f"no CUDA device ({type(exc).__name__}: {exc})")
    if count == 0:
        _fail("no CUDA device")
    return cupy


def _fail(message):
    print(f"gpu_check: {message}; nothing was run.", file=sys.stderr)
    raise SystemExit(2)


def device_info(cupy):
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    runtime = cupy.cuda.runtime.runtimeGetVersion()
    torch_line = "PyTorch: not installed"
    try:
        import torch

        cuda = torch.cuda.is_available()
        torch_line = f"PyTorch {torch.__version__} (CUDA {'available' if cuda else 'missing'})"
    except ImportError:
        pass
    return name, (f"CuPy {cupy.__version__}, CUDA runtime {runtime // 1000}.{runtime % 1000 // 10}"
                  f", {torch_line}")  # fmt: skip


class Guard:
    """Deadline for the run: soft checks between items, SIGALRM as the hard stop."""

    def __init__(self, budget):
        self.end = time.monotonic() + budget

    def left(self):
        return self.end - time.monotonic()

    def arm(self):
        def ring(signum, frame):
            raise OutOfTime()

        signal.signal(signal.SIGALRM, ring)
        signal.alarm(max(1, int(self.left())))

    def disarm(self):
        signal.alarm(0)


# -- 1. the GPU tests ----------------------------------------------------------------
def run_tests(guard, seconds):
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider",
           "tests/test_cupy_backend.py", "tests/test_gpu.py"]  # fmt: skip
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                              timeout=max(5, min(seconds, guard.left() - 5)))  # fmt: skip
    except subprocess.TimeoutExpired:
        return False, ["GPU tests: stopped at the time guard"]
    tail = [ln for ln in proc.stdout.splitlines() if ln.strip()][-12:]
    ok = proc.returncode == 0
    return ok, [f"`pytest -m gpu`: exit {proc.returncode}", "", "```", *tail, "```"]


# -- 2. benchmarks -------------------------------------------------------------------
def _sync(cupy, torch):
    cupy.cuda.Device().synchronize()
    if torch is not None:
        torch.cuda.synchronize()


def _peak_cupy(cupy, step):
    """Bytes the memory pool grew by over one step, from a pool holding only live arrays."""
    pool = cupy.get_default_memory_pool()
    cupy.cuda.Device().synchronize()
    pool.free_all_blocks()
    base = pool.total_bytes()
    step()
    cupy.cuda.Device().synchronize()
    # The pool keeps every block it allocated during the step: its growth is the peak.
    return pool.total_bytes() - base


def _peak_torch(torch, step):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def bench_case(cupy, torch, case, batch, seconds):
    """One case: both steps built, losses compared, then interleaved synchronized timing."""
    from autodiff.io import to_host
    from benchmarks.gpu import cases

    batch = batch or cases.default_batch(case)
    impls = {"autodiff (cupy)": cases.autodiff_step(case, cupy, batch)}
    if torch is not None:
        impls["PyTorch CUDA"] = cases.torch_step(case, "cuda", batch)
    # Two steps each (warm-up: kernels compile here); the losses are read outside timing.
    losses = {k: [float(to_host(step())), float(to_host(step()))] for k, step in impls.items()}
    peaks = {"autodiff (cupy)": _peak_cupy(cupy, impls["autodiff (cupy)"])}
    if torch is not None:
        peaks["PyTorch CUDA"] = _peak_torch(torch, impls["PyTorch CUDA"])
    times = {k: [] for k in impls}
    end = time.monotonic() + seconds
    # At least 3 runs each, at most 30, within the case's share of the time.
    while (n := min(len(v) for v in times.values())) < 3 or (time.monotonic() < end and n < 30):
        for k, step in impls.items():
            _sync(cupy, torch)
            t0 = time.perf_counter()
            step()
            _sync(cupy, torch)
            times[k].append(time.perf_counter() - t0)
    return batch, losses, peaks, times


def run_benchmarks(cupy, guard, seconds, bench=BENCH):
    try:
        import torch

        torch = torch if torch.cuda.is_available() else None
    except ImportError:
        torch = None
    if torch is not None:  # full float32 on both sides (CuPy's cuBLAS uses no TF32)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    lines = [
        "Training steps, float32; timing synchronized after each step (CuPy and PyTorch), "
        "implementations interleaved; peak = GPU memory allocated during one step beyond what "
        "was live before (CuPy: memory-pool growth from an emptied pool; PyTorch: "
        "max_memory_allocated).",
        "",
        "| case | batch | autodiff (cupy) median ms | min | PyTorch CUDA median ms | min "
        "| autodiff / PyTorch | peak MB autodiff | peak MB PyTorch | losses agree |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    ok, misses, measured = True, [], 0
    end = time.monotonic() + seconds
    a, t = "autodiff (cupy)", "PyTorch CUDA"
    for n, (case, batch) in enumerate(bench):
        per_case = (end - time.monotonic()) / (len(bench) - n)
        label = f"| {case} | {batch or 'default'} "
        if per_case < 2 or guard.left() < 20:
            lines.append(label + "| not run: time guard |" + " |" * 7)
            ok = False
            continue
        try:
            b, losses, peaks, times = bench_case(cupy, torch, case, batch, 0.6 * per_case)
        except OutOfTime:
            lines.append(label + "| stopped at the time guard |" + " |" * 7)
            ok = False
            break
        except Exception as exc:  # one case failing must not hide the others
            lines.append(label + f"| ERROR {type(exc).__name__}: {str(exc)[:120]} |" + " |" * 7)
            ok = False
            continue
        med = {k: f"{statistics.median(v) * 1e3:.3f}" for k, v in times.items()}
        low = {k: f"{min(v) * 1e3:.3f}" for k, v in times.items()}
        mb = {k: f"{v / 2**20:.1f}" for k, v in peaks.items()}
        ratio = statistics.median(times[a]) / statistics.median(times[t]) if t in times else None
        agree = "-"
        if t in losses:
            same = all(abs(x - y) <= 1e-3 * max(1.0, abs(y)) for x, y in zip(losses[a], losses[t]))
            ok &= same
            agree = "yes" if same else f"NO: {losses[a]} vs {losses[t]}"
        limit = TARGET.get((case, batch))
        measured += limit is not None
        if limit is not None and (ratio is None or ratio > limit):
            misses.append(
                f"{case} at batch {b}: " + ("no PyTorch" if ratio is None else f"{ratio:.2f}x")
            )
        shown = "-" if ratio is None else f"{ratio:.2f}"
        cells = [case, b, med[a], low[a], med.get(t, "-"), low.get(t, "-"), shown,
                 mb[a], mb.get(t, "-"), agree]  # fmt: skip
        lines.append("| " + " | ".join(map(str, cells)) + " |")
        print(lines[-1], flush=True)
    lines.append("")
    target = "Target (mlp and cnn at batch 1024 within 1.5x of PyTorch CUDA eager)"
    if misses:
        lines.append(f"{target}: missed: " + "; ".join(misses))
    elif measured:
        lines.append(f"{target}: met.")
    else:
        lines.append(f"{target}: not measured.")
    return ok, lines


# -- 3. gradcheck --------------------------------------------------------------------
def run_gradcheck(guard, order, ops=None):
    from gradcheck.cli import run
    from gradcheck.specs import SPECS

    t0 = time.perf_counter()
    records, seen, cut = [], set(), False
    try:
        for rec in run(BACKEND, ops, order=order, dtype="float64"):
            records.append(rec)
            seen.add(rec["op"])
            if guard.left() < 10:
                cut = True
                break
    except OutOfTime:
        cut = True
    failed = [r for r in records if r["status"] not in ("ok", "nondiff")]
    wanted = set(ops or SPECS)
    missing = sorted(wanted - seen)
    lines = [
        f"{len(seen)} of {len(wanted)} ops, {len(records)} checks (order {order}, float64) in "
        f"{time.perf_counter() - t0:.0f} s: {len(records) - len(failed)} passed, "
        f"{len(failed)} failed" + (" (stopped at the time guard)" if cut else "")
    ]
    if missing:
        lines.append(f"not reached: {', '.join(missing)}")
    lines += [f"- {r['status']} {r['op']} [{r['sample']}] order {r['order']}: "
              f"{str(r['detail'])[:200]}" for r in failed]  # fmt: skip
    return not failed and not missing, lines


def write(sections, header, out):
    text = "\n".join([*header, ""] + [ln for title, body in sections
                                      for ln in (f"## {title}", "", *body, "")])  # fmt: skip
    path = ROOT / out  # ``out`` as given when absolute
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(text)
    print(f"wrote {out}")


def _bench_arg(text):
    case, _, batch = text.partition(":")
    from benchmarks.gpu.cases import CASES

    if case not in CASES:
        raise argparse.ArgumentTypeError(f"unknown case {case!r}; one of {', '.join(CASES)}")
    return case, int(batch) if batch else None


def main(argv=None):
    p = argparse.ArgumentParser(prog="gpu_check", description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, default=270.0, help="seconds for the whole run")
    p.add_argument("--order", type=int, choices=(1, 2), default=1,
                   help="gradcheck order (2 also checks second derivatives; slower)")  # fmt: skip
    p.add_argument("--skip", action="append", default=[], choices=("tests", "bench", "gradcheck"))
    p.add_argument(
        "--bench",
        action="append",
        type=_bench_arg,
        metavar="CASE[:BATCH]",
        help="run only these benchmark cases (default: all, as listed in BENCH)",
    )
    p.add_argument(
        "--op", action="append", dest="ops", metavar="NAME", help="gradcheck only this op"
    )
    p.add_argument("--out", default=RESULTS, help=f"markdown file (default {RESULTS})")
    args = p.parse_args(argv)
    cupy = preflight()
    os.chdir(ROOT)
    guard = Guard(args.budget)
    name, versions = device_info(cupy)
    header = [
        "# GPU results",
        "",
        f"{datetime.date.today().isoformat()}, {name}; {versions}.",
        "Written by `python scripts/gpu_check.py`.",
    ]
    sections, ok = [], True
    plan = [
        ("GPU tests", "tests", lambda: run_tests(guard, 0.2 * args.budget)),
        ("Benchmarks: autodiff on CuPy vs PyTorch CUDA eager", "bench",
         lambda: run_benchmarks(cupy, guard, min(0.4 * args.budget, 0.6 * guard.left()),
                                args.bench or BENCH)),
        (f"gradcheck on {BACKEND}", "gradcheck",
         lambda: run_gradcheck(guard, args.order, args.ops)),
    ]  # fmt: skip
    guard.arm()
    try:
        for title, key, section in plan:
            if key in args.skip:
                continue
            if guard.left() < 5:
                sections.append((title, ["not run: time guard"]))
                ok = False
                continue
            print(f"== {title}", flush=True)
            try:
                passed, body = section()
            except OutOfTime:
                passed, body = False, ["stopped at the time guard"]
            except (Exception, SystemExit) as exc:  # record it, keep the other sections
                passed, body = False, [f"ERROR {type(exc).__name__}: {exc}"]
            ok &= passed
            sections.append((title, body))
    finally:
        guard.disarm()
        write(sections, header, args.out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
