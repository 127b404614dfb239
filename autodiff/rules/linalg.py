"""The ``linalg`` extension: a VJP rule for every function of the standard's extension
but ``matrix_rank`` (integer valued), first and second order, batched, real and complex.

Conventions (see ``autodiff/registry.py``): a rule is the transpose of the op's
derivative (JAX's convention), so the rules of holomorphic functions (``inv``, ``det``,
``solve``, ``matrix_power``) have plain transposes and no conjugates. The rules of the
decompositions and norms, which are not holomorphic, are written in PyTorch's (adjoint)
convention, ``adj(g)`` with ``^H``, and registered as ``conj(adj(conj(g)))``: see
:func:`_from_adjoint`. Their formulas follow PyTorch's ``FunctionsManual.cpp``
(``svd_backward``, ``linalg_eig_backward``, ``linalg_qr_backward``, ``cholesky_backward``,
``pinv_backward``), so the gradients a user sees equal ``torch.autograd``'s, except where a
docstring below says otherwise (``det`` at a singular matrix, the completed columns of
``qr(mode="complete")`` and ``svd(full_matrices=True)``).

Where a derivative doesn't exist (repeated singular values or eigenvalues for a loss that
reads the vectors, a zero singular value where the rule divides by it), a rule gives
``inf``/``nan`` entries, as PyTorch does, and never raises; a cotangent that is exactly zero
(an output the loss doesn't read) contributes exactly zero there, so a loss that reads
only the values of a decomposition has a finite gradient at repeated values. (One
exception: the recorded rules of ``det`` and ``slogdet``, under ``create_graph=True``,
invert A, so a second-order backward at an exactly singular A fails as ``inv`` does.)
"""

from __future__ import annotations

from ..backends import device_of
from ..engine.registry import defop
from ._util import axes_of, conj, expand, is_complex, keep_shape, nondiff, reduction_jvp
from .batch_rules import axis, leading

CH = "linalg"
INF = float("inf")


# -- helpers ----------------------------------------------------------------------
def _T(xp, a):
    return xp.matrix_transpose(a)


def _H(xp, a):
    """The conjugate transpose (the transpose of a real array)."""
    return conj(xp, xp.matrix_transpose(a))


def _eye_like(xp, a):
    n = a.shape[-1]
    return xp.eye(n, dtype=a.dtype, device=device_of(a))


def _re(xp, a):
    return xp.real(a) if is_complex(xp, a) else a


def _diag_embed(xp, v):
    """(..., k) -> (..., k, k) with ``v`` on the diagonal."""
    return _eye_like(xp, v) * v[..., None, :]


def _offdiag(xp, s):
    """Boolean (k, k) mask of the off-diagonal positions, for the last axis of ``s``."""
    return xp.eye(s.shape[-1], dtype=s.dtype, device=device_of(s)) == 0


def _off(xp, s, a):
    """``a`` with its diagonal set to zero (a (k, k) mask built from ``s``'s last axis)."""
    return xp.where(_offdiag(xp, s), a, xp.zeros_like(a))


def _ratio(xp, num, den):
    """``num / den``, where a zero ``num`` gives 0 even where ``den`` is 0 (a cotangent
    that is exactly zero: an output the loss doesn't read), and a nonzero ``num`` over a
    zero ``den`` gives inf (no derivative there); no division by zero is evaluated."""
    zero = den == 0
    q = num / xp.where(zero, xp.ones_like(den), den)
    bad = zero & (num != 0)
    return xp.where(bad, xp.full_like(q, INF), q)


def _inverse(xp, x):
    """``x^-1`` by an LU inverse (what the recorded rules differentiate)."""
    return xp.linalg.inv(x)


# -- holomorphic functions: plain transposes ----------------------------------------
def _inv(xp, g, ans, x):
    t = _T(xp, ans)
    return -(t @ g @ t)


def _adjugate_T(xp, x):
    """``adj(x)^T`` without inverting: with ``x = U S Vh``,
    ``adj(x) = det(U) det(Vh) Vh^H diag(prod_{j != i} s_j) U^H``, the products of the other
    singular values taken exactly (with their zeros), so it is exact at singular x."""
    u, s, vh = xp.linalg.svd(x, full_matrices=False)
    ones = xp.ones_like(s)[..., None, :]
    others = xp.prod(xp.where(_offdiag(xp, s), s[..., None, :], ones), axis=-1)
    c = xp.linalg.det(u) * xp.linalg.det(vh)
    return c[..., None, None] * ((conj(xp, u) * others[..., None, :]) @ conj(xp, vh))


