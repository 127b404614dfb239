"""Reverse-mode automatic differentiation for any Python Array API namespace.

>>> import numpy as np, autodiff as ad
>>> xp = ad.Autodiff(np)
>>> x = xp.asarray([1.0, 2.0], requires_grad=True)
>>> xp.sum(x * x).backward()
>>> x.grad
"""

from . import nn, optim, registry
from .graph import enable_grad, is_grad_enabled, no_grad
from .io import load, save
from .namespace import Autodiff
from .tensor import Tensor
from .transforms import custom_vjp, grad, hessian, jacobian, jvp, value_and_grad, vjp
from .viz import draw_graph, to_dot

__all__ = [
    "Autodiff",
    "Tensor",
    "no_grad",
    "enable_grad",
    "is_grad_enabled",
    "grad",
    "value_and_grad",
    "vjp",
    "jvp",
    "jacobian",
    "hessian",
    "custom_vjp",
    "registry",
    "nn",
    "optim",
    "save",
    "load",
    "to_dot",
    "draw_graph",
]
__version__ = "0.1.0"
