"""Specs of the ``linalg`` extension.

Losses of decompositions read only what the decomposition determines: singular and
eigenvectors up to a sign or phase each (``abs(U)``, ``U @ Vh``, ``V / V[0]``), the
completed columns of ``qr(mode="complete")`` / ``svd(full_matrices=True)`` through their
projector ``Q2 @ Q2^H``. Inputs of the eigen-decompositions of Hermitian matrices and of
``cholesky`` are hermitized in the call (``(a + a^H) / 2``), so that a complex run (where
every real input gets an imaginary part) stays Hermitian. Samples whose inputs are complex
NumPy arrays test complex inputs in a real run too.
"""

from __future__ import annotations

import numpy as np

from .common import Sample, _away, _in, spec


# -- inputs -----------------------------------------------------------------------
def _c(rng, shape):
    return _in(rng, shape) + 1j * _in(rng, shape)


def _spd(rng, n, batch=(), complex_=False):
    a = _c(rng, batch + (n, n)) if complex_ else _in(rng, batch + (n, n))
    return a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)


def _well(rng, n, batch=(), complex_=False):
    a = _c(rng, batch + (n, n)) if complex_ else _in(rng, batch + (n, n))
    return a + 2.5 * np.eye(n)


def _sym_distinct(rng, n, batch=(), complex_=False):
    """Hermitian matrices with eigenvalues spread over [-2, 2]."""
    a = _c(rng, batch + (n, n)) if complex_ else _in(rng, batch + (n, n))
    q, _ = np.linalg.qr(a)
    return (q * np.linspace(-2.0, 2.0, n)) @ np.conj(np.swapaxes(q, -1, -2))


def _spread(rng, n, batch=(), complex_=False):
    """General matrices with well separated eigenvalues (near -2, 0, 2...)."""
    a = _c(rng, batch + (n, n)) if complex_ else _in(rng, batch + (n, n))
    return 0.5 * a + np.diag(np.linspace(-2.0, 2.0, n))


def _with_singular_values(rng, m, n, values, batch=(), complex_=False):
    """(m, n) matrices with the given singular values (random singular vectors)."""
    draw = _c if complex_ else _in
    u, _ = np.linalg.qr(draw(rng, batch + (m, m)))
    v, _ = np.linalg.qr(draw(rng, batch + (n, n)))
    s = np.zeros(batch + (m, n))
    k = min(m, n)
    s[..., range(k), range(k)] = values
    return u @ s @ np.conj(np.swapaxes(v, -1, -2))


# -- calls ------------------------------------------------------------------------
def _H(xp, a):
    return xp.conj(xp.matrix_transpose(a))


def _sym_call(f):
    """Eigen-decompositions and cholesky read one triangle: differentiate the
    hermitized input (a complex run adds an imaginary part to the samples)."""
    return lambda xp, a: f(xp, (a + _H(xp, a)) / 2)


def _proj(xp, q):
    """``q @ q^H``: what a loss may read of an orthonormal basis determined up to
    rotation (the completed columns of a complete QR or a full SVD)."""
    return q @ _H(xp, q)


def _svd_abs(xp, a, full_matrices=False):
    u, s, vh = xp.linalg.svd(a, full_matrices=full_matrices)
    return xp.abs(u), s, xp.abs(vh)


def _svd_polar(xp, a):
    u, s, vh = xp.linalg.svd(a, full_matrices=False)
    return u @ vh, s


def _svd_full_tall(xp, a):
    """Tall a, full U: the first columns up to sign, the completion by its projector."""
    u, s, vh = xp.linalg.svd(a, full_matrices=True)
    k = s.shape[-1]
    return xp.abs(u[..., :, :k]), s, xp.abs(vh), _proj(xp, u[..., :, k:])


def _svd_full_wide(xp, a):
    u, s, vh = xp.linalg.svd(a, full_matrices=True)
    k = s.shape[-1]
    return xp.abs(u), s, xp.abs(vh[..., :k, :]), _proj(xp, _H(xp, vh[..., k:, :]))


def _svd_full_first(xp, a):
    """Full SVD of a tall a, a loss of the first columns only (torch's convention
    agrees: it drops the cotangent of the completion)."""
    u, s, vh = xp.linalg.svd(a)
    return xp.abs(u[..., :, : s.shape[-1]]), s, xp.abs(vh)


def _qr(xp, a, mode="reduced"):
    return tuple(xp.linalg.qr(a, mode=mode))