def _det(xp, g, ans, x):
    """d det = tr(adj(A) dA): the rule is ``g adj(A)^T``, finite at singular matrices
    (at [[1, 2], [2, 4]] it is [[4, -2], [-2, 1]]; PyTorch gives zeros there).

    A plain backward computes the adjugate from an SVD (no inverse, so no LinAlgError).
    Under ``create_graph=True`` the rule is recorded as ``g det(A) A^-T``, which
    differentiates at every invertible A (an SVD's derivative is not defined at repeated
    singular values, e.g. at the identity); so at an exactly singular A a second-order
    backward fails in ``inv`` as the backend does (LinAlgError on NumPy)."""
    if xp.records:
        return (g * ans)[..., None, None] * _T(xp, _inverse(xp, x))
    return g[..., None, None] * _adjugate_T(xp, x)


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


def _trace(xp, g, ans, x, *, offset=0, dtype=None):
    eye = xp.eye(x.shape[-2], x.shape[-1], k=offset, dtype=g.dtype, device=device_of(g))
    return g[..., None, None] * eye


def _diagonal(xp, g, ans, x, *, offset=0):
    n, m = x.shape[-2], x.shape[-1]
    pos = xp.linalg.diagonal(
        xp.reshape(xp.arange(n * m, device=device_of(g)), (n, m)), offset=offset
    )
    z = xp.zeros(x.shape[:-2] + (n * m,), dtype=g.dtype, device=device_of(g))
    z = xp.index_add(z, pos, g, axis=-1)
    return xp.reshape(z, x.shape)


def _outer(xp, g, ans, x1, x2):
    return g @ x2, _T(xp, g) @ x1


def _cross(xp, g, ans, x1, x2, *, axis=-1):
    return xp.linalg.cross(x2, g, axis=axis), xp.linalg.cross(g, x1, axis=axis)


# -- the others: PyTorch's adjoint formulas, conjugated at both ends ---------------------
def _from_adjoint(xp, adjoint, *cotangents):
    """The rule (a transpose) from an adjoint ``adjoint(*g)`` written with ``^H``, as in
    PyTorch: ``conj(adjoint(conj(g)))`` (no-ops for real arrays)."""
    return conj(xp, adjoint(*(conj(xp, g) for g in cotangents)))


def _slogdet(xp, gs, ans, x):
    """logabsdet = Re log det A, sign = det A / |det A|; with t = tr(A^-1 dA):
    d logabsdet = Re t, d sign = i sign Im t. Adjoint: ``c A^-H`` with
    ``c = g_logabsdet - i Im(conj(g_sign) sign)`` (the sign term only for complex A:
    a real sign is piecewise constant).

    At a singular A (sign 0, logabsdet -inf) the gradient of logabsdet is infinite: the
    plain backward takes A^-H = U S^-1 Vh from an SVD (never a LinAlgError) and gives inf
    in every entry (a loss that doesn't read logabsdet gets its finite gradient).
    Under ``create_graph=True`` the rule is recorded with ``inv`` (differentiable at
    every invertible A), which fails at a singular A as ``inv`` does."""
    sign = ans[0]
    complex_ = is_complex(xp, x)

    def adjoint(g_sign, g_logabs):
        c = g_logabs
        if complex_:
            z = conj(xp, g_sign) * sign
            c = g_logabs - (z - conj(xp, z)) / 2  # g_logabs - i Im(z)
        c = c[..., None, None]
        if xp.records:
            return c * _H(xp, _inverse(xp, x))
        u, s, vh = xp.linalg.svd(x, full_matrices=False)
        ga = c * (_ratio(xp, u, s[..., None, :]) @ vh)
        # singular as the forward found it (sign 0, logabsdet -inf): inf, not the huge
        # finite 1/s of a rounded zero singular value (unless logabsdet isn't read)
        bad = (sign == 0)[..., None, None] & (c != 0)
        return xp.where(bad, xp.full_like(ga, INF), ga)

    return (_from_adjoint(xp, adjoint, *gs),)


def _cholesky(xp, g, ans, x, *, upper=False):
    """A = L L^H (upper: A = U^H U, L = U^H). PyTorch's adjoint:
    ``L^-H Phi(L^H gL) L^-1``, Phi(X) = (tril(X) + tril(X, -1)^H) / 2 (half diagonal),
    a Hermitian gradient for real inputs (complex: the Hermitian part is the gradient
    along Hermitian directions; the input is read as Hermitian)."""

    def adjoint(gl):
        L = _H(xp, ans) if upper else ans
        if upper:
            gl = _H(xp, gl)
        # L's upper triangle is a constant 0: its cotangent is not read (it may be NaN,
        # e.g. from atan2(L * 0, L), which has no derivative at (0, 0)), as in PyTorch
        gl = xp.tril(gl)
        P = xp.tril(_H(xp, L) @ gl)
        P = (P + _H(xp, xp.tril(P, k=-1))) / 2
        Linv = xp.linalg.solve(L, xp.broadcast_to(_eye_like(xp, L), L.shape))
        return _H(xp, Linv) @ P @ Linv

    return _from_adjoint(xp, adjoint, g)


