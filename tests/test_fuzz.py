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