def _qr_complete_tall(xp, a):
    q, r = xp.linalg.qr(a, mode="complete")
    n = a.shape[-1]
    return q[..., :, :n], r, _proj(xp, q[..., :, n:])


def _eig_abs(xp, a):
    w, v = xp.linalg.eig(a)
    return w, xp.abs(v)


def _eig_normalized(xp, a):
    """Eigenvectors scaled to a first component of 1: free of their phase."""
    w, v = xp.linalg.eig(a)
    return v / v[..., :1, :]


def _eigh_abs(xp, a):
    w, v = xp.linalg.eigh(a)
    return w, xp.abs(v)


def _slogdet_both(xp, a):
    sign, logabs = xp.linalg.slogdet(a)
    return sign, logabs


# -- specs ------------------------------------------------------------------------
spec("linalg.inv", lambda rng: [Sample((_well(rng, 3),), lambda xp, a: xp.linalg.inv(a), "3x3"),
                                Sample((_well(rng, 2, (2,)),), lambda xp, a: xp.linalg.inv(a), "batched"),
                                Sample((_well(rng, 3, complex_=True),), lambda xp, a: xp.linalg.inv(a), "complex")])  # fmt: skip
spec("linalg.det", lambda rng: [Sample((_well(rng, 3),), lambda xp, a: xp.linalg.det(a), "3x3"),
                                Sample((_well(rng, 2, (2,)),), lambda xp, a: xp.linalg.det(a), "batched"),
                                Sample((_well(rng, 3, complex_=True),), lambda xp, a: xp.linalg.det(a), "complex")])  # fmt: skip
spec("linalg.slogdet", lambda rng: [
    Sample((_well(rng, 3) * np.array([1, -1, 1]),), lambda xp, a: xp.linalg.slogdet(a).logabsdet, "logabsdet"),
    Sample((_well(rng, 2, (2,)) * np.array([1, -1]),), _slogdet_both, "batched, sign and logabsdet"),
    Sample((_well(rng, 3, complex_=True),), _slogdet_both, "complex, sign and logabsdet"),
])  # fmt: skip
spec("linalg.solve", lambda rng: [
    Sample((_well(rng, 3), _in(rng, (3, 2))), lambda xp, a, b: xp.linalg.solve(a, b), "matrix rhs"),
    Sample((_well(rng, 3), _in(rng, (3,))), lambda xp, a, b: xp.linalg.solve(a, b), "vector rhs"),
    Sample((_well(rng, 2, (2,)), _in(rng, (2, 2, 1))), lambda xp, a, b: xp.linalg.solve(a, b), "batched"),
    Sample((_well(rng, 3, complex_=True), _c(rng, (3, 2))), lambda xp, a, b: xp.linalg.solve(a, b), "complex"),
])  # fmt: skip
spec("linalg.cholesky", lambda rng: [
    Sample((_spd(rng, 3),), _sym_call(lambda xp, a: xp.linalg.cholesky(a)), "lower"),
    Sample((_spd(rng, 3),), _sym_call(lambda xp, a: xp.linalg.cholesky(a, upper=True)), "upper"),
    Sample((_spd(rng, 2, (2,)),), _sym_call(lambda xp, a: xp.linalg.cholesky(a)), "batched"),
    Sample((_spd(rng, 3, complex_=True),), _sym_call(lambda xp, a: xp.linalg.cholesky(a)), "complex lower"),
    Sample((_spd(rng, 3, complex_=True),), _sym_call(lambda xp, a: xp.linalg.cholesky(a, upper=True)), "complex upper"),
])  # fmt: skip
spec("linalg.trace", lambda rng: [Sample((_in(rng, (3, 4)),), lambda xp, a, o=o: xp.linalg.trace(a, offset=o), f"offset={o}")
                                  for o in (0, 1, -1)] + [
    Sample((_in(rng, (2, 3, 3)),), lambda xp, a: xp.linalg.trace(a), "batched"),
])  # fmt: skip
spec("linalg.diagonal", lambda rng: [Sample((_in(rng, (2, 3, 4)),), lambda xp, a, o=o: xp.linalg.diagonal(a, offset=o),
                                            f"offset={o}") for o in (0, 2, -1)])  # fmt: skip
