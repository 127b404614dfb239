"""Deep-learning layers on top of the engine, as ``torch.nn``.

- ``autodiff.nn.functional`` (as ``F``): the extension ops, one registered op each.
- ``Module`` and the layers (``Linear``, ``Conv2d``, ``GRU``, ``MultiheadAttention``...),
  created on a namespace (``xp=``, default ``Autodiff(numpy)``), movable with ``.to(xp)``.
- ``autodiff.nn.init``: torch's initializations from a seeded generator.
- ``functional_call(module, params, args)``: a module as a function of its parameters.
"""

from . import functional, init
from .activation_layers import ELU, GLU, Hardswish, LeakyReLU, Mish, Softmin, Unflatten
from .containers import ModuleDict, Parameter, ParameterDict, ParameterList
from .layers import *  # noqa: F403
from .layers import __all__ as _layers
from .layers1d import *  # noqa: F403
from .layers1d import __all__ as _layers1d
from .loss_modules import *  # noqa: F403
from .loss_modules import __all__ as _loss_modules
from .module import Module, ModuleList, Sequential
from .multihead import MultiheadAttention
from .norm_layers import BatchNorm1d, BatchNorm2d, GroupNorm, InstanceNorm2d, RMSNorm
from .rnn import GRU, LSTM, GatedMemoryCell, GRUCell, LSTMCell
from .stateless import functional_call
from .summary import summary
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "functional",
    "init",
    "Module",
    "Sequential",
    "ModuleList",
    "ModuleDict",
    "Parameter",
    "ParameterList",
    "ParameterDict",
    "LeakyReLU",
    "ELU",
    "Mish",
    "Hardswish",
    "GLU",
    "Softmin",
    "Unflatten",
    *_layers,
    *_layers1d,
    *_loss_modules,
    "BatchNorm1d",
    "BatchNorm2d",
    "InstanceNorm2d",
    "GroupNorm",
    "RMSNorm",
    "GRUCell",
    "GRU",
    "LSTMCell",
    "LSTM",
    "GatedMemoryCell",
    "MultiheadAttention",
    "TransformerEncoderLayer",
    "TransformerEncoder",
    "TransformerDecoderLayer",
    "TransformerDecoder",
    "Transformer",
    "functional_call",
    "summary",
]