def _complete(xp, q, gq, k):
    """The first ``k`` columns of a unitary ``q`` and their effective cotangent, where
    the others (``q2``: an arbitrary orthonormal completion, as ``qr(mode="complete")``
    and ``svd(full_matrices=True)`` give) are determined by them up to ``q2 -> q2 W``:
    for a loss invariant under that (``q2 q2^H``, or none of ``q2``),
    ``dq2 = -q1 dq1^H q2 + q2 (skew)``, so ``gq1 += -q2 gq2^H q1`` (adjoint convention)."""
    q1, q2 = q[..., :, :k], q[..., :, k:]
    g1, g2 = gq[..., :, :k], gq[..., :, k:]
    return q1, g1 - q2 @ (_H(xp, g2) @ q1)


def _svd_adjoint(xp, gu, gs, gvh, u, s, vh):
    """PyTorch's svd_backward for ``A = U diag(s) Vh`` (U: m x k, Vh: k x n):
    ``gA = U [skew(U^H gU) S + S skew(Vh gV)] / E  V^H + U diag(gs + diag(skew(U^H gU))/2s) Vh``
    (E_jk = s_k^2 - s_j^2, off the diagonal), plus ``(I - U U^H) gU S^-1 Vh`` (m > k) or
    ``U S^-1 gVh (I - V V^H)`` (n > k)."""
    m, n, k = u.shape[-2], vh.shape[-1], s.shape[-1]
    uh = _H(xp, u)
    uhgu = uh @ gu
    uhgu = uhgu - _H(xp, uhgu)
    vhgv = vh @ _H(xp, gvh)
    vhgv = vhgv - _H(xp, vhgv)
    s_row, s_col = s[..., None, :], s[..., :, None]
    s2 = s * s
    num = uhgu * s_row + s_col * vhgv
    inner = _off(xp, s, _ratio(xp, num, s2[..., None, :] - s2[..., :, None]))
    d = gs
    if is_complex(xp, u):  # the phase of U's columns: U -> U D, V -> V D (|D| = 1)
        d = d + _ratio(xp, xp.linalg.diagonal(uhgu), 2 * s)
    inner = inner + _diag_embed(xp, d)
    if m > k:
        gus = _ratio(xp, gu, s_row)
        return (u @ inner + gus - u @ (uh @ gus)) @ vh
    if n > k:
        sgvh = _ratio(xp, gvh, s_col)
        return u @ (inner @ vh + sgvh - (sgvh @ _H(xp, vh)) @ vh)
    if m >= n:
        return u @ (inner @ vh)
    return (u @ inner) @ vh


def _svd(xp, gs, ans, x, *, full_matrices=True):
    """SVD ``A = U diag(S) Vh`` (PyTorch's svd_backward).

    - Gauge: U and V are determined up to ``U -> U D, V -> V D`` (D diagonal, |D| = 1:
      signs for real A, phases for complex A). The rule is right for losses invariant
      under it (``abs(U)``, ``U @ Vh``, ``U[:, i] * conj(V[:, i])``...); for others the
      gradient is not defined (PyTorch raises for complex A, we don't check).
    - Repeated singular values: the gradient of a loss that reads U or Vh is not defined
      there (inf/nan entries, as PyTorch documents: it is ill-conditioned near them);
      a loss of S alone stays finite (``U diag(gS) Vh``).
    - A zero singular value with m != n: the gradient of U (m > n) or Vh (m < n) divides
      by it (inf entries where the cotangent is not zero).
    - ``full_matrices=True`` with m != n: the columns of U (rows of Vh) past min(m, n)
      are an arbitrary orthonormal completion; the rule is right for losses invariant
      under ``U2 -> U2 W`` (W unitary: ``U2 @ U2^H``, or no use of them), where
      ``U2 U2^H = I - U1 U1^H`` depends on A through U1. PyTorch drops the cotangent of
      the completion instead (right only for losses that don't read it)."""
    u, s, vh = ans
    k = s.shape[-1]

    def adjoint(gu, g_s, gvh):
        uu, vv = u, vh
        if full_matrices and u.shape[-1] > k:
            uu, gu = _complete(xp, u, gu, k)
        if full_matrices and vh.shape[-2] > k:
            v1, gv1 = _complete(xp, _H(xp, vh), _H(xp, gvh), k)
            vv, gvh = _H(xp, v1), _H(xp, gv1)
        return _svd_adjoint(xp, gu, g_s, gvh, uu, s, vv)

    return (_from_adjoint(xp, adjoint, *gs),)


