"""Third-party array-API code (scipy, array-api-extra, scikit-learn), differentiated unchanged.

Each case of ``third_party_cases.CASES`` runs on ``Autodiff(numpy)`` and on
``Autodiff(array_api_strict)``: the forward against the same library function on plain
NumPy float64 arrays, the gradient against central differences (``check_grad``), or the
clear error the case expects (see the docstring of third_party_cases.py).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import autodiff as ad
from autodiff import Tensor
from gradcheck import check_grad

from .third_party_cases import CASES, FORWARD, GRAD, XPX_EXCLUDED, Raises

BACKENDS = ("numpy", "strict")

# The libraries' own warnings: array-api-extra's deprecations (the cases call every public
# function), scikit-learn comparing a strict dtype with NumPy's, NumPy's 0 / 0 inside
# the code under test (StandardScaler's first batch).
pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning:tests.third_party_cases"),
    pytest.mark.filterwarnings("ignore:You are comparing a array_api_strict dtype:UserWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning"),
]


def _namespace(backend):
    if backend == "numpy":
        return ad.Autodiff(np)
    return ad.Autodiff(pytest.importorskip("array_api_strict", reason="array_api_strict missing"))


def _need(lib):
    pytest.importorskip(lib, reason=f"{lib} is not installed")
    if lib in ("scipy", "sklearn"):  # sklearn's array API dispatch needs scipy's
        from scipy._lib._array_api import SCIPY_ARRAY_API

        if not SCIPY_ARRAY_API:
            pytest.skip("scipy was imported before SCIPY_ARRAY_API=1 was set (tests/conftest.py)")


def _tensors(xp, case, arrays, requires_grad):
    diff = case.diff_positions(arrays)
    return [xp.asarray(a, requires_grad=requires_grad and i in diff) for i, a in enumerate(arrays)]


def _dtype_name(dtype):
    name = getattr(dtype, "name", None)
    return name if isinstance(name, str) else str(dtype).rsplit(".", 1)[-1]


def _host(out, xp=None):
    """A result as NumPy arrays and Python values; with ``xp``, every array of it must be a
    Tensor of ``xp`` (no raw backend array leaks out of a call on Tensors)."""
    if isinstance(out, tuple | list):
        return tuple(_host(o, xp) for o in out)
    if out is None or isinstance(out, bool | int | float | complex):
        return out
    if isinstance(out, np.dtype) or not hasattr(out, "shape"):
        return _dtype_name(out)
    if xp is not None:
        assert isinstance(out, Tensor), f"a {type(out).__name__} came out, not a Tensor"
        assert out.__array_namespace__() is xp, "a Tensor of another namespace came out"
    data = out.data if isinstance(out, Tensor) else out
    try:
        return np.asarray(data)
    except TypeError:
        return np.from_dlpack(data)


def _assert_same(got, want, rtol, atol, where="out"):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), f"{where}: {got!r} != {want!r}"
        for k, (g, w) in enumerate(zip(got, want)):
            _assert_same(g, w, rtol, atol, f"{where}[{k}]")
    elif isinstance(want, np.ndarray | np.generic):
        got = np.asarray(got)
        assert got.shape == np.shape(want), f"{where}: shape {got.shape} != {np.shape(want)}"
        if np.issubdtype(np.asarray(want).dtype, np.inexact):
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=where)
        else:
            np.testing.assert_array_equal(got, want, err_msg=where)
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def _flat_tensors(out):
    if isinstance(out, tuple | list):
        return [t for o in out for t in _flat_tensors(o)]
    return [out] if isinstance(out, Tensor) else []


def _raises(expect, call):
    with pytest.raises(expect.exc) as info:
        call()
    for pattern in expect.match:
        assert re.search(pattern, str(info.value)), f"{pattern!r} not in: {info.value}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_third_party(case, backend):
    _need(case.lib)
    try:
        _run(case, backend)
    except (Exception, pytest.fail.Exception) as exc:  # pytest.raises: Failed
        expect = case.expectation(backend)
        notes = []
        if isinstance(expect, Raises) and expect.why:
            notes.append(f"expected {expect!r}: the library {expect.why}")
        for note in notes if hasattr(exc, "add_note") else ():
            exc.add_note(note)
        raise


def _run(case, backend):
    xp = _namespace(backend)
    expect = case.expectation(backend)
    arrays = case.make(np.random.default_rng(20240611))
    if isinstance(expect, Raises):
        _raises(expect, lambda: case.fn(*_tensors(xp, case, arrays, requires_grad=True)))
        return
    assert expect in (GRAD, FORWARD), expect

    # (a) the forward, inputs requiring grad, against the library on NumPy arrays
    want = _host(case.fn(*arrays))
    out = case.fn(*_tensors(xp, case, arrays, requires_grad=True))
    _assert_same(_host(out, xp), want, case.rtol, case.atol)
    if expect == FORWARD:
        assert not any(t.requires_grad for t in _flat_tensors(out)), "a gradient flows"
        return

    # (b) the gradient against central differences, in float64
    diff = case.diff_positions(arrays)
    assert diff, "a GRAD case needs an input to differentiate"

    def f(*diff_tensors):
        it = iter(diff_tensors)
        args = [next(it) if i in diff else xp.asarray(a) for i, a in enumerate(arrays)]
        return case.fn(*args)

    check_grad(f, *[arrays[i] for i in diff], xp=xp, mode=case.mode)


def test_every_array_api_extra_function_has_a_case():
    xpx = pytest.importorskip("array_api_extra", reason="array_api_extra is not installed")
    covered = {c.id.split(".", 1)[1].split("-", 1)[0] for c in CASES if c.lib == "array_api_extra"}
    missing = set(xpx.__all__) - XPX_EXCLUDED - covered
    assert not missing, f"array_api_extra functions without a case: {sorted(missing)}"


def test_case_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
