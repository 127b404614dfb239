"""Activations, the softmax family and losses against PyTorch and formulas."""

import numpy as np
import pytest

import autodiff as ad
from autodiff.nn import functional as F

from .nn_compare import compare

torch = pytest.importorskip("torch", reason="PyTorch comparisons need torch==2.13.0")
TF = torch.nn.functional
X = np.array([[-1.5, 0.0, 0.3], [2.0, -0.2, 1.1]])

CASES = {
    "relu": (lambda a: F.relu(a), lambda a: TF.relu(a), [X]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_as_torch(name):
    ours, theirs, inputs = CASES[name]
    compare(ad.Autodiff(np), ours, theirs, inputs)
