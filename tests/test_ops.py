"""Every differentiable op of the registry against float64 central differences,
first and second order, on numpy and array_api_strict. Generated from
gradcheck's specs: one test id per (op, sample)."""

import numpy as np
import pytest

from autodiff import registry
from gradcheck.core import check_grad, check_second
from gradcheck.specs import SPECS, missing_specs

CASES = [
    pytest.param(name, i, id=f"{name}[{s.label}]")
    for name, spec in sorted(SPECS.items())
    for i, s in enumerate(spec.samples())
]
SECOND = [p for p in CASES if SPECS[p.values[0]].second_order]


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


def test_registry_kinds_are_known():
    kinds = {op.kind for op in registry.ops().values()}
    assert kinds <= {registry.DIFF, registry.CONST, registry.MISSING}
    assert np.all([op.chapter for op in registry.ops().values()])
