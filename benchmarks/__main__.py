"""``python -m benchmarks CASE [--repeats N]``: run one benchmark case."""

import argparse
import importlib
import sys

CASES = ("chain", "mlp", "cnn", "gru", "attention", "conv", "maxpool", "cross_entropy")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("case", choices=CASES)
    p.add_argument("--repeats", type=int, default=50)
    args = p.parse_args(argv)
    print(importlib.import_module(f"benchmarks.{args.case}").main(args.repeats))


if __name__ == "__main__":
    sys.exit(main())
