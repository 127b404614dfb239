"""A small problem: ``value_and_grad`` of the 50-dimensional Rosenbrock function,
``sum(100 (x[1:] - x[:-1]^2)^2 + (1 - x[:-1])^2)``, float64, per call.

autodiff on numpy eager and replayed by ``ad.jit``, against the gradient written by hand
in NumPy (the floor), PyTorch eager and ``jax.jit`` (each if installed). Each first
checks that it gives the hand-written value and gradient (rtol 1e-12)."""

from __future__ import annotations

import statistics
import time

import numpy as np

import autodiff as ad

from ._case import NUMPY, SKIP, TORCH
from ._timing import table, timed
from .threads import limit_threads

N = 50
EAGER, JIT, JAX = "autodiff (numpy)", "autodiff jit (numpy)", "JAX jit (CPU)"


def rosenbrock(x):
    """The function, on the namespace of ``x``."""
    xp = x.__array_namespace__()
    a, b = x[1:], x[:-1]
    return xp.sum(100.0 * (a - b * b) ** 2 + (1.0 - b) ** 2)


def by_hand(x):
    """(value, gradient) written in NumPy."""
    a, b = x[1:], x[:-1]
    r = a - b * b
    value = float(np.sum(100.0 * r * r + (1.0 - b) ** 2))
    g = np.zeros_like(x)
    g[1:] += 200.0 * r
    g[:-1] += -400.0 * r * b - 2.0 * (1.0 - b)
    return value, g


def _start():
    return np.linspace(-1.2, 1.0, N)


def factories():
    """name -> a function of no argument returning (value, gradient as NumPy)."""
    x0 = _start()
    eager = ad.value_and_grad(rosenbrock)
    jitted = ad.jit(ad.value_and_grad(rosenbrock))
    out = {
        EAGER: lambda: eager(x0),
        JIT: lambda: jitted(x0),
        NUMPY: lambda: by_hand(x0),
    }
    if TORCH not in SKIP:
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            torch.set_num_threads(1)
            xt = torch.tensor(x0)

            def torch_step():
                x = xt.detach().requires_grad_(True)
                v = rosenbrock_torch(x)
                v.backward()
                return float(v.detach()), x.grad.numpy()

            out[TORCH] = torch_step
    try:
        import jax
    except ImportError:
        jax = None
    if jax is not None:
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        xj = jnp.asarray(x0)
        jg = jax.jit(jax.value_and_grad(lambda x: rosenbrock_jax(jnp, x)))

        def jax_step():
            v, g = jg(xj)
            g.block_until_ready()
            return float(v), np.asarray(g)

        out[JAX] = jax_step
    return out


def rosenbrock_torch(x):
    a, b = x[1:], x[:-1]
    return (100.0 * (a - b * b) ** 2 + (1.0 - b) ** 2).sum()


def rosenbrock_jax(jnp, x):
    a, b = x[1:], x[:-1]
    return jnp.sum(100.0 * (a - b * b) ** 2 + (1.0 - b) ** 2)


def main(repeats: int = 200) -> str:
    limit_threads(1)
    impls = factories()
    want_v, want_g = by_hand(_start())
    for name, fn in impls.items():
        v, g = fn()
        np.testing.assert_allclose(float(v), want_v, rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(np.asarray(g), want_g, rtol=1e-12, atol=1e-12, err_msg=name)
    times, how = timed(impls, repeats)
    out = [
        f"rosenbrock: value_and_grad of the {N}-dimensional Rosenbrock function, float64, "
        f"one thread; {repeats} {how}",
        "",
        table(times, 1e6, "µs", NUMPY),
    ]
    e, j = statistics.median(times[EAGER]), statistics.median(times[JIT])
    paired = statistics.median(a / b for a, b in zip(times[EAGER], times[JIT]))
    out.append(f"\neager / jit: {e / j:.2f} (paired: {paired:.2f})")
    first, retrace = _trace_costs(max(5, repeats // 10))
    out.append(
        f"jit's first call (the trace) {first:.0f} µs, a retrace (a new shape) {retrace:.0f} "
        f"µs: {first / (e * 1e6):.1f} and {retrace / (e * 1e6):.1f} eager calls (medians)"
    )
    return "\n".join(out)


def _trace_costs(runs):
    """Medians of jit's first call (a fresh ``ad.jit``) and of a retrace (a known
    function called with a new shape), in µs."""
    first, again = [], []
    for k in range(runs):
        f = ad.jit(ad.value_and_grad(rosenbrock))
        x = np.linspace(-1.2, 1.0, N + k)
        t0 = time.perf_counter()
        f(x)
        first.append(time.perf_counter() - t0)
        f(x)  # replayed: the next shape is new
        x = np.linspace(-1.2, 1.0, N + runs + k)
        t0 = time.perf_counter()
        f(x)
        again.append(time.perf_counter() - t0)
        assert f.traces == 2
    return statistics.median(first) * 1e6, statistics.median(again) * 1e6


if __name__ == "__main__":
    print(main())
