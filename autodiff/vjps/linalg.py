"""The ``linalg`` extension. Functions without a rule raise NotImplementedError
when called on a tensor that requires grad (never a silent zero at backward)."""

from __future__ import annotations

from ..registry import defop
from ._util import axes_of, expand, keep_shape, missing, nondiff

CH = "linalg"


def _T(xp, a):
    return xp.matrix_transpose(a)


def _eye_like(xp, a):
    n = a.shape[-1]
    return xp.eye(n, dtype=a.dtype, device=a.device)


def _inv(xp, g, ans, x):
    t = _T(xp, ans)
    return -(t @ g @ t)


def _det(xp, g, ans, x):
    return (g * ans)[..., None, None] * _T(xp, xp.linalg.inv(x))


def _slogdet(xp, gs, ans, x):
    g_logabs = gs[1]
    return (g_logabs[..., None, None] * _T(xp, xp.linalg.inv(x)),)


def _solve(xp, g, ans, x1, x2):
    """X = A^-1 B: dB = A^-T g, dA = -dB X^T (a 1-D B is a vector)."""
    vector = x2.ndim == 1
    if vector:
        g = xp.expand_dims(g, axis=-1)
        ans = xp.expand_dims(ans, axis=-1)
    gb = xp.linalg.solve(_T(xp, x1), g)
    ga = -(gb @ _T(xp, ans))
    if vector:
        gb = gb[..., 0]
    return ga, gb


def _cholesky(xp, g, ans, x, *, upper=False):
    """A = L L^T: dA = sym(L^-T Phi(L^T dL) L^-1), Phi = lower triangle, half diagonal."""
    L = _T(xp, ans) if upper else ans
    gl = _T(xp, g) if upper else g
    P = xp.tril(_T(xp, L) @ gl)
    P = P - xp.tril(xp.triu(P)) / 2
    Linv = xp.linalg.solve(L, xp.broadcast_to(_eye_like(xp, L), L.shape))
    S = _T(xp, Linv) @ P @ Linv
    return (S + _T(xp, S)) / 2


def _trace(xp, g, ans, x, *, offset=0, dtype=None):
    eye = xp.eye(x.shape[-2], x.shape[-1], k=offset, dtype=g.dtype, device=g.device)
    return g[..., None, None] * eye


def _diagonal(xp, g, ans, x, *, offset=0):
    n, m = x.shape[-2], x.shape[-1]
    pos = xp.linalg.diagonal(xp.reshape(xp.arange(n * m, device=g.device), (n, m)), offset=offset)
    z = xp.zeros(x.shape[:-2] + (n * m,), dtype=g.dtype, device=g.device)
    z = xp.index_add(z, pos, g, axis=-1)
    return xp.reshape(z, x.shape)


def _outer(xp, g, ans, x1, x2):
    return g @ x2, _T(xp, g) @ x1


def _cross(xp, g, ans, x1, x2, *, axis=-1):
    return xp.linalg.cross(x2, g, axis=axis), xp.linalg.cross(g, x1, axis=axis)


def _vector_norm(xp, g, ans, x, *, axis=None, keepdims=False, ord=2):
    """Gradient of the p-norm; zero where the norm is 0 (not NaN)."""
    axes = axes_of(axis, x.ndim)
    ge = expand(xp, g, x.shape, axis, keepdims)
    n = xp.reshape(ans, keep_shape(x.shape, axes))
    zero = xp.zeros_like(x)
    if ord == 0:
        return zero
    if ord in (float("inf"), -float("inf")):
        hit = xp.abs(x) == n
        count = xp.sum(xp.astype(hit, x.dtype), axis=axes, keepdims=True)
        return xp.where(hit, ge * xp.sign(x) / count, zero)
    if ord == 1:
        return ge * xp.sign(x)
    safe = xp.where(n == 0, xp.ones_like(n), n)
    if ord == 2:
        return xp.where(n == 0, zero, ge * x / safe)
    scale = (xp.abs(x) / safe) ** (ord - 1)
    return xp.where(n == 0, zero, ge * xp.sign(x) * scale)


