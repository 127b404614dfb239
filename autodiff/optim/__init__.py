"""Optimizers and learning-rate schedules with torch.optim's signatures and update rules.

>>> import numpy as np, autodiff as ad
>>> from autodiff.optim import Adam
>>> xp = ad.Autodiff(np)
>>> w = xp.asarray(np.ones(3), requires_grad=True)
>>> opt = Adam([w], lr=1e-2)
>>> opt.zero_grad(); xp.sum(w * w).backward(); opt.step()

The layout is torch's: the base class in ``optimizer``, one module per family
(``sgd``, ``adam``, ``rmsprop``, ``adagrad``, ``lbfgs``), the schedules in
``lr_scheduler`` (``autodiff.optim.lr_scheduler.StepLR``) and gradient clipping in
``clip``; every public name is also here (``autodiff.optim.StepLR``).

Parameters are updated in place, on their own buffer (on a lazy backend such as
dask, ``step()`` rebinds them and persists the new values and the state once per
step, so the task graph doesn't grow). The order of floating-point operations
follows torch's single-tensor (``foreach=False``) kernels, so trajectories agree
with torch to rounding.
"""

from __future__ import annotations

from . import lr_scheduler
from .adagrad import Adagrad
from .adam import Adam, Adamax, AdamW, NAdam, RAdam
from .clip import clip_grad_norm_, clip_grad_value_
from .lbfgs import LBFGS
from .lr_scheduler import (
    CosineAnnealingLR,
    CosineAnnealingWarmRestarts,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    LRScheduler,
    MultiStepLR,
    OneCycleLR,
    ReduceLROnPlateau,
    SequentialLR,
    StepLR,
)
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = [
    "Optimizer",
    "SGD",
    "Adam",
    "AdamW",
    "RMSprop",
    "Adagrad",
    "Adamax",
    "NAdam",
    "RAdam",
    "LBFGS",
    "clip_grad_norm_",
    "clip_grad_value_",
    "lr_scheduler",
    "LRScheduler",
    "StepLR",
    "MultiStepLR",
    "ExponentialLR",
    "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts",
    "LinearLR",
    "LambdaLR",
    "OneCycleLR",
    "SequentialLR",
    "ReduceLROnPlateau",
]