spec(
    "linalg.outer",
    lambda rng: [
        Sample((_in(rng, (3,)), _in(rng, (2,))), lambda xp, a, b: xp.linalg.outer(a, b), "3x2")
    ],
)
spec(
    "linalg.cross",
    lambda rng: [
        Sample(
            (_in(rng, (2, 3)), _in(rng, (3,))), lambda xp, a, b: xp.linalg.cross(a, b), "broadcast"
        )
    ],
)
_VECTOR_ORDS = (2, 1, 3, float("inf"), -float("inf"), 0, -1, -2.5, 0.5)
spec("linalg.vector_norm", lambda rng: [
    Sample((_away(rng, (2, 3)),), lambda xp, a, o=o, ax=ax: xp.linalg.vector_norm(a, axis=ax, ord=o), f"ord={o}, axis={ax}")
    for o in _VECTOR_ORDS for ax in (None, 1)
] + [
    Sample((_away(rng, (2, 3, 2)),), lambda xp, a: xp.linalg.vector_norm(a, axis=(0, 2), keepdims=True, ord=3),
           "ord=3, axis=(0, 2), keepdims"),
    Sample((_c(rng, (2, 3)),), lambda xp, a: xp.linalg.vector_norm(a, axis=1), "complex, ord=2"),
    Sample((_c(rng, (2, 3)),), lambda xp, a: xp.linalg.vector_norm(a, axis=1, ord=float("inf")), "complex, ord=inf"),
    Sample((_c(rng, (2, 3)),), lambda xp, a: xp.linalg.vector_norm(a, ord=-1.5), "complex, ord=-1.5"),
])  # fmt: skip
_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, float("inf"), -float("inf"))
spec("linalg.matrix_norm", lambda rng: [
    Sample((_in(rng, (2, 3, 4)),), lambda xp, a, o=o: xp.linalg.matrix_norm(a, ord=o), f"ord={o}")
    for o in _MATRIX_ORDS
] + [
    Sample((_in(rng, (3, 3)),), lambda xp, a, o=o: xp.linalg.matrix_norm(a, ord=o, keepdims=True),
           f"ord={o}, keepdims") for o in ("fro", "nuc", 2, 1)
] + [
    Sample((_c(rng, (3, 2)),), lambda xp, a, o=o: xp.linalg.matrix_norm(a, ord=o), f"complex, ord={o}")
    for o in ("fro", "nuc", -2, float("inf"))
])  # fmt: skip
spec("linalg.matrix_power", lambda rng: [
    Sample((_well(rng, 3) / 3,), lambda xp, a, n=n: xp.linalg.matrix_power(a, n), f"n={n}") for n in (0, 1, 3, -2)
] + [
    Sample((_well(rng, 2, (2,)) / 3,), lambda xp, a: xp.linalg.matrix_power(a, 2), "batched, n=2"),
    Sample((_well(rng, 3, complex_=True) / 3,), lambda xp, a: xp.linalg.matrix_power(a, -3), "complex, n=-3"),
])  # fmt: skip
spec("linalg.eigh", lambda rng: [
    Sample((_sym_distinct(rng, 3),), _sym_call(lambda xp, a: xp.linalg.eigh(a).eigenvalues), "eigenvalues"),
    Sample((_sym_distinct(rng, 3),), _sym_call(lambda xp, a: xp.abs(xp.linalg.eigh(a).eigenvectors[0, :])),
           "eigenvectors (sign-fixed)"),
    Sample((_sym_distinct(rng, 3, (2,)),), _sym_call(_eigh_abs), "batched, |eigenvectors|"),
    Sample((_sym_distinct(rng, 3, complex_=True),), _sym_call(_eigh_abs), "complex, |eigenvectors|"),
])  # fmt: skip
spec("linalg.eigvalsh", lambda rng: [
    Sample((_sym_distinct(rng, 3),), _sym_call(lambda xp, a: xp.linalg.eigvalsh(a)), "3x3"),
    Sample((_sym_distinct(rng, 2, (2,)),), _sym_call(lambda xp, a: xp.linalg.eigvalsh(a)), "batched"),
    Sample((_sym_distinct(rng, 3, complex_=True),), _sym_call(lambda xp, a: xp.linalg.eigvalsh(a)), "complex"),
])  # fmt: skip
spec("linalg.eig", lambda rng: [
    Sample((_spread(rng, 3),), lambda xp, a: xp.linalg.eig(a).eigenvalues, "eigenvalues"),
    Sample((_spread(rng, 3),), _eig_abs, "|eigenvectors|"),
    Sample((_spread(rng, 3),), _eig_normalized, "eigenvectors / first component"),
    Sample((_spread(rng, 2, (2,)),), _eig_abs, "batched"),
    Sample((_spread(rng, 3, complex_=True),), _eig_abs, "complex, |eigenvectors|"),
    Sample((_in(rng, (3, 3)) - 2 * np.eye(3)[[1, 2, 0]],), _eig_abs, "complex eigenvalues of a real matrix"),
])  # fmt: skip
spec("linalg.eigvals", lambda rng: [
    Sample((_spread(rng, 3),), lambda xp, a: xp.linalg.eigvals(a), "3x3"),
    Sample((_spread(rng, 2, (2,)),), lambda xp, a: xp.linalg.eigvals(a), "batched"),
    Sample((_spread(rng, 3, complex_=True),), lambda xp, a: xp.linalg.eigvals(a), "complex"),
])  # fmt: skip
spec("linalg.svd", lambda rng: [
    Sample((_in(rng, (3, 3)),), lambda xp, a: xp.linalg.svd(a).S, "singular values"),
    Sample((_in(rng, (4, 3)),), _svd_abs, "tall, |U|, S, |Vh|"),
    Sample((_in(rng, (2, 4)),), _svd_abs, "wide, |U|, S, |Vh|"),
    Sample((_in(rng, (2, 3, 2)),), _svd_polar, "batched, U @ Vh"),
    Sample((_c(rng, (3, 2)),), _svd_abs, "complex, |U|, S, |Vh|"),
    Sample((_in(rng, (3, 3)),), lambda xp, a: _svd_abs(xp, a, True), "full_matrices, square"),
    Sample((_in(rng, (4, 2)),), _svd_full_first, "full_matrices, tall, first columns"),
    Sample((_in(rng, (4, 2)),), _svd_full_tall, "full_matrices, tall, completion projector"),
    Sample((_in(rng, (2, 3)),), _svd_full_wide, "full_matrices, wide, completion projector"),
])  # fmt: skip
spec("linalg.svdvals", lambda rng: [
    Sample((_in(rng, (3, 2)),), lambda xp, a: xp.linalg.svdvals(a), "3x2"),
    Sample((_in(rng, (2, 2, 3)),), lambda xp, a: xp.linalg.svdvals(a), "batched"),
    Sample((_c(rng, (3, 3)),), lambda xp, a: xp.linalg.svdvals(a), "complex"),
])  # fmt: skip
spec("linalg.qr", lambda rng: [
    Sample((_in(rng, (4, 3)),), _qr, "reduced, tall"),
    Sample((_in(rng, (3, 3)),), _qr, "reduced, square"),
    Sample((_in(rng, (2, 4)),), _qr, "reduced, wide"),
    Sample((_in(rng, (2, 3, 2)),), _qr, "batched"),
    Sample((_c(rng, (3, 2)),), _qr, "complex"),
    Sample((_c(rng, (2, 3)),), _qr, "complex, wide"),
    Sample((_in(rng, (2, 3)),), lambda xp, a: _qr(xp, a, "complete"), "complete, wide"),
    Sample((_in(rng, (4, 2)),), _qr_complete_tall, "complete, tall, completion projector"),
])  # fmt: skip
spec("linalg.pinv", lambda rng: [
    Sample((_in(rng, (4, 3)),), lambda xp, a: xp.linalg.pinv(a), "tall"),
    Sample((_in(rng, (2, 4)),), lambda xp, a: xp.linalg.pinv(a), "wide"),
    Sample((_well(rng, 2, (2,)),), lambda xp, a: xp.linalg.pinv(a, rtol=1e-8), "batched, rtol"),
    Sample((_c(rng, (3, 2)),), lambda xp, a: xp.linalg.pinv(a), "complex"),
    # rtol cuts a nonzero singular value (0.05 <= 0.1 * 3): the truncation's derivative
    Sample((_with_singular_values(rng, 4, 3, [3.0, 1.0, 0.05]),),
           lambda xp, a: xp.linalg.pinv(a, rtol=0.1), "tall, rtol cuts 0.05"),
    Sample((_with_singular_values(rng, 3, 4, [3.0, 1.0, 0.05]),),
           lambda xp, a: xp.linalg.pinv(a, rtol=0.1), "wide, rtol cuts 0.05"),
    Sample((_with_singular_values(rng, 3, 3, [2.0, 0.5, 0.0], batch=(2,)),),
           lambda xp, a: xp.linalg.pinv(a, rtol=0.5), "batched, rtol cuts 0.5 and 0"),
    Sample((_with_singular_values(rng, 3, 2, [3.0, 0.05], complex_=True),),
           lambda xp, a: xp.linalg.pinv(a, rtol=0.1), "complex, rtol cuts 0.05"),
])  # fmt: skip
