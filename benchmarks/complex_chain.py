"""What complex values cost per op: the ``chain`` case (200 steps of
``x = tanh(x * 1.01 + 0.1)`` on (16,), forward and backward) on float64 and on
complex128 input, interleaved in one run.

The arithmetic of complex128 is slower than float64's whatever the library, so
the figure to read is the engine's overhead per op: autodiff's time minus
hand-written NumPy's, complex128 against float64 (paired per round).
"""

from __future__ import annotations

import statistics

import numpy as np

from . import chain
from ._case import AUTODIFF, NUMPY, TORCH
from ._timing import table, timed

OPS = chain.OPS + 1  # sum(real(x)) for complex: one op more


def main(repeats: int = 50) -> str:
    from ._case import SKIP

    impls = {}
    for dtype in ("float64", "complex128"):
        makers = {AUTODIFF: chain.autodiff_step, NUMPY: chain.numpy_step, TORCH: chain.torch_step}
        for name, make in makers.items():
            if name in SKIP:
                continue
            try:
                impls[f"{name} {dtype}"] = make(dtype)
            except ImportError:
                pass
        ref = impls[f"{NUMPY} {dtype}"]()
        for name, f in impls.items():
            if name.endswith(dtype):
                np.testing.assert_allclose(f(), ref, rtol=1e-12, err_msg=name)
    times, how = timed(impls, repeats)
    out = (f"complex_chain: chain on float64 and on complex128 (16,), {OPS} ops; "
           f"{repeats} {how}\n\n")  # fmt: skip
    out += table(times, 1e6 / OPS, "µs per op", f"{NUMPY} float64")

    def overhead(dtype):
        a, n = times[f"{AUTODIFF} {dtype}"], times[f"{NUMPY} {dtype}"]
        return [(x - y) * 1e6 / OPS for x, y in zip(a, n)]

    real, cplx = overhead("float64"), overhead("complex128")
    paired = statistics.median(c / r for c, r in zip(cplx, real))
    out += (
        f"\n\nengine overhead per op (autodiff - NumPy, median): float64 "
        f"{statistics.median(real):.2f} µs, complex128 {statistics.median(cplx):.2f} µs; "
        f"complex / real: {statistics.median(cplx) / statistics.median(real):.2f} "
        f"(paired: {paired:.2f})"
    )
    return out


if __name__ == "__main__":
    print(main())