def _svdvals(xp, g, ans, x):
    """d s = Re diag(U^H dA V): adjoint ``U diag(g) Vh`` (an SVD in the rule, itself
    differentiable under ``create_graph``: second order at distinct singular values)."""
    u, s, vh = xp.linalg.svd(x, full_matrices=False)
    return _from_adjoint(xp, lambda gs: (u * gs[..., None, :]) @ vh, g)


def _qr_tall(xp, gq, gr, q, r):
    """PyTorch's adjoint of ``A = Q R`` (m >= n, Q: m x n, R: n x n upper, real diagonal):
    ``gA = (gQ + Q copyltu(M)) R^-H``, ``M = R gR^H - gQ^H Q``,
    ``copyltu(M) = tril(M, -1) + tril(M, -1)^H + Re diag(M)``."""
    gr = xp.triu(gr)  # R's lower triangle is a constant 0: its cotangent is not read
    M = r @ _H(xp, gr) - _H(xp, gq) @ q
    low = xp.tril(M, k=-1)
    B = low + _H(xp, low) + _diag_embed(xp, _re(xp, xp.linalg.diagonal(M)))
    X = gq + q @ B
    return _H(xp, xp.linalg.solve(r, _H(xp, X)))  # X R^-H


def _qr(xp, gs, ans, x, *, mode="reduced"):
    """QR ``A = Q R`` with R's diagonal real (LAPACK's Householder sign convention, which
    is locally constant: Q and R are then smooth functions of A where A has full rank).

    - m >= n (and any mode for m = n): the tall formula above (R must be invertible).
    - m < n: ``A = [A1 A2]``, ``Q R1 = A1``, ``R2 = Q^H A2``: ``gA2 = Q gR2`` and ``gA1``
      is the square formula with ``gQ + A2 gR2^H`` (A1 must have full rank).
    - ``mode="complete"`` with m > n: the columns of Q past n are an arbitrary orthonormal
      completion of the first n. PyTorch refuses this backward; here the rule is right
      for losses invariant under ``Q2 -> Q2 W`` (W unitary: ``Q2 @ Q2^H = I - Q1 Q1^H``,
      or no use of Q2), as for ``svd(full_matrices=True)``. The zero rows of R are
      constant (their cotangent is dropped)."""
    q, r = ans
    m, n = x.shape[-2], x.shape[-1]

    def adjoint(gq, gr):
        if m >= n:
            qq, rr = q, r
            if q.shape[-1] > n:  # complete, m > n
                qq, gq = _complete(xp, q, gq, n)
                rr, gr = r[..., :n, :], gr[..., :n, :]
            return _qr_tall(xp, gq, gr, qq, rr)
        gr1, gr2 = gr[..., :, :m], gr[..., :, m:]
        ga1 = _qr_tall(xp, gq + x[..., :, m:] @ _H(xp, gr2), gr1, q, r[..., :, :m])
        return xp.concat([ga1, q @ gr2], axis=-1)

    return (_from_adjoint(xp, adjoint, *gs),)


def _eig_adjoint(xp, gw, gv, w, v):
    """PyTorch's linalg_eig_backward for ``A = V diag(w) V^-1``, V's columns of unit norm:
    ``gA = V^-H (diag(gw) + off[(V^H gV - V^H V diag(Re diag(V^H gV))) / conj(E)]) V^H``,
    E_ij = w_j - w_i."""
    vh = _H(xp, v)
    inner = _diag_embed(xp, gw)
    if gv is not None:
        vhgv = vh @ gv
        vhgv = vhgv - vh @ (v * _re(xp, xp.linalg.diagonal(vhgv))[..., None, :])
        wc = conj(xp, w)
        inner = inner + _off(xp, w, _ratio(xp, vhgv, wc[..., None, :] - wc[..., :, None]))
    return xp.linalg.solve(vh, inner @ vh)


def _eig(xp, gs, ans, x):
    """Eigen-decomposition of a general matrix (complex outputs, unit-norm eigenvectors).

    The eigenvectors are determined up to a phase each (V -> V D, |D| = 1): the rule is
    right for losses invariant under it (``abs(V)``, ``V[:, j] / V[0, j]``...), as
    PyTorch's (which raises where it sees the loss depends on the phase; we don't check).
    At repeated eigenvalues a loss that reads V has no gradient (inf/nan entries); V must
    be invertible (the rule solves with V^H). A real input gets the real part."""
    w, v = ans
    return (_from_adjoint(xp, lambda gw, gv: _eig_adjoint(xp, gw, gv, w, v), *gs),)


