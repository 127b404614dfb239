"""Padding and one-hot encoding: ``pad`` (constant, reflect, replicate, circular; one
registered op with a fused rule) and ``one_hot`` (integer output, no gradient)."""

from __future__ import annotations

from ... import checks
from ...backends import device_of
from ...engine.namespace import recorder_of
from ...engine.registry import defop
from ...engine.tensor import Tensor
from ...rules.batch_rules import leading
from ._dtypes import dtype_facts

__all__ = ["pad", "one_hot"]

_MODES = ("constant", "reflect", "replicate", "circular")


def _axis_pads(ndim, pad):
    """torch's order (last axis first, (left, right) each) as (axis, left, right)."""
    return [(ndim - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]


def _source(xp, n, left, right, mode, device):
    """For each output position along an axis, the input position it reads (clipped
    into range for 'constant') and, for 'constant', whether it reads one at all."""
    i = xp.arange(-left, n + right, device=device)
    if mode == "constant":
        inside = (i >= 0) & (i < n)
        return xp.clip(i, 0, max(n - 1, 0)), inside
    if mode == "replicate":
        return xp.clip(i, 0, n - 1), None
    if mode == "circular":
        return i % n, None
    j = xp.abs(i)  # reflect (the edge not repeated): pads < n
    return xp.where(j > n - 1, 2 * (n - 1) - j, j), None


def _expand(xp, a, ndim, axis):
    return xp.reshape(a, (a.shape[0],) + (1,) * (ndim - 1 - axis))


def _pad(xp, x, pad, mode, value):
    for axis, left, right in _axis_pads(x.ndim, pad):
        if left == 0 and right == 0:
            continue
        n = x.shape[axis]
        src, inside = _source(xp, n, left, right, mode, device_of(x))
        if inside is not None and n == 0:  # nothing to gather: all of it is the value
            shape = x.shape[:axis] + (n + left + right,) + x.shape[axis + 1 :]
            x = xp.full(shape, value, dtype=x.dtype, device=device_of(x))
            continue
        x = xp.take(x, src, axis=axis)
        if inside is not None and (left > 0 or right > 0):
            mask = _expand(xp, inside, x.ndim, axis)
            x = xp.where(mask, x, xp.asarray(value, dtype=x.dtype, device=device_of(x)))
    return x


def _pad_rule(xp, g, ans, x, *, pad, mode, value):
    """The adjoint: 'constant' is the pad of g by the opposite amounts (crop, zero fill);
    the others add every output element back where it was read from (a scatter-add)."""
    if mode == "constant":
        return _pad(xp, g, tuple(-p for p in pad), "constant", 0.0)
    for axis, left, right in reversed(_axis_pads(x.ndim, pad)):
        if left == 0 and right == 0:
            continue
        n = x.shape[axis]
        src, _ = _source(xp, n, left, right, mode, device_of(g))
        shape = g.shape[:axis] + (n,) + g.shape[axis + 1 :]
        g = xp.index_add(xp.zeros(shape, dtype=g.dtype, device=device_of(g)), src, g, axis=axis)
    return g


def _pad_jvp(xp, ts, ans, x, *, pad, mode, value):
    (t,) = ts
    return None if t is None else _pad(xp, t, pad, mode, 0.0)


defop(
    "nn.pad",
    _pad_rule,
    jvp=_pad_jvp,
    chapter="nn.padding",
    saves=(),
    impl=lambda B: lambda x, *, pad, mode, value: _pad(B, x, pad, mode, value),
    batch=leading,  # it pads the trailing axes
    doc="pad the last axes (torch's order: last axis first), constant/reflect/replicate/circular",
)


def pad(input, pad, mode="constant", value=None):
    """Pad ``input`` as ``torch.nn.functional.pad``: ``pad = (left, right)`` for the last
    axis, then the one before it, ...; 'constant' fills with ``value`` (default 0; a
    negative pad crops), 'reflect' mirrors without repeating the edge (pads < size),
    'replicate' repeats the edge, 'circular' wraps around (pads <= size). The three
    non-constant modes pad the last 1, 2 or 3 axes of an input with one or two more
    (batch, channels), as torch."""
    name = "pad"
    checks.choice(name, "mode", mode, _MODES)
    pads = checks.integers(name, "pad", pad)
    rec = recorder_of(input)
    if not isinstance(input, Tensor):
        input = rec.xp.asarray(input)
    if len(pads) % 2:
        raise ValueError(f"{name}: pad must have an even length, got {len(pads)}")
    k = len(pads) // 2
    if k > input.ndim:
        raise ValueError(
            f"{name}: pad {pads} pads {k} axes, the input has {input.ndim} (shape "
            f"{tuple(input.shape)})"
        )
    if mode == "constant":
        value = 0.0 if value is None else checks.number(name, "value", value)
        for axis, left, right in _axis_pads(input.ndim, pads):
            if input.shape[axis] + left + right < 0:
                raise ValueError(f"{name}: pad {pads} crops axis {axis} below size 0")
    else:
        if value is not None and value != 0:
            raise ValueError(f"{name}: value is for mode 'constant' only, got mode {mode!r}")
        if k > 3 or input.ndim not in (k + 1, k + 2):
            raise ValueError(
                f"{name}: mode {mode!r} pads the last 1, 2 or 3 axes of an input with one or "
                f"two more; got pad {pads} for shape {tuple(input.shape)}"
            )
        for axis, left, right in _axis_pads(input.ndim, pads):
            n = input.shape[axis]
            if left < 0 or right < 0:
                raise ValueError(f"{name}: mode {mode!r} needs pads >= 0, got {pads}")
            limit = {"reflect": n - 1, "circular": n, "replicate": None}[mode]
            if (mode == "replicate" and n == 0 and left + right) or (
                limit is not None and max(left, right) > limit
            ):
                raise ValueError(
                    f"{name}: mode {mode!r} pads axis {axis} of size {n} by ({left}, {right}): "
                    + ("pads must be < the size" if mode == "reflect" else
                       "pads must be <= the size" if mode == "circular" else
                       "an empty axis can't be replicated")
                )  # fmt: skip
        value = 0.0
    return rec.xp.nn.pad(input, pad=pads, mode=mode, value=float(value))


def one_hot(tensor, num_classes=-1):
    """``tensor``'s integer classes as one-hot vectors along a new last axis, an int64
    array (no gradient); ``num_classes=-1``: one more than the largest class."""
    name = "one_hot"
    num_classes = checks.integer(name, "num_classes", num_classes, low=-1)
    rec = recorder_of(tensor)
    xp = rec.xp
    t = tensor if isinstance(tensor, Tensor) else xp.asarray(tensor)
    if not dtype_facts(xp, t.dtype).integral:
        raise TypeError(f"{name}: tensor must hold integer classes, got {t.dtype}")
    B, raw = rec.backend, t.data
    size = 1
    for n in t.shape:
        size *= n
    if num_classes == -1:
        if size == 0:
            raise ValueError(f"{name}: num_classes=-1 needs a non-empty tensor")
        num_classes = int(B.max(raw)) + 1
    if size and B.checks_on_host(raw):
        if bool(B.any(raw < 0)):
            raise ValueError(f"{name}: classes must be >= 0")
        if bool(B.any(raw >= num_classes)):
            raise ValueError(f"{name}: classes must be < num_classes={num_classes}")
    classes = B.arange(num_classes, dtype=raw.dtype, device=B.device_of(raw))
    out = B.astype(B.expand_dims(raw, axis=-1) == classes, B.int64)
    return xp.asarray(out)
