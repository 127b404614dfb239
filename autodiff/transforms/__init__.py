"""Function transforms, JAX's conventions: reverse mode (``reverse.py``), forward mode
(``forward.py``), ``vmap`` (``vmap.py``), user-defined rules (``custom.py``) and
``checkpoint``, ``jit`` (``jit.py``); what they share is in ``common.py``.

Every transform takes and returns pytrees; raw arrays in give raw arrays out.
"""

from .checkpoint import checkpoint
from .custom import custom_jvp, custom_vjp
from .forward import hessian, hvp, jacfwd, jvp
from .jit import jit
from .reverse import grad, jacobian, value_and_grad, vjp
from .vmap import vmap

jacrev = jacobian  # reverse mode, JAX's name

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacobian", "jacrev", "jacfwd", "hvp",
           "hessian", "custom_vjp", "custom_jvp", "vmap", "checkpoint", "jit"]  # fmt: skip