def _eigvals(xp, g, ans, x):
    """``V^-H diag(g) V^H`` (adjoint), with the eigenvectors computed in the rule."""
    w, v = xp.linalg.eig(x)
    return _from_adjoint(xp, lambda gw: _eig_adjoint(xp, gw, None, w, v), g)


def _eigh_adjoint(xp, gw, gv, w, v):
    """``A = V diag(w) V^H``: ``gA = V (diag(gw) + off[skew(V^H gV) / 2E]) V^H``, E_ij =
    w_j - w_i (a Hermitian gradient: the input is read as Hermitian)."""
    vh = _H(xp, v)
    inner = _diag_embed(xp, gw)
    if gv is not None:
        X = vh @ gv
        X = (X - _H(xp, X)) / 2
        inner = inner + _off(xp, w, _ratio(xp, X, w[..., None, :] - w[..., :, None]))
    if inner.dtype != v.dtype:  # real eigenvalues' cotangent, complex V (torch's matmul
        inner = xp.astype(inner, v.dtype)  # doesn't promote)
    return v @ inner @ vh


def _eigh(xp, gs, ans, x):
    """Eigen-decomposition of a Hermitian (real symmetric) matrix. Eigenvectors are
    determined up to a sign (real) or phase (complex) each: the rule is right for losses
    invariant under it; at repeated eigenvalues a loss that reads V has no gradient
    (inf/nan entries), a loss of the eigenvalues alone stays finite."""
    w, v = ans
    return (_from_adjoint(xp, lambda gw, gv: _eigh_adjoint(xp, gw, gv, w, v), *gs),)


def _eigvalsh(xp, g, ans, x):
    w, v = xp.linalg.eigh(x)
    return _from_adjoint(xp, lambda gw: _eigh_adjoint(xp, gw, None, w, v), g)


def _pinv(xp, g, ans, x, *, rtol=None):
    """Golub & Pereyra: ``dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P``
    (P = pinv(A)), PyTorch's pinv_backward as its adjoint. Exact where the rank is
    locally constant: at full rank, or where the singular values that ``rtol`` cuts are
    exactly zero; ``rtol`` (a cut-off, piecewise constant) gets no gradient. NumPy's
    default cut (``rtol=None``: rounding level) is treated as exact zeros; a given
    ``rtol``, which may cut nonzero singular values, takes ``_pinv_cut``."""
    if rtol is not None:
        return _pinv_cut(xp, g, x, rtol)
    m, n = x.shape[-2], x.shape[-1]

    def adjoint(G):
        P, A = ans, x
        Ph, Gh = _H(xp, P), _H(xp, G)
        if m <= n:
            K = Gh @ P
            KPh = K @ Ph
            return -_H(xp, P @ K) + KPh - (A @ P) @ KPh + (Ph @ P) @ (Gh - K @ A)
        K = P @ Gh
        PhK = Ph @ K
        return -_H(xp, K @ P) + (Gh - A @ K) @ P @ Ph + PhK - (PhK @ P) @ A

    return _from_adjoint(xp, adjoint, g)


def _pinv_cut(xp, g, x, rtol):
    """The derivative of the truncated pseudo-inverse ``P = V W U^H`` (``A = U S V^H``,
    ``w = 1/s`` where ``s > rtol max(s)``, else 0), through the SVD's rule:
    ``gU = G^H V W``, ``gVh = W U^H G^H``, ``gs = -w^2 Re diag(V^H G U)``. Golub-Pereyra
    differentiates ``pinv(A)``, not the truncation: it is off where a cut singular value
    is not zero (the kept and cut singular vectors turn into each other)."""
    u, s, vh = xp.linalg.svd(x, full_matrices=False)
    cut = rtol * xp.max(s, axis=-1, keepdims=True)
    if hasattr(rtol, "ndim"):  # an array: one cut-off per matrix of the batch
        cut = rtol[..., None] * xp.max(s, axis=-1, keepdims=True)
    keep = s > cut
    w = xp.where(keep, 1 / xp.where(keep, s, xp.ones_like(s)), xp.zeros_like(s))

    def adjoint(G):
        v, gh = _H(xp, vh), _H(xp, G)
        gu = (gh @ v) * w[..., None, :]
        gvh = w[..., :, None] * (_H(xp, u) @ gh)
        gs = -(w * w) * _re(xp, xp.linalg.diagonal(_H(xp, v) @ (G @ u)))
        return _svd_adjoint(xp, gu, gs, gvh, u, s, vh)

    return _from_adjoint(xp, adjoint, g)


