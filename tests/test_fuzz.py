"""The fuzzer (tests/fuzz.py) on a fixed seed and a bounded count: random programs of
3-12 ops, our gradients against torch.autograd (first and second order) and central
differences. ``python -m tests.fuzz --programs N --seed S`` runs longer."""

import pytest

from . import fuzz

pytest.importorskip("torch", reason="the fuzzer compares with torch.autograd")


@pytest.mark.parametrize("backend, programs", [("numpy", 400), ("array_api_strict", 100)])
def test_random_programs_match_torch_and_central_differences(backend, programs):
    import importlib

    import autodiff as ad

    xp = ad.Autodiff(importlib.import_module(backend))
    out = fuzz.fuzz(programs, seed=2026, xp=xp)
    failures = "\n\n".join(f"{text}\n# {what}" for text, what in out[fuzz.FAIL])
    assert not out[fuzz.FAIL], failures
    # nearly every program is compared: what torch or the backend can't run is the rest
    assert out[fuzz.OK] >= 0.85 * programs, out


@pytest.mark.parametrize("backend, programs", [("numpy", 200), ("array_api_strict", 60)])
def test_random_programs_under_jit_equal_eager(backend, programs):
    """The same random programs, value and gradients, replayed by ``ad.jit``: equal to
    eager bit for bit (the same kernels run), traced once."""
    import importlib

    import numpy as np

    import autodiff as ad

    xp = ad.Autodiff(importlib.import_module(backend))
    rng = np.random.default_rng(2027)
    failures, compared = [], 0
    for k in range(programs):
        inputs, steps = fuzz.make_program(rng)
        status, what = fuzz.check_jit(inputs, steps, xp, seed=k)
        if status == fuzz.FAIL:
            failures.append(f"{steps}\n# {what}")
        compared += status == fuzz.OK
    assert not failures, "\n\n".join(failures[:5])
    assert compared >= 0.8 * programs  # the rest: programs the backend itself refuses