def _matrix_norm_public(f, rec):
    def matrix_norm(x, /, *, keepdims=False, ord="fro"):
        if ord != "fro" and getattr(x, "requires_grad", False):
            raise NotImplementedError(
                f"linalg.matrix_norm: no VJP rule for ord={ord!r} yet (only 'fro')"
            )
        return f(x, keepdims=keepdims, ord=ord)

    return matrix_norm


def _matrix_norm(xp, g, ans, x, *, keepdims=False, ord="fro"):
    n = ans if keepdims else ans[..., None, None]
    ge = g if keepdims else g[..., None, None]
    safe = xp.where(n == 0, xp.ones_like(n), n)
    return xp.where(n == 0, xp.zeros_like(x), ge * x / safe)


def _matrix_power(xp, g, ans, x, n):
    """sum_k (A^T)^k g (A^T)^(n-1-k), with A = x (n > 0) or inv(x) (n < 0)."""
    if n == 0:
        return xp.zeros_like(g)
    a = x if n > 0 else xp.linalg.inv(x)
    m = abs(n)
    at = _T(xp, a)
    powers = [None] * m
    powers[0] = xp.broadcast_to(_eye_like(xp, a), a.shape)
    for k in range(1, m):
        powers[k] = powers[k - 1] @ at
    ga = sum(powers[k] @ g @ powers[m - 1 - k] for k in range(m))
    if n > 0:
        return ga
    return -(at @ ga @ at)


def _eigh(xp, gs, ans, x):
    """A = V diag(w) V^T: dA = V (diag(dw) + F * (V^T dV)) V^T, F_ij = 1/(w_j - w_i)."""
    gw, gv = gs
    w, v = ans
    vt = _T(xp, v)
    diff = w[..., None, :] - w[..., :, None]
    eye = xp.broadcast_to(_eye_like(xp, v), diff.shape)
    f = xp.where(eye == 1, xp.zeros_like(diff), 1 / xp.where(eye == 1, xp.ones_like(diff), diff))
    inner = eye * gw[..., None, :] + f * (vt @ gv)
    ga = v @ inner @ vt
    return ((ga + _T(xp, ga)) / 2,)


def _eigvalsh(xp, g, ans, x):
    w, v = xp.linalg.eigh(x)
    ga = (v * g[..., None, :]) @ _T(xp, v)
    return (ga + _T(xp, ga)) / 2


def _svdvals(xp, g, ans, x):
    u, s, vh = xp.linalg.svd(x, full_matrices=False)
    return (u * g[..., None, :]) @ vh


defop("linalg.inv", _inv, chapter=CH, saves=(), saves_ans=True)
defop("linalg.det", _det, chapter=CH, saves_ans=True)
defop("linalg.slogdet", vjp=_slogdet, chapter=CH)
defop("linalg.solve", vjp=_solve, chapter=CH, saves=(0,), saves_ans=True)
defop("linalg.cholesky", _cholesky, chapter=CH, saves=(), saves_ans=True)
defop("linalg.trace", _trace, chapter=CH, saves=())
defop("linalg.diagonal", _diagonal, chapter=CH, saves=(), view=True)
defop("linalg.outer", vjp=_outer, chapter=CH)
defop("linalg.cross", vjp=_cross, chapter=CH)
defop("linalg.vector_norm", _vector_norm, chapter=CH, saves_ans=True, twice=False)
defop("linalg.matrix_norm", _matrix_norm, chapter=CH, saves_ans=True, public=_matrix_norm_public)
defop("linalg.matrix_power", _matrix_power, chapter=CH)
defop("linalg.eigh", vjp=_eigh, chapter=CH, saves=(), saves_ans=True, twice=False)
defop("linalg.eigvalsh", _eigvalsh, chapter=CH, twice=False)
defop("linalg.svdvals", _svdvals, chapter=CH, twice=False)
nondiff(CH, "linalg.matrix_rank")
missing(CH, "linalg.eig", "linalg.eigvals", "linalg.pinv", "linalg.qr", "linalg.svd")