# -- JVP rules: ``jvp(xp, ts, ans, *args)``, the derivative applied to the tangents -------
# (holomorphic functions: the real formulas; the others take real parts where the output
# is real). ``eig``, ``eigvals``, ``svd``, ``qr`` and ``pinv`` fall back to their VJP rules.
def _inv_jvp(xp, ts, ans, x):
    """d(A^-1) = -A^-1 dA A^-1."""
    return -(ans @ ts[0] @ ans)


def _det_jvp(xp, ts, ans, x):
    """d det = tr(adj(A) dA), with the rule's adjugate (exact at singular matrices; under
    recording, ``det(A) A^-T``)."""
    if xp.records:
        adj_t = ans[..., None, None] * _T(xp, _inverse(xp, x))
    else:
        adj_t = _adjugate_T(xp, x)
    return xp.sum(adj_t * ts[0], axis=(-2, -1))


def _slogdet_jvp(xp, ts, ans, x):
    """With t = tr(A^-1 dA): d logabsdet = Re t, d sign = i sign Im t (0 for real A). The
    plain pass takes A^-1 = V S^-1 U^H from an SVD (no LinAlgError at a singular A)."""
    sign = ans[0]
    if xp.records:
        ainv = _inverse(xp, x)
    else:
        u, s, vh = xp.linalg.svd(x, full_matrices=False)
        ainv = _H(xp, vh) @ _ratio(xp, _H(xp, u), s[..., :, None])
    t = xp.sum(_T(xp, ainv) * ts[0], axis=(-2, -1))
    if not is_complex(xp, x):
        return None, t
    return sign * (t - xp.real(t)), xp.real(t)  # i Im(t) = t - Re(t)


def _solve_jvp(xp, ts, ans, x1, x2):
    """X = A^-1 B: dX = A^-1 (dB - dA X) (a 1-D B is a vector)."""
    ta, tb = ts
    vector = x2.ndim == 1
    X = xp.expand_dims(ans, axis=-1) if vector else ans
    rhs = None if tb is None else (xp.expand_dims(tb, axis=-1) if vector else tb)
    if ta is not None:
        d = -(ta @ X)
        rhs = d if rhs is None else rhs + d
    r = xp.linalg.solve(x1, rhs)
    return r[..., 0] if vector else r


def _cholesky_jvp(xp, ts, ans, x, *, upper=False):
    """A = L L^H: dL = L Phi(L^-1 dA L^-H), Phi the lower triangle with half the diagonal
    (upper: dU = dL^H)."""
    L = _H(xp, ans) if upper else ans
    Linv = xp.linalg.solve(L, xp.broadcast_to(_eye_like(xp, L), L.shape))
    X = Linv @ ts[0] @ _H(xp, Linv)
    P = xp.tril(X) - _diag_embed(xp, xp.linalg.diagonal(X)) / 2
    dL = L @ P
    return _H(xp, dL) if upper else dL


def _matrix_power_jvp(xp, ts, ans, x, n):
    """sum_k A^k dA A^(n-1-k), with A = x (n > 0) or inv(x) and dA = -A dx A (n < 0)."""
    if n == 0:
        return None
    t = ts[0]
    a = x if n > 0 else xp.linalg.inv(x)
    if n < 0:
        t = -(a @ t @ a)
    m = abs(n)
    powers = [xp.broadcast_to(_eye_like(xp, a), a.shape)]
    for _ in range(1, m):
        powers.append(powers[-1] @ a)
    return sum(powers[k] @ t @ powers[m - 1 - k] for k in range(m))


def _eigh_tangents(xp, t, w, v, vectors=True):
    """A = V diag(w) V^H, X = V^H dA V: dw = Re diag(X), dV = V (X / E) off the diagonal,
    E_ij = w_j - w_i (the gauge that keeps diag(V^H dV) zero)."""
    vh = _H(xp, v)
    X = vh @ t @ v
    dw = _re(xp, xp.linalg.diagonal(X))
    if not vectors:
        return dw
    dv = v @ _off(xp, w, _ratio(xp, X, w[..., None, :] - w[..., :, None]))
    return dw, dv


def _eigh_jvp(xp, ts, ans, x):
    w, v = ans
    return _eigh_tangents(xp, ts[0], w, v)


