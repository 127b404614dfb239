"""Every differentiable op of the registry against float64 central differences,
first and second order, on numpy and array_api_strict, on real inputs and (for
the ops that take them) complex ones. Generated from gradcheck's specs: one test
id per (op, sample)."""

import numpy as np
import pytest

from autodiff import registry
from gradcheck.cli import _unsupported
from gradcheck.core import check_grad, check_second
from gradcheck.specs import SPECS, missing_specs

CASES = [
    pytest.param(name, i, id=f"{name}[{s.label}]")
    for name, spec in sorted(SPECS.items())
    for i, s in enumerate(spec.samples())
]
SECOND = [p for p in CASES if SPECS[p.values[0]].second_order]
COMPLEX = [p for p in CASES if registry.get(p.values[0]).complex]
COMPLEX_SECOND = [p for p in COMPLEX if SPECS[p.values[0]].second_order]


def test_every_differentiable_op_has_a_spec():
    no_spec, no_op = missing_specs()
    assert no_spec == [] and no_op == []


@pytest.mark.parametrize("name, i", CASES)
def test_first_order(xp, name, i):
    spec = SPECS[name]
    sample = spec.samples()[i]
    check_grad(
        lambda *t: sample.call(xp, *t), *sample.inputs, xp=xp, atol=spec.atol, rtol=spec.rtol
    )


@pytest.mark.parametrize("name, i", SECOND)
def test_second_order(xp, name, i):
    spec = SPECS[name]
    sample = spec.samples()[i]
    check_second(lambda *t: sample.call(xp, *t), *sample.inputs, xp=xp)


def _complex_sample(xp, name, i):
    """The sample, or None where the backend itself refuses complex inputs (as the
    standard allows: array_api_strict's var, astype to a real dtype): our namespace
    raises the backend's TypeError, as it should."""
    sample = SPECS[name].samples()[i]
    why = _unsupported(xp, sample, "complex128")
    if why is not None:
        assert "real inputs only" in why and xp.__name__ == "autodiff.array_api_strict", why
        return SPECS[name], None
    return SPECS[name], sample


@pytest.mark.parametrize("name, i", COMPLEX)
def test_first_order_complex(xp, name, i):
    spec, sample = _complex_sample(xp, name, i)
    if sample is None:
        return
    check_grad(lambda *t: sample.call(xp, *t), *sample.inputs, xp=xp, atol=spec.atol,
               rtol=spec.rtol, dtype="complex128")  # fmt: skip


@pytest.mark.parametrize("name, i", COMPLEX_SECOND)
def test_second_order_complex(xp, name, i):
    spec, sample = _complex_sample(xp, name, i)
    if sample is None:
        return
    check_second(lambda *t: sample.call(xp, *t), *sample.inputs, xp=xp, dtype="complex128")


def test_registry_kinds_are_known():
    kinds = {op.kind for op in registry.ops().values()}
    assert kinds <= {registry.DIFF, registry.CONST, registry.MISSING}
    assert np.all([op.chapter for op in registry.ops().values()])
