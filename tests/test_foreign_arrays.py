"""An array of another library at a call on Tensors (torch's in a NumPy namespace,
NumPy's in torch's...) raises at the call, naming the op and both libraries, for every
operator, reflected operator, function and module; raw arrays of the namespace's own
library are wrapped, as before."""

import operator

import array_api_compat.torch as torch_xp
import array_api_strict
import numpy as np
import pytest
import torch

import autodiff as ad
import autodiff.nn as nn
import autodiff.nn.functional as F
from autodiff.engine.tensor import BINARY_OPERATORS, REFLECTED_OPERATORS

NP = ad.Autodiff(np)
TORCH = ad.Autodiff(torch_xp)

OPERATORS = sorted(set(BINARY_OPERATORS) | set(REFLECTED_OPERATORS))


def _foreign_to_numpy():
    import jax.numpy as jnp

    return {
        "torch": torch.ones((2, 2), dtype=torch.float64),
        "jax": jnp.ones((2, 2)),
        "array_api_strict": array_api_strict.ones((2, 2), dtype=array_api_strict.float64),
    }


def _leaf(xp, backend):
    return xp.asarray(backend.ones((2, 2), dtype=backend.float64), requires_grad=True)


@pytest.mark.parametrize("dunder", OPERATORS)
@pytest.mark.parametrize("lib", ["torch", "jax", "array_api_strict"])
def test_every_operator_refuses_a_foreign_array_naming_op_and_both_libraries(dunder, lib):
    w = _leaf(NP, np)
    other = _foreign_to_numpy()[lib]
    op = BINARY_OPERATORS.get(dunder) or REFLECTED_OPERATORS[dunder]
    with pytest.raises(TypeError) as info:
        getattr(w, dunder)(other)
    msg = str(info.value)
    assert msg.startswith(f"{op}:") and "autodiff.numpy" in msg
    assert type(other).__module__.split(".")[0] in msg
    assert w.grad is None and w._version is None  # nothing changed


@pytest.mark.parametrize("lib", ["torch", "jax"])
@pytest.mark.parametrize("sym", ["add", "mul", "matmul", "sub", "truediv", "pow", "lt"])
def test_a_foreign_array_on_the_left_of_an_operator_raises_at_the_call(lib, sym):
    # torch_array @ w used to give a torch tensor with the graph cut, found only at backward
    w = _leaf(NP, np)
    with pytest.raises(TypeError, match=r"autodiff\.numpy"):
        getattr(operator, sym)(_foreign_to_numpy()[lib], w)


def test_a_module_and_functional_ops_refuse_a_foreign_input():
    lin = nn.Linear(3, 2)
    x = torch.ones((2, 3))
    with pytest.raises(TypeError) as info:
        lin(x)
    msg = str(info.value)
    assert "Linear" in msg and "torch" in msg and "autodiff.numpy" in msg
    w = _leaf(NP, np)
    t = torch.ones((2, 2), dtype=torch.float64)
    calls = {
        "linear": lambda: F.linear(t, w),
        "mse_loss": lambda: F.mse_loss(w, t),
        "concat": lambda: NP.concat([w, t]),
        "where": lambda: NP.where(t > 0, w, w),
        "stack": lambda: NP.stack((w, t)),
        "clip": lambda: NP.clip(w, min=t),
    }
    for name, call in calls.items():
        with pytest.raises(TypeError, match=rf"{name}.*torch.*autodiff\.numpy"):
            call()
    with pytest.raises(TypeError, match=r"torch\.exp.*autodiff\.numpy"):
        torch.exp(w)


def test_numpy_and_strict_arrays_into_a_torch_namespace_raise():
    w = _leaf(TORCH, torch_xp)
    # (array_api_strict's own operators raise on a Tensor at its left: its message)
    for other in (np.ones((2, 2)), array_api_strict.ones((2, 2))):
        for call in (lambda: w + other, lambda: TORCH.matmul(w, other)):
            with pytest.raises(TypeError, match=r"autodiff\.torch"):
                call()
    with pytest.raises(TypeError, match=r"multiply.*numpy.*autodiff\.torch"):
        np.ones((2, 2)) * w


def test_arrays_of_the_namespaces_own_library_are_wrapped():
    w = _leaf(NP, np)
    out = NP.sum((np.full((2, 2), 3.0) @ w) * np.float64(2.0) + np.ones((2, 2)))
    out.backward()
    # d/dw sum(2 (3 J) w) = 2 * 3 * 2 (each column of J sums to 2) = 12
    np.testing.assert_allclose(w.grad.data, np.full((2, 2), 12.0))
    t = _leaf(TORCH, torch_xp)
    s = TORCH.sum(torch.full((2, 2), 3.0, dtype=torch.float64) @ t)
    s.backward()
    np.testing.assert_allclose(t.grad.data.numpy(), np.full((2, 2), 6.0))
    assert nn.Linear(2, 1)(np.ones((1, 2), np.float32)).shape == (1, 1)


@pytest.mark.parametrize("lib", ["torch", "jax", "array_api_strict"])
def test_writes_and_indexing_refuse_a_foreign_array(lib):
    x = NP.asarray(np.ones((2, 2)))
    other = _foreign_to_numpy()[lib]
    for what, call in (
        ("in-place add", lambda: x.__iadd__(other)),
        ("in-place multiply", lambda: x.__imul__(other)),
        ("__setitem__", lambda: x.__setitem__(0, other[0, ...])),
    ):
        with pytest.raises(TypeError, match=rf"^{what}: .*autodiff\.numpy"):
            call()
        np.testing.assert_array_equal(x.data, np.ones((2, 2)))  # nothing written
    x[0] = np.array([2.0, 3.0])  # NumPy's own arrays are written
    x += np.ones(2)
    np.testing.assert_array_equal(x.data, [[3.0, 4.0], [2.0, 2.0]])


def test_lists_of_tensors_and_own_arrays_pass():
    w = _leaf(NP, np)
    y = NP.sum(NP.concat([w, w * 2.0, np.ones((1, 2))]) ** 2)
    y.backward()
    # d/dw sum(w^2 + 4 w^2) = 10 w
    np.testing.assert_allclose(w.grad.data, np.full((2, 2), 10.0))
    x = NP.asarray(np.zeros((2, 2)))
    x[0] = w[1].detach()  # a Tensor of the same namespace is written
    np.testing.assert_array_equal(x.data[0], [1.0, 1.0])
