"""Reverse-mode automatic differentiation for any Python Array API namespace.

>>> import numpy as np, autodiff as ad
>>> xp = ad.Autodiff(np)
>>> x = xp.asarray([1.0, 2.0], requires_grad=True)
>>> xp.sum(x * x).backward()
>>> x.grad
"""


def _mount_backends():
    """From a checkout that was not installed (``PYTHONPATH=.``), import the top-level
    ``backends/`` folder as ``autodiff.backends``: an install maps it there itself, and a
    bare ``backends`` would be shadowed by any ``backends.py`` of the user's."""
    import importlib.util
    import os
    import sys

    name = f"{__name__}.backends"
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "backends")
    init = os.path.join(folder, "__init__.py")
    found = importlib.util.find_spec(name)
    # an editable install of another checkout maps the name to its folder: this
    # checkout's own folder, when it has one, wins
    if found is not None and (not os.path.isfile(init) or found.origin == init):
        return
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[folder])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


_mount_backends()

# The rules (the standard's ops) and nn.functional (the extension ops) fill the registry,
# which imports neither.
from . import nn, optim, pytree, rules  # noqa: E402, F401
from .dtypes import get_default_dtype, set_default_dtype  # noqa: E402
from .engine import registry  # noqa: E402
from .engine.anomaly import HostReadWarning, detect_anomaly  # noqa: E402
from .engine.grad_mode import enable_grad, is_grad_enabled, no_grad  # noqa: E402
from .engine.namespace import Autodiff  # noqa: E402
from .engine.tensor import Tensor  # noqa: E402
from .io import load, save  # noqa: E402
from .transforms import (  # noqa: E402
    checkpoint,
    custom_jvp,
    custom_vjp,
    grad,
    hessian,
    hvp,
    jacfwd,
    jacobian,
    jacrev,
    jit,
    jvp,
    value_and_grad,
    vjp,
    vmap,
)
from .viz import draw_graph, to_dot  # noqa: E402

__all__ = [
    "Autodiff",
    "Tensor",
    "no_grad",
    "detect_anomaly",
    "HostReadWarning",
    "enable_grad",
    "is_grad_enabled",
    "grad",
    "value_and_grad",
    "vjp",
    "jvp",
    "jacobian",
    "jacrev",
    "jacfwd",
    "hvp",
    "hessian",
    "custom_vjp",
    "custom_jvp",
    "vmap",
    "checkpoint",
    "jit",
    "registry",
    "set_default_dtype",
    "get_default_dtype",
    "nn",
    "optim",
    "save",
    "load",
    "to_dot",
    "draw_graph",
]
__version__ = "0.1.0"