def _eigvalsh_jvp(xp, ts, ans, x):
    w, v = xp.linalg.eigh(x)
    return _eigh_tangents(xp, ts[0], w, v, vectors=False)


def _svdvals_jvp(xp, ts, ans, x):
    """d s = Re diag(U^H dA V)."""
    u, s, vh = xp.linalg.svd(x, full_matrices=False)
    return _re(xp, xp.linalg.diagonal(_H(xp, u) @ ts[0] @ _H(xp, vh)))


def _matrix_norm_jvp(xp, ts, ans, x, *, keepdims=False, ord="fro"):
    """A reduction over the last two axes: ``sum(Re(rule(1) * t))`` there."""
    d = _matrix_norm(xp, xp.ones_like(ans), ans, x, keepdims=keepdims, ord=ord) * ts[0]
    return xp.sum(_re(xp, d), axis=(-2, -1), keepdims=keepdims)


# -- norms ---------------------------------------------------------------------------
def _vector_norm(xp, g, ans, x, *, axis=None, keepdims=False, ord=2):
    """Gradient of the p-norm of ``|x|`` (complex x: ``conj(sign x)`` times the real one).

    ord 2, p: ``sign(x) (|x| / norm)^(p-1)``; 1: ``sign(x)``; inf / -inf: ``sign(x)`` at
    the entries whose |x| is the max / min, split evenly among ties (as PyTorch);
    0 (a count): zero. Zero where the norm is 0 (not NaN) and, for p < 1, at x = 0
    (``abs'(0) = 0``, as PyTorch)."""
    axes = axes_of(axis, x.ndim)
    ge = expand(xp, g, x.shape, axis, keepdims)
    if ord == 0:
        return xp.zeros_like(x)
    sgn = conj(xp, xp.sign(x))
    ax = xp.abs(x)
    zero = xp.zeros_like(ax)
    if ord in (INF, -INF):
        pick = xp.max if ord == INF else xp.min
        hit = ax == pick(ax, axis=axes, keepdims=True)
        count = xp.sum(xp.astype(hit, ax.dtype), axis=axes, keepdims=True)
        return sgn * xp.where(hit, ge / count, zero)
    if ord == 1:
        return sgn * ge
    n = xp.reshape(ans, keep_shape(x.shape, axes))
    nz = n == 0
    safe_n = xp.where(nz, xp.ones_like(n), n)
    if ord == 2:
        return xp.where(nz, xp.zeros_like(x), conj(xp, x) * (ge / safe_n))
    ax0 = (ax == 0) | nz
    scale = (xp.where(ax0, xp.ones_like(ax), ax) / safe_n) ** (ord - 1)
    return sgn * xp.where(ax0, zero, ge * scale)


def _matrix_norm(xp, g, ans, x, *, keepdims=False, ord="fro"):
    """Every ``ord`` of the standard (complex x: the gradient of the norm of |x|'s kind):

    - 'fro': ``x / norm`` (conjugated), zero where the norm is 0;
    - 'nuc': ``U Vh`` (the polar factor; not defined where a singular value is 0);
    - 2 / -2: ``u_i v_i^H`` of the largest / smallest singular value, split evenly among
      exactly equal ones (as PyTorch, whose norm is an amax of the singular values;
      the sum over a tie is gauge invariant);
    - 1 / -1 (max / min column sum of |x|), inf / -inf (rows): ``sign(x)`` in the
      column (row) that attains it, split evenly among tied columns (rows), as PyTorch.
    SVD-based ords compute an SVD in the rule (differentiable under ``create_graph``)."""
    ge = g if keepdims else g[..., None, None]
    if ord == "fro":
        n = ans if keepdims else ans[..., None, None]
        nz = n == 0
        safe = xp.where(nz, xp.ones_like(n), n)
        return xp.where(nz, xp.zeros_like(x), conj(xp, x) * (ge / safe))
    if ord in ("nuc", 2, -2):
        u, s, vh = xp.linalg.svd(x, full_matrices=False)
        if ord == "nuc":
            w = xp.ones_like(s)
        else:
            pick = xp.max if ord == 2 else xp.min
            hit = s == pick(s, axis=-1, keepdims=True)
            w = xp.astype(hit, s.dtype)
            w = w / xp.sum(w, axis=-1, keepdims=True)
        return conj(xp, (u * (w * ge[..., 0])[..., None, :]) @ vh)
    if ord in (1, -1, INF, -INF):
        along = -2 if ord in (1, -1) else -1  # sum down the columns (1) or along rows (inf)
        sums = xp.sum(xp.abs(x), axis=along, keepdims=True)
        pick = xp.max if ord in (1, INF) else xp.min
        hit = sums == pick(sums, axis=-1 if along == -2 else -2, keepdims=True)
        w = xp.astype(hit, sums.dtype)
        w = w / xp.sum(w, axis=(-2, -1), keepdims=True)
        return conj(xp, xp.sign(x)) * (w * ge)
    raise ValueError(f"linalg.matrix_norm: no rule for ord={ord!r}")


