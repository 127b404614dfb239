"""For the CuPy tests: a stand-in ``cupy``/``cupyx`` built on NumPy (CuPy's API mirrors
NumPy's), so ``backends/cupy_fast.py`` runs on the CPU, and the skip for real GPU tests."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest


def fake_cupy():
    """``(cupy, cupyx, scatter_calls)``: modules with what ``cupy_fast`` calls, on NumPy."""
    cp = types.ModuleType("cupy")
    for name in ("ndarray", "array", "asarray", "reshape", "pad", "zeros", "empty", "matmul",
                 "result_type", "float64", "may_share_memory"):  # fmt: skip
        setattr(cp, name, getattr(np, name))
    cp.lib = types.SimpleNamespace(
        stride_tricks=types.SimpleNamespace(as_strided=np.lib.stride_tricks.as_strided)
    )
    cp.random = types.SimpleNamespace(RandomState=np.random.RandomState)
    cpx = types.ModuleType("cupyx")
    calls = []

    def scatter_add(a, slices, value):
        calls.append(a.dtype.name)
        np.add.at(a, slices, value)  # what cupyx.scatter_add is documented to match

    cpx.scatter_add = scatter_add
    return cp, cpx, calls


def fake_cupy_fast(monkeypatch):
    """Yields ``backends.cupy_fast`` imported against the stand-in (for a fixture); then
    forgets that module."""
    import importlib

    from autodiff import backends

    cp, cpx, calls = fake_cupy()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "cupyx", cpx)
    sys.modules.pop("autodiff.backends.cupy_fast", None)
    module = importlib.import_module("autodiff.backends.cupy_fast")
    module.scatter_calls = calls
    yield module
    # The module is bound to the stand-in: a real import must start afresh.
    sys.modules.pop("autodiff.backends.cupy_fast", None)
    if hasattr(backends, "cupy_fast"):
        delattr(backends, "cupy_fast")


def need_cupy():
    """Real CuPy with a CUDA device, or skip the test with the reason."""
    cp = pytest.importorskip("cupy", reason="CuPy is not installed (pip install -e '.[cuda]')")
    try:
        count = cp.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no driver, no device: CUDARuntimeError
        pytest.skip(f"no CUDA device ({type(exc).__name__}: {exc})")
    if count == 0:
        pytest.skip("no CUDA device")
    return cp
