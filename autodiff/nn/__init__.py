"""Deep-learning layers on top of the engine, as ``torch.nn``.

- ``autodiff.nn.functional`` (as ``F``): the extension ops, one registered op each, in
  one module per family (``functional/``).
- ``Module`` and the layers (``Linear``, ``Conv2d``, ``GRU``, ``MultiheadAttention``...),
  created on a namespace (``xp=``, default ``Autodiff(numpy)``), movable with ``.to(xp)``;
  one module per family (``modules/``), each over the ops of its namesake in
  ``functional/``.
- ``autodiff.nn.init``: torch's initializations from a seeded generator.
- ``functional_call(module, params, args)``: a module as a function of its parameters;
  ``summary(model, input_shape)``: its layers, output shapes and parameter counts.
"""

from . import functional, init
from .modules import *  # noqa: F403
from .modules import __all__ as _modules
from .stateless import functional_call
from .summary import summary

__all__ = ["functional", "init", *_modules, "functional_call", "summary"]
