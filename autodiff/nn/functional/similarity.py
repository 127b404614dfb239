"""Cosine similarity and normalize: vectors along an axis measured by their p-norms
(each norm raised to ``eps``). One registered op each with a fused rule."""

from __future__ import annotations

import math

from ... import checks
from ...engine.namespace import recorder_of
from ...engine.registry import defop
from ...rules.batch_rules import lift_all
from .losses import _as_tensor

__all__ = ["cosine_similarity", "normalize"]

CH = "nn.loss"  # their chapter (gradcheck --list groups them with the losses)


def _cos_parts(xp, x1, x2, axis, eps):
    n1 = xp.sqrt(xp.sum(x1 * x1, axis=axis, keepdims=True))
    n2 = xp.sqrt(xp.sum(x2 * x2, axis=axis, keepdims=True))
    d1, d2 = xp.maximum(n1, eps), xp.maximum(n2, eps)
    cos = xp.sum(x1 * x2, axis=axis, keepdims=True) / (d1 * d2)
    return n1, n2, d1, d2, cos


def _cos_rule(xp, g, ans, x1, x2, *, axis, eps):
    """d cos / d x1 = x2 / (d1 d2) - cos x1 / d1^2 (the second term only where the norm
    is above eps: a clamped norm is a constant)."""
    n1, n2, d1, d2, cos = _cos_parts(xp, x1, x2, axis, eps)
    ge = xp.expand_dims(g, axis=axis)
    zero = xp.zeros_like(cos)
    c1 = xp.where(n1 > eps, cos / (d1 * d1), zero)
    c2 = xp.where(n2 > eps, cos / (d2 * d2), zero)
    return ge * (x2 / (d1 * d2) - c1 * x1), ge * (x1 / (d1 * d2) - c2 * x2)


def _cosine_similarity_batch(c, x1, x2, *, axis, eps):
    x1, x2 = lift_all(c, (x1, x2))
    return c.f(x1, x2, axis=axis + 1, eps=eps)  # axis >= 0 (the function makes it so)


defop(
    "nn.cosine_similarity",
    vjp=_cos_rule,
    chapter=CH,
    impl=lambda B: (
        lambda x1, x2, *, axis, eps: B.squeeze(_cos_parts(B, x1, x2, axis, eps)[-1], axis=axis)
    ),
    batch=_cosine_similarity_batch,
    doc="cosine of the angle between x1 and x2 along axis (norms raised to eps)",
)


def cosine_similarity(x1, x2, axis=1, eps=1e-8):
    """sum(x1 x2) / (max(|x1|, eps) max(|x2|, eps)) along ``axis`` (torch's ``dim``),
    x1 and x2 broadcast together."""
    name = "cosine_similarity"
    axis = checks.integer(name, "axis", axis)
    checks.number(name, "eps", eps, 0.0)
    rec = recorder_of(x1, x2)
    x1, x2 = _as_tensor(rec.xp, x1), _as_tensor(rec.xp, x2)
    shape = _broadcast_shape(name, tuple(x1.shape), tuple(x2.shape))
    if not -len(shape) <= axis < len(shape):
        raise IndexError(f"{name}: axis {axis} is out of range for shape {shape}")
    if tuple(x1.shape) != shape:
        x1 = rec.xp.broadcast_to(x1, shape)
    if tuple(x2.shape) != shape:
        x2 = rec.xp.broadcast_to(x2, shape)
    return rec.xp.nn.cosine_similarity(x1, x2, axis=axis % len(shape), eps=float(eps))


def _broadcast_shape(name, a, b):
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for i, j in zip(a, b):
        if i != j and 1 not in (i, j):
            raise ValueError(f"{name}: shapes {a} and {b} don't broadcast")
        out.append(max(i, j) if 0 not in (i, j) else 0)
    return tuple(out)


def _p_norm(xp, x, p, axis):
    a = xp.abs(x)
    if p == 2:
        return xp.sqrt(xp.sum(x * x, axis=axis, keepdims=True))
    if p == 1:
        return xp.sum(a, axis=axis, keepdims=True)
    return xp.sum(a**p, axis=axis, keepdims=True) ** (1.0 / p)


def _normalize_rule(xp, g, ans, x, *, p, axis, eps):
    """out = x / d, d = max(|x|_p, eps): g / d - sum(g x) / d^2 * d|x|_p/dx (where the norm
    is above eps), d|x|_p/dx = sign(x) |x|^(p-1) / |x|_p^(p-1)."""
    n = _p_norm(xp, x, p, axis)
    d = xp.maximum(n, eps)
    big = n > eps
    safe_n = xp.where(big, n, xp.ones_like(n))
    if p == 2:
        dn = x / safe_n
    elif p == 1:
        dn = xp.sign(x)
    else:
        dn = xp.sign(x) * xp.abs(x) ** (p - 1) / safe_n ** (p - 1)
    s = xp.sum(g * x, axis=axis, keepdims=True) / (d * d)
    return g / d - xp.where(big, s, xp.zeros_like(s)) * dn


def _normalize_batch(c, x, *, p, axis, eps):
    return c.f(x, p=p, axis=axis + 1, eps=eps)  # axis >= 0 (the function makes it so)


defop(
    "nn.normalize",
    _normalize_rule,
    chapter=CH,
    impl=lambda B: lambda x, *, p, axis, eps: x / B.maximum(_p_norm(B, x, p, axis), eps),
    batch=_normalize_batch,
    doc="x divided by its p-norm along axis (raised to eps)",
)


def normalize(input, p=2.0, axis=1, eps=1e-12):
    """input / max(|input|_p, eps) along ``axis`` (torch's ``dim``); p >= 1, finite."""
    name = "normalize"
    checks.number(name, "p", p, 1.0)
    if p == math.inf:
        raise ValueError(f"{name}: p must be finite, got inf")
    axis = checks.integer(name, "axis", axis)
    checks.number(name, "eps", eps, 0.0)
    rec = recorder_of(input)
    input = _as_tensor(rec.xp, input)
    if not -input.ndim <= axis < max(input.ndim, 1):
        raise IndexError(f"{name}: axis {axis} is out of range for shape {tuple(input.shape)}")
    p = float(p)
    return rec.xp.nn.normalize(input, p=int(p) if p in (1.0, 2.0) else p,
                               axis=axis % max(input.ndim, 1), eps=float(eps))  # fmt: skip
