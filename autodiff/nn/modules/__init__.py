"""Layers as in ``torch.nn``: same constructor arguments, parameter names, shapes
and default initialization, so a torch state dict loads one to one.

Every layer with parameters is created on a namespace: ``xp=`` (raw or
differentiable, default ``Autodiff(numpy)``), ``dtype=`` (default
``autodiff.get_default_dtype()``, float32 unless set),
``device=``, and ``generator=`` (a NumPy Generator; default: the one seeded by
``autodiff.nn.init.manual_seed``).

``module``: the ``Module`` base, ``Sequential``, ``ModuleList`` and what layers build
their parameters with; ``containers``: ``Parameter``, ``ModuleDict``, ``ParameterList``,
``ParameterDict``. The layers, one module per family, each calling the ops of its
namesake in ``autodiff.nn.functional``: ``linear``, ``conv``, ``pooling``, ``resample``,
``flatten``, ``activations``, ``embedding``, ``normalization``, ``dropout``, ``losses``,
``recurrent``, ``attention`` (``MultiheadAttention``) and ``transformer``.
"""

from __future__ import annotations

from . import (
    activations,
    attention,
    containers,
    conv,
    dropout,
    embedding,
    flatten,
    linear,
    losses,
    normalization,
    pooling,
    recurrent,
    resample,
    transformer,
)
from .activations import *  # noqa: F403
from .attention import *  # noqa: F403
from .containers import *  # noqa: F403
from .conv import *  # noqa: F403
from .dropout import *  # noqa: F403
from .embedding import *  # noqa: F403
from .flatten import *  # noqa: F403
from .linear import *  # noqa: F403
from .losses import *  # noqa: F403
from .module import Module, ModuleList, Sequential
from .normalization import *  # noqa: F403
from .pooling import *  # noqa: F403
from .recurrent import *  # noqa: F403
from .resample import *  # noqa: F403
from .transformer import *  # noqa: F403

_FAMILIES = (
    containers,
    linear,
    conv,
    pooling,
    resample,
    flatten,
    activations,
    embedding,
    normalization,
    dropout,
    losses,
    recurrent,
    attention,
    transformer,
)
__all__ = [
    "Module",
    "Sequential",
    "ModuleList",
    *(name for module in _FAMILIES for name in module.__all__),
]
