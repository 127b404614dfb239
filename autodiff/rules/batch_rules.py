"""``vmap``'s generic batching rules (makers) and the helpers rules share.

An op declares its batching rule where it is registered, in its rules module
(``autodiff/rules/<chapter>.py``): ``defop(..., batch=rule)``. The rule is written beside
the op as ``_<op>_batch`` (``_matmul_batch``), or is one of the generic rules here, marked
``@derived`` (``gradcheck --batching`` and ``Op.batch_kind`` count them as "derived", the
others as "written"): ``passthrough``, ``leading``, ``axis(...)``, ``axes_with_shape()``,
and ``elementwise``, which an element-wise (``diagonal``) op gets from its metadata
without declaring it. :func:`autodiff.engine.batching.rule_of` resolves an op's rule;
an op without one runs in the fallback loop.

A rule is ``rule(c, *args, **kwargs)``. ``c`` is a :class:`~autodiff.engine.batching.Call`:
``c.f``, the op's function (taking the recorded layout of arguments); ``c.xp``, the
recording namespace; ``c.n``, the batch size; ``c.bd``, per positional argument whether
it is batched (a tuple of flags for a list of arrays); ``c.kd``, the same per keyword
argument; and helpers: ``c.rank(i, a)`` (one example's number of axes), ``c.lift(a, b)``
(an unbatched argument broadcast along a new first axis), ``c.pad(a, rank)`` (size-1
axes after the batch axis) and ``c.composite(fn, *args)`` (a formula for one example,
each of its ops batched by its own rule). ``args`` and ``kwargs`` are the op's
arguments, plain Tensors (or Batched values of outer vmaps), the batch axis first where
batched. The rule returns the output(s) with the batch axis first (a Tensor, or a tuple
or list of them; a result that is no array as it is), or ``NotImplemented`` to ask for
the fallback loop for this call (an argument combination it doesn't cover). It computes
with ``c.f`` and ``c.xp``, so what it does is recorded, and differentiable, as usual.

The ``nn.functional`` ops declare theirs the same way, beside their registration in
``autodiff/nn/functional/<family>.py``, importing the makers and helpers from here.
``gradcheck --batching --op NAME`` checks a rule against a loop of the op (values and
per-example gradients); ``tests/test_vmap.py`` runs that check for every op with a spec.
"""

from __future__ import annotations

from ..engine.batching import derived, elementwise, is_bool, key_parts, mask_error

__all__ = [
    "elementwise", "passthrough", "leading", "axis", "axes_with_shape", "ALL", "KEEP",
    "FLAT", "REQUIRED", "derived", "flags", "shift", "broadcast_shape", "example_shape",
    "lift_all", "is_index_array", "key_parts", "is_bool", "mask_error", "fold", "unfold",
]  # fmt: skip


# -- generic rules (makers), derived from metadata ------------------------------------------
# ``elementwise`` (imported above) lives in the engine, which derives it from an op's
# metadata and imports no rule module.
@derived
def passthrough(c, *args, **kwargs):
    """The op itself: its result has the batch axis first already (``zeros_like``), or is
    no array (``result_type``)."""
    return c.f(*args, **kwargs)


@derived
def leading(c, *args, **kwargs):
    """Ops on the trailing axes of their first argument (matrices, the last axis) that
    batch over its leading axes: the op itself, when only that argument is batched."""
    if not c.bd[0] or any(c.bd[1:]) or any(flags(c.kd)):
        return NotImplemented
    return c.f(*args, **kwargs)


def flags(kd):
    """Every keyword argument's batched flag (those of a tuple's items one by one)."""
    for v in kd.values():
        if isinstance(v, tuple):
            yield from v
        else:
            yield v


REQUIRED = object()  # a default that marks an argument the op requires
ALL, KEEP, FLAT = "all", "keep", "flat"


def shift(a, r):
    """One example's axis ``a`` (of ``r`` axes) in the batched array: non-negative ones
    move up by one, negative ones count from the end as they did."""
    if isinstance(a, (tuple, list)):
        return type(a)(shift(i, r) for i in a)
    return a + 1 if a >= 0 else a