# -- batching rules (vmap): the batch axis first in each batched argument -----------------------
def _outer_batch(c, x1, x2):
    """Each example's vectors: a column times a row (broadcast), whichever is batched."""
    xp = c.xp
    return xp.multiply(xp.expand_dims(x1, axis=-1), xp.expand_dims(x2, axis=-2))


def _solve_batch(c, a, b):
    """solve of each example; a 1-D ``b`` is one vector per example (the standard's rule
    for a 1-D ``x2``), so it becomes a column."""
    xp, n = c.xp, c.n
    ba, bb = c.bd
    ra, rb = c.rank(0, a), c.rank(1, b)
    if rb == 1:
        if not bb:
            return c.f(a, b)
        if not ba and ra == 2:  # one solve, the examples as the columns of the right side
            return xp.matrix_transpose(c.f(a, xp.matrix_transpose(b)))
        col = xp.reshape(b, (n,) + (1,) * (ra - 2) + (b.shape[-1], 1))
        return xp.squeeze(c.f(a, col), axis=-1)
    if ba and bb:
        r = max(ra, rb)
        return c.f(c.pad(a, r), c.pad(b, r))
    if ba:
        return c.f(c.pad(a, rb) if rb > ra else a, b)
    return c.f(a, c.pad(b, ra) if ra > rb else b)


def _cross_batch(c, x1, x2, *, axis=-1):
    """Element-wise but along one axis (as ``vecdot``): each operand's examples aligned to
    the larger rank, the axis counted from the end."""
    r = max(c.rank(0, x1), c.rank(1, x2))
    x1, x2 = (c.pad(a, r) if b else a for a, b in zip((x1, x2), c.bd))
    return c.f(x1, x2, axis=axis - r if axis >= 0 else axis)


# Ops on the trailing (matrix) axes batch over the leading ones (``batch=leading``).
_MATRICES = {"chapter": CH, "batch": leading}
defop("linalg.inv", _inv, saves=(), saves_ans=True, jvp=_inv_jvp, **_MATRICES)
defop("linalg.det", _det, saves_ans=True, jvp=_det_jvp, **_MATRICES)
defop("linalg.slogdet", vjp=_slogdet, saves_ans=True, jvp=_slogdet_jvp, **_MATRICES)
defop("linalg.solve", vjp=_solve, chapter=CH, saves=(0,), saves_ans=True, jvp=_solve_jvp,
      batch=_solve_batch)  # fmt: skip
defop("linalg.cholesky", _cholesky, saves=(), saves_ans=True, jvp=_cholesky_jvp, **_MATRICES)
defop("linalg.trace", _trace, saves=(), linear=True, **_MATRICES)
defop("linalg.diagonal", _diagonal, saves=(), view=True, linear=True, **_MATRICES)
defop("linalg.outer", vjp=_outer, chapter=CH, bilinear=True, batch=_outer_batch)
defop("linalg.cross", vjp=_cross, chapter=CH, bilinear=True, batch=_cross_batch)
defop("linalg.vector_norm", _vector_norm, chapter=CH, saves_ans=True,
      jvp=reduction_jvp(_vector_norm), batch=axis())  # fmt: skip
defop("linalg.matrix_norm", _matrix_norm, saves_ans=True, jvp=_matrix_norm_jvp, **_MATRICES)
defop("linalg.matrix_power", _matrix_power, jvp=_matrix_power_jvp, **_MATRICES)
defop("linalg.eigh", vjp=_eigh, saves=(), saves_ans=True, jvp=_eigh_jvp, **_MATRICES)
defop("linalg.eigvalsh", _eigvalsh, jvp=_eigvalsh_jvp, **_MATRICES)
defop("linalg.eig", vjp=_eig, saves=(), saves_ans=True, **_MATRICES)
defop("linalg.eigvals", _eigvals, **_MATRICES)
defop("linalg.svd", vjp=_svd, saves=(), saves_ans=True, **_MATRICES)
defop("linalg.svdvals", _svdvals, jvp=_svdvals_jvp, **_MATRICES)
defop("linalg.qr", vjp=_qr, saves_ans=True, **_MATRICES)
defop("linalg.pinv", _pinv, saves_ans=True, **_MATRICES)
nondiff(CH, "linalg.matrix_rank", batch=leading)
