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
