"""One table of ops: name -> forward, VJP rule, metadata.

Every function of a wrapped namespace that takes arrays is an :class:`Op` here.
The namespace (``Autodiff(xp)``), the gradcheck specs and the docs are built
from this table; nothing else lists ops.

A VJP rule has the signature ``rule(xp, g, ans, *args, **kwargs)``: ``xp`` is
the namespace to compute with, ``g`` the cotangent of the output, ``ans`` the
output and ``args``/``kwargs`` the op's own arguments. During a plain backward
pass they are raw backend arrays and ``xp`` is the backend; under
``create_graph=True`` they are Tensors and ``xp`` is the differentiable
namespace, so the same rule gives higher derivatives. Rules never undo
broadcasting or cast dtypes: the graph does that once for every op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Op", "defop", "ops", "get"]

# Kinds of op: how the graph treats a call whose inputs require grad.
DIFF = "diff"  # has a VJP rule
CONST = "const"  # piecewise constant or integer valued: outputs never require grad
MISSING = "missing"  # no rule yet: raises NotImplementedError at call time


@dataclass(eq=False)
class Op:
    """A registered op: its forward, its VJP rule and metadata."""

    name: str
    chapter: str
    kind: str = DIFF
    vjp: tuple | Callable | None = None
    """Per positional argument a rule (or None), or one joint rule returning a tuple."""
    impl: Callable | None = None
    """``impl(B) -> raw function``; default: the backend's function of the same name."""
    public: Callable | None = None
    """``public(f) -> function`` with the standard's signature, when it differs."""
    needs: bool = False
    """A joint rule that takes ``needs=`` (per argument: whether its gradient is
    wanted), so it can skip work for arguments that need none."""
    residuals: bool = False
    """The forward (``impl``) returns ``(out, residuals)``: values its rule would
    otherwise recompute (gates, attention weights). The rule gets them as ``ans``;
    under ``create_graph`` it gets None and recomputes, so that second derivatives
    flow through them."""
    lean: Callable | None = None
    """``lean(B) -> raw function``: the forward of a ``residuals`` op without them, for
    calls that record nothing (no input needs a gradient, or under no_grad), where
    making the residuals would be work thrown away."""
    saves: tuple | None = None
    """Positions of the arguments whose values the rule reads (None: all)."""
    saves_ans: bool = False
    view: bool = False
    """Output may alias the input (in-place writes through it are refused)."""
    nout: int = 1
    """Number of array outputs; 0 means a variable-length tuple or list."""
    domain: tuple | None = None
    """Open interval of real inputs where the op is differentiable (for specs)."""
    twice: bool = True
    """Twice differentiable (gradcheck checks second order)."""
    same: str | None = None
    """A binary op called with one tensor twice is recorded as this unary op
    (``x * x`` as ``square``: one rule pass instead of two and a sum)."""
    style: str = "generic"
    """Wrapper shape: "unary"/"binary" (element-wise fast paths), "creation", "generic"."""
    doc: str = ""
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.joint = callable(self.vjp)
        # Element-wise rules never read an argument they didn't save, not even its
        # shape, so the backward pass hands them the saved tuple as it is.
        self.elementwise = self.style in ("unary", "binary")
        # saves given per argument (multiply's ((1,), (0,))): what is kept depends on
        # which gradients are wanted
        self.per_arg_saves = bool(self.saves) and isinstance(self.saves[0], tuple)

    def __repr__(self):
        return f"Op({self.name!r}, {self.kind})"


_TABLE: dict[str, Op] = {}


def defop(name: str, *rules: Any, chapter: str, **meta: Any) -> Op:
    """Register op ``name``; ``rules`` are per-argument VJP rules, or one joint rule
    passed as ``vjp=``."""
    if name in _TABLE:
        raise ValueError(f"op {name!r} is registered twice")
    if rules:
        meta.setdefault("vjp", rules)
    if "kind" not in meta:
        meta["kind"] = DIFF if meta.get("vjp") is not None else CONST
    op = Op(name=name, chapter=chapter, **meta)
    _TABLE[name] = op
    return op


def ops() -> dict[str, Op]:
    """Every registered op, by name."""
    _load()
    return dict(_TABLE)


def get(name: str) -> Op:
    _load()
    return _TABLE[name]


def _load():
    from . import vjps  # noqa: F401  (registers the standard's rules)
    from .nn import functional  # noqa: F401  (registers the extension ops)
