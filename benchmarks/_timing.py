"""Interleaved timing: implementations run A B C A B C ... in one process, so
a noisy shared machine slows all of them alike; medians are reported."""

from __future__ import annotations

import statistics
import time


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


def blocks(impls: dict, repeats: int, warmup: int = 3) -> dict:
    """Seconds per call of each implementation timed alone, one after the other
    (A A A ... B B B ...): no implementation runs while another's threads still spin."""
    times = {}
    for name, f in impls.items():
        for _ in range(warmup):
            f()
        times[name] = []
        for _ in range(repeats):
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
