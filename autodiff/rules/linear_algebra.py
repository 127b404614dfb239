"""Linear algebra functions of the main namespace (and their twins in ``linalg``)."""

from __future__ import annotations

import math

from ..engine.registry import defop
from ._util import conj, inverse_permutation
from .batch_rules import leading


def _matmul(xp, g, ans, x1, x2, *, needs=(True, True)):
    """(g @ x2^T, x1^T @ g), with 1-D operands promoted and demoted as matmul does;
    only the wanted ones (``X @ w`` on data ``X``: no product of the size of ``X``)."""
    n1, n2 = needs
    if x1.ndim == 1 and x2.ndim == 1:
        return g * x2 if n1 else None, g * x1 if n2 else None
    if x1.ndim == 1:  # (k,) @ (..., k, n) -> (..., n)
        ge = xp.expand_dims(g, axis=-2)
        g1 = xp.matmul(ge, xp.matrix_transpose(x2))[..., 0, :] if n1 else None
        return g1, xp.expand_dims(x1, axis=-1) * ge if n2 else None
    if x2.ndim == 1:  # (..., m, k) @ (k,) -> (..., m)
        ge = xp.expand_dims(g, axis=-1)
        g2 = xp.matmul(xp.matrix_transpose(x1), ge)[..., 0] if n2 else None
        return ge * x2 if n1 else None, g2
    # xp.matmul, not @: the namespace's own (sparse's takes operands of any fill value)
    g1 = xp.matmul(g, xp.matrix_transpose(x2)) if n1 else None
    return g1, xp.matmul(xp.matrix_transpose(x1), g) if n2 else None


def _tensordot_axes(axes, n1, n2):
    if isinstance(axes, int):
        return list(range(n1 - axes, n1)), list(range(axes))
    a, b = axes
    return [i % n1 for i in a], [i % n2 for i in b]


def _tensordot(xp, g, ans, x1, x2, *, axes=2):
    a_axes, b_axes = _tensordot_axes(axes, x1.ndim, x2.ndim)
    free_a = [i for i in range(x1.ndim) if i not in a_axes]
    free_b = [i for i in range(x2.ndim) if i not in b_axes]
    na = len(free_a)
    g_b = list(range(na, g.ndim))
    g1 = xp.tensordot(g, x2, axes=(g_b, free_b))
    order1 = free_a + [a_axes[b_axes.index(j)] for j in sorted(b_axes)]
    g1 = xp.permute_dims(g1, inverse_permutation(order1))
    g2 = xp.tensordot(x1, g, axes=(free_a, list(range(na))))
    order2 = [b_axes[a_axes.index(i)] for i in sorted(a_axes)] + free_b
    g2 = xp.permute_dims(g2, inverse_permutation(order2))
    return g1, g2


def _vecdot(xp, g, ans, x1, x2, *, axis=-1):
    """sum(conj(x1) * x2): x1's side is conjugated (the transpose of conj(dx1) x2)."""
    if axis >= 0:
        axis -= max(x1.ndim, x2.ndim)
    ge = xp.expand_dims(g, axis=axis)
    return conj(xp, ge * x2), ge * conj(xp, x1)


def _matrix_transpose(xp, g, ans, x):
    return xp.matrix_transpose(g)