def axis(name="axis", default=None, none=ALL, pos=None):
    """The rule of an op of one array with an axis argument (``name``, positional at
    ``pos`` if it may be): its axes shifted past the batch axis; ``axis=None`` (and the
    ``default``) means every axis of one example (``none=ALL``: reductions, ``flip``), or
    is kept (``KEEP``), or the example flattened (``FLAT``: ``argmax``)."""

    @derived
    def rule(c, x, *args, **kwargs):
        if not c.bd[0] or any(c.bd[1:]) or any(flags(c.kd)):
            return NotImplemented
        args = list(args)
        if pos is not None and len(args) >= pos:
            value = args[pos - 1]
        else:
            value = kwargs.get(name, default)
            if value is REQUIRED:
                return NotImplemented
        r = x.ndim - 1
        if value is None:
            if none == FLAT:
                return _flat_call(c, x, args, kwargs, name, pos)
            if none == ALL:
                value = tuple(range(1, r + 1))
        else:
            value = shift(value, r)
        if pos is not None and len(args) >= pos:
            args[pos - 1] = value
        else:
            kwargs[name] = value
        return c.f(x, *args, **kwargs)

    return rule


def _flat_call(c, x, args, kwargs, name, pos):
    """An op that flattens its input for ``axis=None`` (``argmax``, ``softmax``), on each
    example flattened: ``axis=1`` of (n, -1), keepdims giving size-1 axes per example."""
    xp, r = c.xp, x.ndim - 1
    keep = kwargs.get("keepdims", False)
    kwargs = dict(kwargs, **{name: 1})
    kwargs.pop("keepdims", None)
    out = c.f(xp.reshape(x, (c.n, -1)), *args, **kwargs)
    if out.ndim == 2:  # an op that keeps the shape (softmax): back to the example's
        return xp.reshape(out, tuple(x.shape))
    return xp.reshape(out, (c.n,) + (1,) * r) if keep else out


def axes_with_shape(default_none=ALL):
    """``fftn``-like ops: ``axes=None`` means the last ``len(s)`` axes (all if ``s`` is
    None) of one example."""

    @derived
    def rule(c, x, **kwargs):
        if not c.bd[0] or any(flags(c.kd)):
            return NotImplemented
        r = x.ndim - 1
        axes, s = kwargs.get("axes"), kwargs.get("s")
        if axes is None:
            axes = tuple(range(r - len(s), r)) if s is not None else tuple(range(r))
        kwargs["axes"] = shift(tuple(axes), r)
        return c.f(x, **kwargs)

    return rule


# -- helpers shared by the rules ----------------------------------------------------------------
def broadcast_shape(*shapes):
    """The broadcast of ``shapes`` (tuples), as the standard broadcasts."""
    r = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-r, 0):
        sizes = {s[i] for s in shapes if len(s) >= -i and s[i] != 1}
        if len(sizes) > 1:
            raise ValueError(f"shapes {shapes} can't be broadcast together")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def example_shape(c, i, a):
    """One example's shape of positional argument ``i`` (value ``a``; () for a scalar)."""
    return tuple(a.shape[1:]) if c.bd[i] else tuple(getattr(a, "shape", ()))


def lift_all(c, arrays):
    """Every one of ``arrays`` (the positional arguments, in order) batched: ``c.lift``."""
    return [c.lift(a, b) for a, b in zip(arrays, c.bd)]


def is_index_array(k):
    """Whether the part ``k`` of an index key is an array (not None, ..., an int, a slice)."""
    return not (k is None or k is Ellipsis or isinstance(k, (int, slice)))


def fold(c, a, lead=1):
    """A batched ``a`` with the batch axis merged into the next one (an op's own batch
    axis N): (n, N, ...) -> (n * N, ...)."""
    return c.xp.reshape(a, (c.n * a.shape[1],) + tuple(a.shape[2:]))


def unfold(c, y):
    """The inverse of ``fold`` on an op's output (n * N, ...) -> (n, N, ...)."""
    return c.xp.reshape(y, (c.n, y.shape[0] // c.n) + tuple(y.shape[1:]))
