"""Forward mode: ``ad.jvp`` (record, then one forward pass through the JVP rules)
against ``ad.vjp`` (record, then one backward pass) on an element-wise
``R^1000 -> R^1000`` function of 9 ops, with hand-written NumPy (the function and its
derivative by hand: the floor); then ``ad.jacfwd`` of an ``R^1 -> R^10000`` function
(one forward pass) against ``ad.jacrev`` (10000 backward passes).

For an element-wise function ``J`` is diagonal, so ``J v`` and ``J^T v`` are the same
vector: the three implementations are first checked to agree on it.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import autodiff as ad

from ._case import AUTODIFF, NUMPY
from ._timing import table, timed

N = 1000
M = 10000
JVP, VJP = f"{AUTODIFF} jvp", f"{AUTODIFF} vjp"


def _data():
    rng = np.random.default_rng(0)
    return rng.uniform(-1.0, 1.0, N), rng.standard_normal(N)


def element_wise(xp, x):
    """sin(x) exp(-x^2) + tanh(x)^2 - sqrt(x^2 + 1) / 2: 9 element-wise ops (x * x once)."""
    return xp.sin(x) * xp.exp(-x * x) + xp.tanh(x) ** 2 - 0.5 * xp.sqrt(x * x + 1.0)


def _by_hand(x0, v0):
    def run():
        s, e, t = np.sin(x0), np.exp(-x0 * x0), np.tanh(x0)
        r = np.sqrt(x0 * x0 + 1.0)
        d = np.cos(x0) * e - 2 * x0 * s * e + 2 * t * (1 - t * t) - 0.5 * x0 / r
        return d * v0

    return run


def _autodiff(x0, v0):
    xp = ad.Autodiff(np)
    x, v = xp.asarray(x0), xp.asarray(v0)

    def jvp():
        return ad.jvp(lambda a: element_wise(xp, a), (x,), (v,))[1].data

    def vjp():
        _, pull = ad.vjp(lambda a: element_wise(xp, a), x)
        return pull(v)[0].data

    return jvp, vjp


def _jacobian_case(repeats):
    """(jacfwd times, jacrev times) of s -> sin(g s) exp(-g s) + g s^2 on a grid g of M."""
    xp = ad.Autodiff(np)
    grid = xp.asarray(np.linspace(0.0, 1.0, M))

    def f(s):
        return xp.sin(grid * s) * xp.exp(-grid * s) + grid * s * s

    s0 = xp.asarray(np.asarray(0.7))
    g = np.linspace(0.0, 1.0, M)
    expected = (np.cos(g * 0.7) - np.sin(g * 0.7)) * g * np.exp(-g * 0.7) + 2 * 0.7 * g
    fwd, rev = [], []
    for k in range(repeats + 2):
        t0 = time.perf_counter()
        jf = ad.jacfwd(f)(s0)
        fwd.append(time.perf_counter() - t0)
        if k < max(1, repeats // 10):  # 10000 backward passes: a few runs say enough
            t0 = time.perf_counter()
            jr = ad.jacrev(f)(s0)
            rev.append(time.perf_counter() - t0)
            np.testing.assert_allclose(np.asarray(jr.data), expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.asarray(jf.data), expected, rtol=1e-12, atol=1e-14)
    return fwd[2:], rev


def main(repeats: int = 50) -> str:
    x0, v0 = _data()
    jvp, vjp = _autodiff(x0, v0)
    hand = _by_hand(x0, v0)
    np.testing.assert_allclose(jvp(), hand(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(vjp(), hand(), rtol=1e-12, atol=1e-14)
    times, how = timed({JVP: jvp, VJP: vjp, NUMPY: hand}, repeats)
    out = [
        f"forward: jvp vs vjp of an element-wise R^{N} -> R^{N} function (9 ops, float64), "
        f"each recording it; {repeats} {how}",
        "",
        table(times, 1e6, "us", VJP),
    ]
    ratio = statistics.median(times[JVP]) / statistics.median(times[VJP])
    out.append(f"\njvp / vjp: {ratio:.2f} (target <= 1.2)")
    fwd, rev = _jacobian_case(repeats)
    mf, mr = statistics.median(fwd), statistics.median(rev)
    out += [
        "",
        f"jacfwd vs jacrev of an R^1 -> R^{M} function (5 ops): jacfwd is one forward pass, "
        f"jacrev {M} backward passes",
        "",
        "| implementation | median ms | min | max | runs |",
        "|---|---|---|---|---|",
        f"| {AUTODIFF} jacfwd | {mf * 1e3:.2f} | {min(fwd) * 1e3:.2f} | {max(fwd) * 1e3:.2f} "
        f"| {len(fwd)} |",
        f"| {AUTODIFF} jacrev | {mr * 1e3:.2f} | {min(rev) * 1e3:.2f} | {max(rev) * 1e3:.2f} "
        f"| {len(rev)} |",
        f"\njacrev / jacfwd: {mr / mf:.0f}",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    print(main())
