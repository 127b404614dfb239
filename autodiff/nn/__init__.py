"""Deep-learning layers on top of the engine, as ``torch.nn``.

- ``autodiff.nn.functional`` (as ``F``): the extension ops, one registered op each.
- ``Module`` and the layers (``Linear``, ``Conv2d``, ``GRU``, ``MultiheadAttention``...),
  created on a namespace (``xp=``, default ``Autodiff(numpy)``), movable with ``.to(xp)``.
- ``autodiff.nn.init``: torch's initializations from a seeded generator.
- ``functional_call(module, params, args)``: a module as a function of its parameters.
"""

from . import functional, init
from .layers import *  # noqa: F403
from .layers import __all__ as _layers
from .module import Module, ModuleList, Sequential
from .multihead import MultiheadAttention
from .rnn import GRU, GatedMemoryCell, GRUCell, LSTMCell
from .stateless import functional_call

__all__ = [
    "functional",
    "init",
    "Module",
    "Sequential",
    "ModuleList",
    *_layers,
    "GRUCell",
    "GRU",
    "LSTMCell",
    "GatedMemoryCell",
    "MultiheadAttention",
    "functional_call",
]
