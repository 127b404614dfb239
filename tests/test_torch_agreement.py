"""Every op of the standard against torch.autograd, driven by gradcheck's specs: each
sample runs once on our namespace and once on array_api_compat's torch namespace
(torch's own autograd), on real and on complex inputs, and the gradients of the
same real loss must agree. On complex inputs this pins PyTorch's convention: the
gradient is dL/dx + i dL/dy, so that ``z -= lr * z.grad`` descends."""

import numpy as np
import pytest

from autodiff import registry
from gradcheck.core import as_checked
from gradcheck.specs import SPECS

from .torch_compare import ours_and_torch

# Samples torch can't run as written, each with its reason (nothing else is left out).
NOT_IN_TORCH = {
    "unique_all": "array_api_compat's torch lacks unique_all",
    "unique_counts": "torch.unique has no gradient",
    "unique_inverse": "torch.unique has no gradient",
    "unique_values": "torch.unique has no gradient",
    "to_device": "a device of the numpy backend",
    "remainder[scalar, x]": "torch has no derivative of remainder in its divisor",
    # complete factors of a tall or wide matrix: torch refuses qr's backward and drops the
    # extra columns' gradient in svd's; ours is right for losses of their span (checked
    # against central differences in test_ops and against torch on the reduced factors
    # in test_linalg_rules)
    "linalg.qr[complete, tall, completion projector]": "torch refuses this backward",
    "linalg.svd[full_matrices, tall, completion projector]": "torch drops the extra columns",
    "linalg.svd[full_matrices, wide, completion projector]": "torch drops the extra columns",
    # an rtol that cuts a nonzero singular value: torch differentiates pinv(a), not the
    # truncation (off by 5e-3); ours is checked against central differences in test_ops
    # and tests/test_extremes.py
    **{
        f"linalg.pinv[{label}]": "torch ignores the truncation"
        for label in (
            "tall, rtol cuts 0.05",
            "wide, rtol cuts 0.05",
            "batched, rtol cuts 0.5 and 0",
            "complex, rtol cuts 0.05",
        )
    },
}


def _standard(name):
    """A function of the standard (not an nn op, not one of our kernels)."""
    return registry.get(name).chapter.split(".")[0] not in ("nn", "kernels")


CASES = [
    pytest.param(name, i, dtype, id=f"{name}[{s.label}]-{dtype}")
    for name, spec in sorted(SPECS.items())
    if _standard(name) and name not in NOT_IN_TORCH
    for i, s in enumerate(spec.samples())
    if f"{name}[{s.label}]" not in NOT_IN_TORCH
    for dtype in ("float64", "complex128")
    if dtype == "float64" or registry.get(name).complex
]


@pytest.mark.parametrize("name, i, dtype", CASES)
def test_gradient_equals_torch(xp, name, i, dtype):
    sample = SPECS[name].samples()[i]
    arrays = as_checked(sample.inputs, dtype)
    try:
        ours, theirs = ours_and_torch(xp, sample.call, arrays, seed=i)
    except TypeError as exc:  # the backend takes real inputs only here (strict's var)
        assert "complex" in dtype and "strict" in xp.__name__, exc
        return
    for k, (g, expected) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(g, expected, rtol=1e-7, atol=1e-9, err_msg=f"input {k}")
