import os

# scipy reads SCIPY_ARRAY_API at its first import: before any test module imports it
# (tests/test_third_party.py runs scipy on Tensors).
os.environ.setdefault("SCIPY_ARRAY_API", "1")

import numpy as np
import pytest

import autodiff as ad


def _backends():
    out = [pytest.param("numpy", id="numpy")]
    out.append(pytest.param("array_api_strict", id="strict"))
    return out


@pytest.fixture(params=_backends())
def xp(request):
    if request.param == "numpy":
        return ad.Autodiff(np)
    strict = pytest.importorskip("array_api_strict")
    return ad.Autodiff(strict)
