"""What ``ad.detect_anomaly()`` costs when on: the ``chain`` case (601 tiny ops) and an
``mlp`` training step, each with the mode off and on, interleaved in one run. (Off, the
hot paths pay one list test per recorded op: compare ``chain`` with an older tree.)
"""

from __future__ import annotations

import statistics

import autodiff as ad

from . import chain, mlp
from ._timing import table, timed


def _on(step):
    def run():
        with ad.detect_anomaly():
            return step()

    return run


def main(repeats: int = 30) -> str:
    c, m = chain.autodiff_step(), mlp.autodiff_step()
    a = "autodiff (numpy)"
    impls = {f"{a} chain, off": c, f"{a} chain, on": _on(c), f"{a} mlp, off": m,
             f"{a} mlp, on": _on(m)}  # fmt: skip
    times, how = timed(impls, repeats)
    out = f"anomaly: detect_anomaly off and on; {repeats} {how}\n\n"
    out += table(times, 1e3, "ms", f"{a} chain, off")
    for case in ("chain", "mlp"):
        on, off = times[f"{a} {case}, on"], times[f"{a} {case}, off"]
        out += (
            f"\n{case}: on / off {statistics.median(a / b for a, b in zip(on, off)):.2f} (paired)"
        )
    return out


if __name__ == "__main__":
    print(main())
