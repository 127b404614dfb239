"""Linear algebra functions of the main namespace (and their twins in ``linalg``)."""

from __future__ import annotations

from ..engine.registry import defop
from ._util import conj, inverse_permutation


def _matmul(xp, g, ans, x1, x2, *, needs=(True, True)):
    """(g @ x2^T, x1^T @ g), with 1-D operands promoted and demoted as matmul does;
    only the wanted ones (``X @ w`` on data ``X``: no product of the size of ``X``)."""
    n1, n2 = needs
    if x1.ndim == 1 and x2.ndim == 1:
        return g * x2 if n1 else None, g * x1 if n2 else None
    if x1.ndim == 1:  # (k,) @ (..., k, n) -> (..., n)
        ge = xp.expand_dims(g, axis=-2)
        g1 = (ge @ xp.matrix_transpose(x2))[..., 0, :] if n1 else None
        return g1, xp.expand_dims(x1, axis=-1) * ge if n2 else None
    if x2.ndim == 1:  # (..., m, k) @ (k,) -> (..., m)
        ge = xp.expand_dims(g, axis=-1)
        g2 = (xp.matrix_transpose(x1) @ ge)[..., 0] if n2 else None
        return ge * x2 if n1 else None, g2
    g1 = g @ xp.matrix_transpose(x2) if n1 else None
    return g1, xp.matrix_transpose(x1) @ g if n2 else None


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


for _prefix in ("", "linalg."):
    _chapter = "linalg" if _prefix else "linear_algebra"
    # vecdot conjugates its first argument: still bilinear over the reals
    # each argument's gradient reads the other argument only
    defop(_prefix + "matmul", vjp=_matmul, chapter=_chapter, bilinear=True, needs=True,
          saves=((1,), (0,)))  # fmt: skip
    defop(_prefix + "tensordot", vjp=_tensordot, chapter=_chapter, bilinear=True)
    defop(_prefix + "vecdot", vjp=_vecdot, chapter=_chapter, bilinear=True)
    defop(_prefix + "matrix_transpose", _matrix_transpose, chapter=_chapter, saves=(), view=True,
          linear=True)  # fmt: skip
