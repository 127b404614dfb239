"""A module fed an input of another floating dtype than its parameters raises, naming
the module and both dtypes (NumPy would promote float32 parameters silently);
``set_default_dtype`` decides the dtype of new modules' parameters."""

import numpy as np
import pytest

import autodiff as ad
import autodiff.nn as nn

XP = ad.Autodiff(np)


@pytest.fixture(autouse=True)
def _restore_default_dtype():
    before = ad.get_default_dtype()
    yield
    ad.set_default_dtype(before)


def _modules():
    return {
        "Linear": (lambda: nn.Linear(3, 2), (2, 3)),
        "Conv2d": (lambda: nn.Conv2d(1, 2, 3), (1, 1, 5, 5)),
        "LayerNorm": (lambda: nn.LayerNorm(3), (2, 3)),
        "BatchNorm1d": (lambda: nn.BatchNorm1d(3), (4, 3)),
        "GRU": (lambda: nn.GRU(3, 2), (4, 1, 3)),
        "Sequential": (lambda: nn.Sequential(nn.ReLU(), nn.Linear(3, 2)), (2, 3)),
    }


@pytest.mark.parametrize("name", sorted(_modules()))
def test_a_float32_module_on_float64_input_raises_naming_module_and_dtypes(name):
    make, shape = _modules()[name]
    m = make()
    before = {k: np.array(v.data) for k, v in m.state_dict().items()}
    x = np.ones(shape)  # float64
    with pytest.raises(TypeError) as info:
        m(x)
    msg = str(info.value)
    inner = "Linear" if name == "Sequential" else name
    assert msg.startswith(f"{inner}:") and "float64" in msg and "float32" in msg
    assert "astype" in msg and ".to(dtype=" in msg and "set_default_dtype" in msg
    with pytest.raises(TypeError, match=rf"{inner}:.*float64.*float32"):
        m(XP.asarray(x))  # a Tensor of the same namespace too
    for k, v in m.state_dict().items():  # the error changed nothing
        np.testing.assert_array_equal(v.data, before[k])
    # the fixes the message names work, and give float32
    assert m(np.ones(shape, np.float32))[0 if name == "GRU" else ...].dtype == np.float32
    m.to(dtype="float64")
    assert m(x)[0 if name == "GRU" else ...].dtype == np.float64


def test_integer_inputs_and_modules_without_parameters_are_not_checked():
    emb = nn.Embedding(4, 2)
    assert emb(np.array([0, 3])).dtype == np.float32
    assert nn.ReLU()(np.ones(2)).dtype == np.float64
    loss = nn.MSELoss()(XP.asarray(np.ones(2)), XP.asarray(np.zeros(2)))
    assert float(loss) == 1.0


def test_set_default_dtype_makes_modules_of_that_dtype():
    assert ad.get_default_dtype() == "float32"
    assert nn.Linear(2, 1).weight.dtype == np.float32
    ad.set_default_dtype(np.float64)
    assert ad.get_default_dtype() == "float64"
    lin = nn.Linear(2, 1)
    assert lin.weight.dtype == np.float64 and lin.bias.dtype == np.float64
    assert nn.Conv2d(1, 1, 2).weight.dtype == np.float64
    y = lin(np.array([[1.0, 2.0]]))  # float64 data is now the model's dtype
    w, b = lin.weight.data, lin.bias.data
    np.testing.assert_allclose(y.data, np.array([[1.0, 2.0]]) @ w.T + b, rtol=1e-15)
    ad.set_default_dtype("float32")
    assert nn.Linear(2, 1, dtype="float64").weight.dtype == np.float64  # dtype= still wins
    # the namespace's own functions keep the backend's default (the standard's)
    assert XP.asarray([1.0]).dtype == np.float64 and XP.zeros(1).dtype == np.float64


@pytest.mark.parametrize(
    "bad, kind",
    [
        ("float", ValueError),
        ("int32", ValueError),
        (np.int64, ValueError),
        (3, TypeError),
        (None, TypeError),
        (object(), TypeError),
    ],  # fmt: skip
)
def test_set_default_dtype_refuses_what_is_no_floating_dtype(bad, kind):
    with pytest.raises(kind, match=r"set_default_dtype: dtype"):
        ad.set_default_dtype(bad)
    assert ad.get_default_dtype() == "float32"  # unchanged
