"""No host round trip: a full training step (forward, backward, optimizer) of the CNN
and the attention block of ``benchmarks/`` with every device-to-host path raising.

On a GPU (marked ``gpu``) the paths are CuPy's; on the CPU the same steps run on
array-api-strict with its host conversions raising, as a stand-in that any session
can run."""

import numpy as np
import pytest

import autodiff as ad
from autodiff import backends, optim
from benchmarks.gpu import cases

from .cupy_support import need_cupy

CASES = ["cnn", "attention"]
OPTIMIZERS = {"cnn": lambda ps: optim.SGD(ps, lr=0.01, momentum=0.9),
              "attention": lambda ps: optim.Adam(ps, lr=1e-3)}  # fmt: skip
# Conversions of an array to a Python value or a host array: each reads device memory.
HOST_READS = ("__bool__", "__float__", "__int__", "__index__", "__complex__", "__array__")


def _forbid(monkeypatch, cls, names):
    for name in names:

        def boom(self, *args, _name=name, **kwargs):
            raise AssertionError(f"device-to-host read: {_name}")

        monkeypatch.setattr(cls, name, boom)


def _train_step(case, xp, forbid):
    """Build on ``xp`` (reads allowed), then one guarded step; returns model and loss."""
    model, loss = cases.autodiff_case(case, xp, batch=4)
    opt = OPTIMIZERS[case](model.parameters())
    before = {k: ad.io.to_host(p).copy() for k, p in model.named_parameters()}
    forbid()
    opt.zero_grad()
    value = loss()
    with pytest.raises(AssertionError, match="device-to-host"):
        float(value)  # the guard is on
    value.backward()
    opt.step()
    return model, value, before


def _check_on_device(model, value, before):
    """Finite loss; every gradient and parameter on the inputs' device; all updated."""
    assert np.isfinite(ad.io.to_host(value))
    for k, p in model.named_parameters():
        assert p.grad is not None, k
        assert p.grad.device == value.device and p.device == value.device, k
        assert not np.array_equal(ad.io.to_host(p), before[k]), f"{k} was not updated"


@pytest.mark.parametrize("case", CASES)
def test_training_step_reads_nothing_back_on_strict(case, monkeypatch):
    strict = pytest.importorskip("array_api_strict")
    array_type = type(strict.asarray(0.0))
    # As on a GPU backend: the range checks would read a bool back.
    monkeypatch.setattr(backends.resolve(strict), "host_checks", False)
    with monkeypatch.context() as guard:
        model, value, before = _train_step(
            case, strict, lambda: _forbid(guard, array_type, HOST_READS + ("__dlpack__",))
        )
    _check_on_device(model, value, before)


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES)
def test_training_step_reads_nothing_back_on_cupy(case, monkeypatch):
    cp = need_cupy()
    with monkeypatch.context() as guard:

        def forbid():
            _forbid(guard, cp.ndarray, HOST_READS + ("get", "item", "tolist"))

            def asnumpy(*args, **kwargs):
                raise AssertionError("device-to-host read: cupy.asnumpy")

            guard.setattr(cp, "asnumpy", asnumpy)

        model, value, before = _train_step(case, cp, forbid)
    _check_on_device(model, value, before)
