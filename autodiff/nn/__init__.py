"""Deep-learning layers on top of the engine: ``autodiff.nn.functional`` (as ``F``)."""

from . import functional

__all__ = ["functional"]