# -- batching rules (vmap): the batch axis first in each batched argument -----------------------
def _matmul_batch(c, x1, x2):
    """matmul of each example: a 1-D operand promoted as matmul promotes it alone, the
    leading (stack) axes of the two aligned past the batch axis."""
    xp, n = c.xp, c.n
    b1, b2 = c.bd
    r1, r2 = c.rank(0, x1), c.rank(1, x2)
    if r1 == 0 or r2 == 0:
        return NotImplemented  # the backend's error, from the loop
    if b1 and b2:
        if r1 == 1 and r2 == 1:
            k = x1.shape[-1]
            return xp.reshape(xp.reshape(x1, (n, 1, k)) @ xp.reshape(x2, (n, k, 1)), (n,))
        if r1 == 1:
            x1 = xp.reshape(x1, (n,) + (1,) * (r2 - 1) + (x1.shape[-1],))
            return xp.squeeze(x1 @ x2, axis=-2)
        if r2 == 1:
            x2 = xp.reshape(x2, (n,) + (1,) * (r1 - 2) + (x2.shape[-1], 1))
            return xp.squeeze(x1 @ x2, axis=-1)
        r = max(r1, r2)
        return c.pad(x1, r) @ c.pad(x2, r)
    if b1:
        if r2 == 1:
            return x1 @ x2
        if r1 == 1:  # the examples as the rows of one matrix: one product
            return xp.moveaxis(x1 @ x2, -2, 0)
        if r1 == 2 and r2 == 2:  # one (n*m, k) product instead of n small ones
            m, k = x1.shape[1], x1.shape[2]
            return xp.reshape(xp.reshape(x1, (n * m, k)) @ x2, (n, m, x2.shape[-1]))
        return (c.pad(x1, r2) if r2 > r1 else x1) @ x2
    if r1 == 1:
        return x2 @ x1 if r2 == 1 else x1 @ x2
    if r2 == 1:  # (..., m, k) @ (k, n): the examples as the columns of one matrix
        return xp.moveaxis(x1 @ xp.matrix_transpose(x2), -1, 0)
    return x1 @ (c.pad(x2, r1) if r1 > r2 else x2)


def _tensordot_batch(c, x1, x2, *, axes=2):
    xp, n = c.xp, c.n
    b1, b2 = c.bd
    r1, r2 = c.rank(0, x1), c.rank(1, x2)
    if isinstance(axes, int):
        a1, a2 = list(range(r1 - axes, r1)), list(range(axes))
    else:
        a1, a2 = [i % r1 for i in axes[0]], [i % r2 for i in axes[1]]
    free1 = [i for i in range(r1) if i not in a1]
    free2 = [i for i in range(r2) if i not in a2]
    if b1 and b2:  # a batched matmul over (free1, contracted) x (contracted, free2)
        s1, s2 = tuple(x1.shape[1:]), tuple(x2.shape[1:])
        p1 = xp.permute_dims(x1, (0,) + tuple(i + 1 for i in free1 + a1))
        p2 = xp.permute_dims(x2, (0,) + tuple(i + 1 for i in a2 + free2))
        f1 = tuple(s1[i] for i in free1)
        f2 = tuple(s2[i] for i in free2)
        k = math.prod(s1[i] for i in a1)
        m = xp.reshape(p1, (n, math.prod(f1), k)) @ xp.reshape(p2, (n, k, math.prod(f2)))
        return xp.reshape(m, (n,) + f1 + f2)
    if b1:
        return c.f(x1, x2, axes=([i + 1 for i in a1], a2))
    return xp.moveaxis(c.f(x1, x2, axes=(a1, [i + 1 for i in a2])), len(free1), 0)


def _vecdot_batch(c, x1, x2, *, axis=-1):
    r = max(c.rank(0, x1), c.rank(1, x2))
    x1, x2 = (c.pad(a, r) if b else a for a, b in zip((x1, x2), c.bd))
    return c.f(x1, x2, axis=axis - r if axis >= 0 else axis)


for _prefix in ("", "linalg."):
    _chapter = "linalg" if _prefix else "linear_algebra"
    # vecdot conjugates its first argument: still bilinear over the reals
    # each argument's gradient reads the other argument only
    defop(_prefix + "matmul", vjp=_matmul, chapter=_chapter, bilinear=True, needs=True,
          saves=((1,), (0,)), batch=_matmul_batch)  # fmt: skip
    defop(_prefix + "tensordot", vjp=_tensordot, chapter=_chapter, bilinear=True,
          batch=_tensordot_batch)  # fmt: skip
    defop(_prefix + "vecdot", vjp=_vecdot, chapter=_chapter, bilinear=True, batch=_vecdot_batch)
    defop(_prefix + "matrix_transpose", _matrix_transpose, chapter=_chapter, saves=(), view=True,
          linear=True, batch=leading)  # fmt: skip
