"""Run the official Array API conformance suite on a backend and on its autodiff namespace.

    python scripts/array_api_tests.py SUITE [--backend array_api_compat.numpy]
        [--max-examples 20] [--seed 0] [--xfails FILE] [-- PYTEST ARGS...]

SUITE is a checkout of https://github.com/data-apis/array-api-tests with its
``array-api`` submodule (the spec) filled in; install its requirements.txt first.
Both runs use the same options (hypothesis seed, no deadline: autodiff's
per-call overhead must not fail a test by time); ``--xfails`` takes an
expected-failures file, such as array-api-compat's ``numpy-xfails.txt``. Prints
both summaries and the tests that fail only on autodiff; exits 1 if there are any.
Two special cases of complex infinities (``expm1``, ``tanh``) flip between runs of
NumPy itself, whatever the seed: one may show up on either side.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHIM = """import sys
import {backend} as backend
import autodiff

sys.modules[__name__] = autodiff.Autodiff(backend)
"""


def run(suite, module, args, env):
    """(summary line, failed node ids) of one run of the suite on ``module``."""
    env = dict(env, ARRAY_API_TESTS_MODULE=module)
    cmd = [sys.executable, "-m", "pytest", "array_api_tests", "-q", "-rf", "-p",
           "no:cacheprovider", *args]  # fmt: skip
    out = subprocess.run(cmd, cwd=suite, env=env, capture_output=True, text=True, timeout=3600)
    lines = out.stdout.strip().splitlines()
    failed = {m.group(1) for m in re.finditer(r"^FAILED (.+?)(?: - .*)?$", out.stdout, flags=re.M)}
    return (lines[-1] if lines else out.stderr.strip()[-500:]), failed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", type=pathlib.Path)
    parser.add_argument("--backend", default="array_api_compat.numpy")
    parser.add_argument("--max-examples", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--xfails", type=pathlib.Path)
    parser.add_argument("pytest_args", nargs="*")
    opts = parser.parse_args(argv)
    args = [f"--max-examples={opts.max_examples}", f"--hypothesis-seed={opts.seed}",
            "--hypothesis-disable-deadline", *opts.pytest_args]  # fmt: skip
    if opts.xfails:
        args.append(f"--xfails-file={opts.xfails.resolve()}")
    with tempfile.TemporaryDirectory() as shim:
        pathlib.Path(shim, "autodiff_wrapped.py").write_text(SHIM.format(backend=opts.backend))
        path = os.pathsep.join(p for p in (shim, str(ROOT), os.environ.get("PYTHONPATH")) if p)
        env = dict(os.environ, PYTHONPATH=path, PYTHONHASHSEED="0")
        raw, raw_failed = run(opts.suite, opts.backend, args, env)
        wrapped, wrapped_failed = run(opts.suite, "autodiff_wrapped", args, env)
    print(f"{opts.backend}: {raw}")
    print(f"autodiff.Autodiff({opts.backend}): {wrapped}")
    only = sorted(wrapped_failed - raw_failed)
    print(f"{len(only)} tests fail on autodiff only" + "".join(f"\n  {t}" for t in only))
    return 1 if only else 0


if __name__ == "__main__":
    sys.exit(main())
