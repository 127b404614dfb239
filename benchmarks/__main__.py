"""``python -m benchmarks CASE [--repeats N] [--without NAME] [--alone]``: run one
benchmark case.

``--without torch`` leaves PyTorch out (its OpenMP threads keep spinning after each
call and slow whatever runs next on a 2-core machine: useful to see the NumPy ratio
alone). ``--alone`` times each implementation alone, in blocks that alternate over
5 rounds, each block starting with 0.3 s untimed while the previous library's threads
stop spinning: the fair way to compare with PyTorch on 2 cores."""

import argparse
import importlib
import sys

CASES = (
    "chain",
    "complex_chain",
    "rosenbrock",
    "mlp",
    "cnn",
    "gru",
    "attention",
    "conv",
    "maxpool",
    "cross_entropy",
    "where",
    "svd",
    "anomaly",
    "checkpoint",
    "forward",
    "vmap",
    "transformer",
    "resnet",
    "dask_logistic",
    "distributed",
)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("case", choices=CASES)
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--without", action="append", default=[], choices=("torch",),
                   help="leave an implementation out")  # fmt: skip
    p.add_argument("--alone", action="store_true",
                   help="time each implementation alone, in alternating blocks")  # fmt: skip
    args = p.parse_args(argv)
    from . import _case, _timing

    if "torch" in args.without:
        _case.SKIP.add(_case.TORCH)
    if args.alone:
        _timing.ALONE.add(True)
    print(importlib.import_module(f"benchmarks.{args.case}").main(args.repeats))


if __name__ == "__main__":
    sys.exit(main())
