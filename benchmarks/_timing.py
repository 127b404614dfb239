"""Interleaved timing: implementations run A B C A B C ... in one process, so
a noisy shared machine slows all of them alike; medians are reported."""

from __future__ import annotations

import statistics
import time

ALONE: set = set()  # non-empty: time each implementation alone, in blocks (``--alone``)


def timed(impls: dict, repeats: int) -> tuple[dict, str]:
    """Times of each implementation, interleaved or (``--alone``) in blocks, and how."""
    if ALONE:
        return blocks(impls, repeats), "runs of each alone, in 5 alternating blocks"
    return interleave(impls, repeats), "interleaved runs"


def interleave(impls: dict, repeats: int, warmup: int = 3) -> dict:
    """Seconds per call of each implementation: {name: [times]}."""
    for _ in range(warmup):
        for f in impls.values():
            f()
    times = {name: [] for name in impls}
    for _ in range(repeats):
        for name, f in impls.items():
            t0 = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t0)
    return times


def blocks(impls: dict, repeats: int, warmup: int = 3, rounds: int = 5,
           settle: float = 0.3) -> dict:  # fmt: skip
    """Seconds per call of each implementation timed alone: ``rounds`` rounds in which
    each implementation runs a block of calls (A A A ... B B B ... A A A ...).

    A block first runs untimed for ``settle`` seconds: the threads of the library that
    ran before keep spinning for a while after its last call (OpenBLAS's for ~0.1 s),
    and on 2 cores they would slow this one's first calls. Alternating rounds spread
    the machine's drift over all the implementations, as interleaving does."""
    for f in impls.values():
        for _ in range(warmup):
            f()
    times = {name: [] for name in impls}
    per_block = max(1, -(-repeats // rounds))
    for _ in range(rounds):
        for name, f in impls.items():
            start = time.perf_counter()
            f()
            while time.perf_counter() - start < settle:
                f()
            for _ in range(per_block):
                t0 = time.perf_counter()
                f()
                times[name].append(time.perf_counter() - t0)
    return times


def table(times: dict, scale: float, unit: str, base: str) -> str:
    """Median, min and max per implementation, and the ratio of medians to ``base``."""
    med = {k: statistics.median(v) for k, v in times.items()}
    lines = [
        f"| implementation | median {unit} | min | max | ratio to {base} | paired ratio |",
        "|---|---|---|---|---|---|",
    ]
    for k, v in times.items():
        # median over rounds of the time over the base's in the same round
        paired = statistics.median(a / b for a, b in zip(v, times[base]))
        lines.append(
            f"| {k} | {med[k] * scale:.2f} | {min(v) * scale:.2f} | {max(v) * scale:.2f} "
            f"| {med[k] / med[base]:.2f} | {paired:.2f} |"
        )
    return "\n".join(lines)
