"""One table of ops: name -> forward, rules, metadata.

Every function of a wrapped namespace that takes arrays is an :class:`Op` here.
The namespace (``Autodiff(xp)``), the gradcheck specs and the docs are built
from this table; nothing else lists ops. The table is filled by the modules
that define rules (``autodiff/rules/``, ``autodiff/nn/``), which the package
imports; this module imports none of them.

A VJP rule has the signature ``rule(xp, g, ans, *args, **kwargs)``: ``g`` is
the cotangent of the output, ``ans`` the output (or the forward's residuals)
and ``args``/``kwargs`` the op's own arguments. ``xp`` says how it is run:

- a plain backward pass gives the raw backend (``xp.records`` is False) and raw
  arrays;
- ``backward(create_graph=True)`` gives the recording namespace
  (``xp.records`` is True) and Tensors, so that what the rule computes is
  itself recorded and differentiates again.

Both offer the standard's functions and the kernels of ``autodiff/backends``
(under recording, differentiable versions of them), so one rule serves both.
Rules never undo broadcasting or cast dtypes: the backward pass does that once
for every op.

Complex values: a rule is the *transpose* of the op's derivative (JAX's
convention), so the rule of a holomorphic op is the real one unchanged (``exp``:
``g * ans``, ``matmul``: ``g @ x2^T``, no conjugates), and only the others (``abs``,
``conj``, ``real``, ``vecdot``, norms, decompositions) conjugate. The backward pass
turns that into PyTorch's convention at its two ends: the cotangent a user gives
and the gradient a leaf (or a transform) receives are conjugated once. A complex
gradient reaching a real input keeps its real part (in ``fit``).

Forward mode (``autodiff/forward.py``) reads the same table. An op's JVP comes, in this
order, from:

- ``jvp``: a rule written for it, ``jvp(xp, ts, ans, *args, **kwargs)``, ``ts`` one
  tangent per positional argument (None: zero), returning the output's tangent (a tuple
  for several outputs, None for a zero one; ``NotImplemented`` asks for the fallback at
  this call, e.g. an ``ord`` without a formula). Same ``xp``, ``ans`` and saved values as
  the VJP rule, so it reads only what that saves;
- ``linear``: the op is linear in its differentiable arguments, so the JVP is the op
  itself applied to the tangents (zeros for the others);
- ``bilinear``: linear in each of its two array arguments: ``op(t1, x2) + op(x1, t2)``;
- derived, for a ``diagonal`` op (element-wise in every argument) that is
  ``holomorphic`` or real: the VJP rules applied to the tangents, since a diagonal
  map is its own transpose (``exp``: ``t * ans``);
- otherwise the fallback: the VJP rule, recorded on a zero cotangent and transposed
  (the double-VJP trick, on that one node).

``Op.jvp_kind`` says which; ``gradcheck --list`` shows it, with ``Op.vjp_kind`` and
``Op.batch_kind``.

``vmap`` batches an op by its rule ``batch`` (written beside the op as ``_<op>_batch``, or a
generic maker of ``autodiff/rules/batch_rules.py``: ``leading``, ``axis("axis")``...), else
by one derived from its metadata (``elementwise`` for a ``diagonal`` op), else by a loop
over the examples (``engine/batching.py``'s ``rule_of``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Op", "defop", "ops", "get", "DIFF", "CONST", "MISSING", "JVP_KINDS", "VJP_KINDS",
    "BATCH_KINDS",
]  # fmt: skip

# Kinds of op: how the graph treats a call whose inputs require grad.
DIFF = "diff"  # has a VJP rule
CONST = "const"  # piecewise constant or integer valued: outputs never require grad
MISSING = "missing"  # no rule yet: raises NotImplementedError at call time
# Where a differentiable op's JVP comes from (see the module's docstring), best first.
JVP_KINDS = ("written", "linear", "bilinear", "derived", "fallback")
# Where an op's VJP comes from: written for it, derived from another rule (a custom_jvp's
# JVP, transposed), or none yet (MISSING).
VJP_KINDS = ("written", "derived", "missing")
# Where an op's batching rule comes from: a generic one (a maker, or derived from its
# metadata), one written for it, or none (vmap's loop over the examples).
BATCH_KINDS = ("derived", "written", "fallback")


@dataclass(eq=False)
class Op:
    """A registered op: its forward, its VJP rule and what the engine must know of it."""

    name: str
    """The standard's name ("sum", "linalg.solve"), or "nn.<name>" for extension ops."""
    chapter: str
    """The chapter of the spec (or nn family) it belongs to: ``gradcheck --list`` groups
    the ops by it."""
    kind: str = DIFF
    """DIFF, CONST or MISSING (see above)."""
    vjp: tuple | Callable | None = None
    """Per positional argument a rule (or None: no gradient), or one joint rule
    returning a tuple (when the arguments' gradients share work). A rule returns an
    array, or a ``graph.Outer`` (a weight's gradient as factors) or a ``graph.Zeros``
    (with the positions that are zero whatever the values: ``where``, ``__setitem__``)."""
    impl: Callable | None = None
    """``impl(B) -> raw function``; default: the backend's function of the same name."""
    public: Callable | None = None
    """``public(f, rec) -> function`` taking the standard's arguments, when the recorded
    call lays them out otherwise (``concat(arrays)`` recorded as ``concat(*arrays)``);
    ``rec`` is the namespace's Recorder."""
    needs: bool = False
    """A joint rule that takes ``needs=`` (per argument: whether its gradient is
    wanted), so it can skip work for arguments that need none."""
    residuals: Callable | None = None
    """The forward returns ``(out, residuals)``: values its rule reads that it would
    otherwise recompute (gates, attention weights); the rule gets them as ``ans``.
    Under ``create_graph`` they are recomputed instead, by
    ``residuals(xp, *args, **kwargs)`` on the recording namespace, so that second
    derivatives flow through them (the op's ``saves`` must cover what this reads)."""
    lean: Callable | None = None
    """``lean(B) -> raw function``: the forward of a ``residuals`` op without them, for
    calls that record nothing (no input needs a gradient, or under no_grad), where
    making the residuals would be work thrown away."""
    saves: tuple | None = None
    """Positions of the arguments whose values the rules read (None: all), or one
    tuple per argument (what its rule reads): nothing else is kept alive."""
    saves_ans: bool = False
    """The rules read the output: it is kept (and guarded against in-place writes)."""
    view: bool = False
    """The output may alias the input: one version counter for both, and a write into
    the output goes into the input (the view is taken again by calling the op, see
    inplace.py; so a view op's output must gather elements of its first argument)."""
    domain: tuple | None = None
    """Open interval of real inputs where the op is differentiable (for specs)."""
    twice: bool = True
    """Twice differentiable (gradcheck checks second order)."""
    keeps_dtype: bool = True
    """An element-wise op of one argument whose rule returns the input's dtype, so
    the backward pass skips fitting it (not ``real``/``imag``: real of complex)."""
    complex: bool | None = None
    """Takes complex inputs (its rules are written for them); default: every op of the
    standard but the nn extension ops. An op that doesn't refuses a complex tensor
    that requires grad (``maximum``, ``sort``: the standard defines them for real values
    only), and ``gradcheck --dtype complex128`` passes it over."""
    same: str | None = None
    """A binary op called with one tensor twice is recorded as this unary op
    (``x * x`` as ``square``: one rule pass instead of two and a sum)."""
    data_dependent: bool = False
    """The output's shape depends on the input's values (the standard's "data-dependent
    output shape": ``nonzero``, ``unique_*``, ``repeat`` of array repeats): ``jit``
    checks it on each replay."""
    style: str = "generic"
    """The wrapper that records it: "unary"/"binary" (element-wise, no argument
    loop: they dominate small-array code), "creation" (``requires_grad=``), "generic"."""
    doc: str = ""
    """The docstring of the namespace's function (default: the backend's)."""
    jvp: Callable | None = None
    """The forward-mode rule, ``jvp(xp, ts, ans, *args, **kwargs)`` (see above); None: one
    of the kinds below gives it."""
    linear: bool | tuple = False
    """Linear in its differentiable arguments (True: those with a VJP rule, or every
    positional argument of a joint rule; or the positions given): the JVP is the op
    applied to the tangents (``sum``, ``reshape``, ``x[key]``, ``concat``, the FFTs)."""
    bilinear: bool = False
    """Linear in each of its two array arguments (``matmul``, ``vecdot``): the JVP is
    ``op(t1, x2) + op(x1, t2)``."""
    diagonal: bool | None = None
    """Element-wise in every argument (output element i reads element i of each
    broadcast input); default: the element-wise styles. With ``holomorphic`` (or real
    inputs only), its JVP is derived from its VJP rules."""
    holomorphic: bool = True
    """On complex inputs, its derivative is complex-linear (``exp``, ``multiply``), so the
    transpose of a diagonal one is itself; False for ``abs``, ``sign``, ``conj``...,
    whose JVP must then be written (or it falls back)."""
    batch: Callable | None = None
    """The batching rule (``vmap``), ``batch(c, *args, **kwargs)`` with the batch axis first
    in the batched arguments (see ``engine/batching.py``).

    Written beside the op as ``_<op>_batch``, or a generic maker of
    ``rules/batch_rules.py`` (``passthrough``, ``leading``, ``axis("axis")``...). None: an
    element-wise (``diagonal``) op gets ``elementwise``, derived from its metadata; the
    others loop over examples."""

    def __post_init__(self):
        self.joint = callable(self.vjp)
        if self.complex is None:
            self.complex = not self.chapter.startswith("nn")
        # Element-wise rules never read an argument they didn't save, not even its
        # shape, so the backward pass hands them the saved tuple as it is.
        self.elementwise = self.style in ("unary", "binary")
        # saves given per argument (multiply's ((1,), (0,))): what is kept depends on
        # which gradients are wanted
        self.per_arg_saves = bool(self.saves) and isinstance(self.saves[0], tuple)
        if self.diagonal is None:
            self.diagonal = self.elementwise

    @property
    def jvp_kind(self) -> str | None:
        """Where its JVP comes from (one of ``JVP_KINDS``); None for an op that carries no
        gradient. A property: rule modules may attach ``jvp`` after registering."""
        if self.kind != DIFF:
            return None
        if self.jvp is not None:
            return "written"
        if self.linear:
            return "linear"
        if self.bilinear:
            return "bilinear"
        if self.diagonal and (self.holomorphic or not self.complex) and not self.joint:
            return "derived"
        return "fallback"

    @property
    def vjp_kind(self) -> str | None:
        """Where its VJP comes from (one of ``VJP_KINDS``); None for an op that carries no
        gradient (CONST)."""
        if self.kind == MISSING:
            return "missing"
        if self.kind != DIFF:
            return None
        rules = (self.vjp,) if self.joint else self.vjp
        if any(getattr(r, "derived", False) for r in rules if r is not None):
            return "derived"
        return "written"

    @property
    def batch_kind(self) -> str:
        """Where its batching rule comes from (one of ``BATCH_KINDS``), as ``vmap`` resolves
        it: "derived" for a generic rule (marked ``batching.derived``: a maker, or derived
        from the metadata), "written" for one of its own, "fallback" for none."""
        from .batching import rule_of  # a layer above the registry: imported when asked

        rule = rule_of(self)
        if rule is None:
            return "fallback"
        return "derived" if getattr(rule, "derived", False) else "written"

    def pull(self, xp, g, ans, args, kwargs, wanted):
        """The op's VJP: one gradient per positional argument, from its rule(s) on the
        cotangent ``g``, for the arguments whose entry of ``wanted`` is not None (None for
        the others). A joint rule is called once (with ``needs=`` if it takes it); per-
        argument rules once each."""
        if self.joint:
            if self.needs:
                kwargs = dict(kwargs, needs=tuple(w is not None for w in wanted))
            return self.vjp(xp, g, ans, *args, **kwargs)
        rules = self.vjp
        n = len(rules)
        return [
            None if w is None or i >= n or rules[i] is None
            else rules[i](xp, g, ans, *args, **kwargs)
            for i, w in enumerate(wanted)
        ]  # fmt: skip

    def function(self, B):
        """The op's raw function on backend ``B`` (its ``impl``, else ``B``'s function of the
        op's name); None where ``B`` has none."""
        if self.impl is not None:
            return self.impl(B)
        obj = B
        for part in self.name.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                return None
        return obj

    def __repr__(self):
        return f"Op({self.name!r}, {self.kind})"


_TABLE: dict[str, Op] = {}


def defop(name: str, *rules: Any, chapter: str, **fields: Any) -> Op:
    """Register op ``name``; ``rules`` are per-argument VJP rules, or one joint rule
    passed as ``vjp=``."""
    if name in _TABLE:
        raise ValueError(f"op {name!r} is registered twice")
    if rules:
        fields.setdefault("vjp", rules)
    if "kind" not in fields:
        fields["kind"] = DIFF if fields.get("vjp") is not None else CONST
    op = Op(name=name, chapter=chapter, **fields)
    _TABLE[name] = op
    return op


def ops() -> dict[str, Op]:
    """Every registered op, by name."""
    return dict(_TABLE)


def get(name: str) -> Op:
    """The op registered as ``name`` (KeyError if none)."""
    return _TABLE[name]
