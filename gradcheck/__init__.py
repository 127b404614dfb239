"""Central-difference verification of every registered VJP rule.

``check_grad(f, *inputs)`` / ``check_second(f, *inputs)`` for any function;
``gradcheck`` (or ``python -m gradcheck``) walks the whole registry.
"""

from .core import GradcheckError, Result, check_grad, check_op, check_second

__all__ = ["check_grad", "check_second", "check_op", "Result", "GradcheckError"]
