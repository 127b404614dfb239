"""The rules of the ``linalg`` extension against torch.autograd (float64 and complex128,
real and complex inputs, batched, numpy and array_api_strict), against hand formulas
(the adjugate at a singular matrix, reconstructions that are gauge invariant), second
order (Hessians against torch.autograd.functional.hessian) and the conventions chosen
at ties, repeated values and the completed columns of complete QR / full SVD."""

import warnings

import numpy as np
import pytest

import autodiff as ad
from autodiff import registry
from gradcheck.core import check_grad
from gradcheck.specs import SPECS

from .torch_compare import compat_torch, ours_and_torch, torch

RNG = np.random.default_rng(7)
INF = float("inf")


# -- helpers ------------------------------------------------------------------------
def _H(xp, a):
    return xp.conj(xp.matrix_transpose(a))


def _herm(xp, a):
    return (a + _H(xp, a)) / 2


def assert_same_as_torch(xp, f, arrays, rtol=1e-7, atol=1e-9):
    ours, theirs = ours_and_torch(xp, f, arrays)
    for k, (g, t) in enumerate(zip(ours, theirs)):
        assert np.all(np.isfinite(g)), f"input {k}: {g}"
        assert np.any(g != 0), f"input {k}: a zero gradient compares nothing"
        np.testing.assert_allclose(g, t, rtol=rtol, atol=atol, err_msg=f"input {k}")


def _m(shape, complex_):
    a = RNG.uniform(-1, 1, shape)
    return a + 1j * RNG.uniform(-1, 1, shape) if complex_ else a


def _well(shape, c):
    return _m(shape, c) + 2.5 * np.eye(shape[-1])


def _spd(shape, c):
    a = _m(shape, c)
    return a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])


def _spread(shape, c):
    return 0.5 * _m(shape, c) + np.diag(np.linspace(-2, 2, shape[-1]))


def _herm_distinct(shape, c):
    q, _ = np.linalg.qr(_m(shape, c))
    return (q * np.linspace(-2, 2, shape[-1])) @ np.conj(np.swapaxes(q, -1, -2))


# -- every rule against torch ----------------------------------------------------------
def _svd_abs(xp, a, full=False):
    u, s, vh = xp.linalg.svd(a, full_matrices=full)
    return xp.abs(u), s, xp.abs(vh)


def _eig_abs(xp, a):
    w, v = xp.linalg.eig(a)
    return w, xp.abs(v)


def _eigh_abs(xp, a):
    w, v = xp.linalg.eigh(_herm(xp, a))
    return w, xp.abs(v)


CASES = {
    "inv": (lambda xp, a: xp.linalg.inv(a), lambda c: [_well((2, 3, 3), c)]),
    "det": (lambda xp, a: xp.linalg.det(a), lambda c: [_well((2, 3, 3), c)]),
    "slogdet": (lambda xp, a: tuple(xp.linalg.slogdet(a)),
                lambda c: [_well((2, 3, 3), c) * np.array([1, -1, 1])]),
    "solve matrix": (lambda xp, a, b: xp.linalg.solve(a, b),
                     lambda c: [_well((2, 3, 3), c), _m((2, 3, 2), c)]),
    "solve vector, broadcast": (lambda xp, a, b: xp.linalg.solve(a, b),
                                lambda c: [_well((2, 3, 3), c), _m((3,), c)]),
    "cholesky": (lambda xp, a: xp.linalg.cholesky(_herm(xp, a)), lambda c: [_spd((2, 3, 3), c)]),
    "cholesky upper": (lambda xp, a: xp.linalg.cholesky(_herm(xp, a), upper=True),
                       lambda c: [_spd((2, 3, 3), c)]),
    "matrix_power 3": (lambda xp, a: xp.linalg.matrix_power(a, 3),
                       lambda c: [_well((2, 3, 3), c) / 3]),
    "matrix_power -2": (lambda xp, a: xp.linalg.matrix_power(a, -2),
                        lambda c: [_well((2, 3, 3), c) / 3]),
    "eigh": (_eigh_abs, lambda c: [_herm_distinct((2, 3, 3), c)]),
    "eigvalsh": (lambda xp, a: xp.linalg.eigvalsh(_herm(xp, a)),
                 lambda c: [_herm_distinct((2, 3, 3), c)]),
    "eig": (_eig_abs, lambda c: [_spread((2, 3, 3), c)]),
    "eig, phase-free vectors": (lambda xp, a: (lambda v: v / v[..., :1, :])(xp.linalg.eig(a)[1]),
                                lambda c: [_spread((2, 3, 3), c)]),
    "eigvals": (lambda xp, a: xp.linalg.eigvals(a), lambda c: [_spread((2, 3, 3), c)]),
    "svd square": (_svd_abs, lambda c: [_m((2, 3, 3), c)]),
    "svd tall": (_svd_abs, lambda c: [_m((2, 4, 3), c)]),
    "svd wide": (_svd_abs, lambda c: [_m((2, 2, 4), c)]),
    "svd full, tall, first columns": (
        lambda xp, a: (lambda u, s, vh: (xp.abs(u[..., :3]), s, xp.abs(vh)))(*xp.linalg.svd(a)),
        lambda c: [_m((2, 4, 3), c)]),
    "svd polar": (lambda xp, a: (lambda u, s, vh: u @ vh)(*xp.linalg.svd(a, full_matrices=False)),
                  lambda c: [_m((2, 4, 3), c)]),
    "svdvals": (lambda xp, a: xp.linalg.svdvals(a), lambda c: [_m((2, 3, 4), c)]),
    "qr tall": (lambda xp, a: tuple(xp.linalg.qr(a)), lambda c: [_m((2, 4, 3), c)]),
    "qr square": (lambda xp, a: tuple(xp.linalg.qr(a)), lambda c: [_m((2, 3, 3), c)]),
    "qr wide": (lambda xp, a: tuple(xp.linalg.qr(a)), lambda c: [_m((2, 3, 5), c)]),
    "qr complete, wide": (lambda xp, a: tuple(xp.linalg.qr(a, mode="complete")),
                          lambda c: [_m((2, 2, 3), c)]),
    "pinv tall": (lambda xp, a: xp.linalg.pinv(a), lambda c: [_m((2, 4, 3), c)]),
    "pinv wide": (lambda xp, a: xp.linalg.pinv(a), lambda c: [_m((2, 2, 4), c)]),
    "pinv rtol": (lambda xp, a: xp.linalg.pinv(a, rtol=1e-6), lambda c: [_m((3, 3), c)]),
}  # fmt: skip
for _o in ("fro", "nuc", 1, -1, 2, -2, INF, -INF):
    CASES[f"matrix_norm ord={_o}"] = (
        lambda xp, a, o=_o: xp.linalg.matrix_norm(a, ord=o),
        lambda c: [_m((2, 3, 4), c)],
    )
    CASES[f"matrix_norm ord={_o}, keepdims"] = (
        lambda xp, a, o=_o: xp.linalg.matrix_norm(a, ord=o, keepdims=True),
        lambda c: [_m((4, 3), c)],
    )
for _o in (2, 1, 3, INF, -INF, -1, -2.5, 0.5):
    CASES[f"vector_norm ord={_o}"] = (
        lambda xp, a, o=_o: xp.linalg.vector_norm(a, axis=-1, ord=o),
        lambda c: [_m((2, 3, 4), c)],
    )
CASES["vector_norm ord=2, axes, keepdims"] = (
    lambda xp, a: xp.linalg.vector_norm(a, axis=(0, 2), keepdims=True),
    lambda c: [_m((2, 3, 4), c)],
)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_same_as_torch(xp, name, dtype):
    f, make = CASES[name]
    assert_same_as_torch(xp, f, make(dtype == "complex128"))


def test_real_values_in_a_complex_dtype(xp):
    """A complex128 input with zero imaginary part: the complex rules, real values."""
    for name in ("svd tall", "eig", "qr wide", "pinv tall", "matrix_norm ord=nuc", "eigh"):
        f, make = CASES[name]
        assert_same_as_torch(xp, f, [a.astype(np.complex128) for a in make(False)])


def test_vector_norm_ord_0_has_a_zero_gradient(xp):
    x = xp.asarray(_m((2, 3), True), requires_grad=True)
    xp.sum(xp.linalg.vector_norm(x, ord=0, axis=1)).backward()
    np.testing.assert_array_equal(np.asarray(x.grad), np.zeros((2, 3)))


# -- det and slogdet at singular matrices -------------------------------------------------
def _cofactors(a):
    """The cofactor matrix (= adj(a)^T) of a square matrix, minor by minor."""
    n = a.shape[-1]
    out = np.zeros_like(a)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, axis=0), j, axis=1)
            out[i, j] = (-1) ** (i + j) * np.linalg.det(minor)
    return out


def test_det_gradient_at_a_singular_matrix_is_the_adjugate(xp):
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    x = xp.asarray(a, requires_grad=True)
    xp.linalg.det(x).backward()
    np.testing.assert_allclose(np.asarray(x.grad), [[4.0, -2.0], [-2.0, 1.0]], atol=1e-12)
    # rank n-1 and rank n-2 (adjugate zero), real and complex, batched
    rank2 = RNG.standard_normal((3, 2)) @ RNG.standard_normal((2, 3))
    rank1 = np.outer(RNG.standard_normal(3), RNG.standard_normal(3))
    crank2 = (_m((3, 2), True) @ _m((2, 3), True)).astype(np.complex128)
    for batch in (np.stack([rank2, rank1]), crank2[None]):
        x = xp.asarray(batch, requires_grad=True)
        g = RNG.standard_normal(batch.shape[:-2])
        xp.sum(xp.real(xp.linalg.det(x) * xp.asarray(g.astype(batch.dtype)))).backward()
        expected = np.stack([gi * np.conj(_cofactors(b)) for gi, b in zip(g, batch)])
        np.testing.assert_allclose(np.asarray(x.grad), expected, atol=1e-12)
    np.testing.assert_allclose(_cofactors(rank1), 0.0, atol=1e-12)


def test_det_gradient_is_the_adjugate_at_invertible_matrices(xp):
    a = _well((3, 3), True)
    x = xp.asarray(a, requires_grad=True)
    xp.real(xp.linalg.det(x)).backward()
    np.testing.assert_allclose(np.asarray(x.grad), np.conj(_cofactors(a)), rtol=1e-10)
    np.testing.assert_allclose(
        _cofactors(a), np.linalg.det(a) * np.linalg.inv(a).T, rtol=1e-10
    )  # the hand formula is the usual one


def test_slogdet_at_a_singular_matrix_does_not_raise(xp):
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    x = xp.asarray(a, requires_grad=True)
    sign, logabs = xp.linalg.slogdet(x)
    assert float(sign) == 0.0 and float(logabs) == -INF
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no division by zero is evaluated either
        logabs.backward()
    g = np.asarray(x.grad)
    assert g.shape == (2, 2) and not np.all(np.isfinite(g))  # infinite by nature


def test_slogdet_sign_has_a_gradient_for_complex_inputs(xp):
    a = _well((3, 3), True)
    x = xp.asarray(a, requires_grad=True)
    sign = xp.linalg.slogdet(x).sign
    xp.imag(sign).backward()
    g = np.asarray(x.grad)
    # d sign = i sign Im t, t = tr(A^-1 dA): dL = Re(sign) Im t, so dL/dA = i Re(sign) A^-H
    s = np.linalg.det(a) / abs(np.linalg.det(a))
    expected = s.real * 1j * np.conj(np.linalg.inv(a)).T
    np.testing.assert_allclose(g, expected, rtol=1e-10)
    ours, theirs = ours_and_torch(xp, lambda ns, t: ns.linalg.slogdet(t).sign, [a])
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-8)


# -- gauge invariance ---------------------------------------------------------------------
def _reconstruction_grad(xp, a, rebuild, c):
    """The gradient of Re(sum(c * rebuild(A))) where rebuild(A) == A: conj(c) by hand."""
    x = xp.asarray(a, requires_grad=True)
    xp.sum(xp.real(rebuild(xp, x) * xp.asarray(c))).backward()
    return np.asarray(x.grad)


def _phases(shape, complex_):
    if complex_:
        return np.exp(1j * RNG.uniform(-np.pi, np.pi, shape))
    return RNG.choice([-1.0, 1.0], shape)


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_svd_gauge_invariance(xp, complex_):
    for shape in ((3, 3), (2, 4, 3), (3, 5)):
        a = _m(shape, complex_)
        c = _m(shape, True)
        k = min(shape[-2:])
        d = _phases(shape[:-2] + (k,), complex_)

        def rebuild(xp, x, d=d):  # U D diag(S) D^H Vh = A whatever the phases D
            u, s, vh = xp.linalg.svd(x, full_matrices=False)
            dd = xp.asarray(d)
            return ((u * dd[..., None, :]) * s[..., None, :]) @ (xp.conj(dd)[..., :, None] * vh)

        g = _reconstruction_grad(xp, a, rebuild, c)
        np.testing.assert_allclose(g, np.conj(c) if complex_ else c.real, atol=1e-10)

        # a loss of U and V that is gauge invariant: the same gradient whatever phases
        w = RNG.standard_normal(k)

        def loss(xp, x, d):
            u, s, vh = xp.linalg.svd(x, full_matrices=False)
            dd = xp.asarray(d)
            u, vh = u * dd[..., None, :], xp.conj(dd)[..., :, None] * vh
            return xp.abs((u * xp.asarray(w)) @ vh)

        grads = []
        for phases in (np.ones_like(d), d):
            x = xp.asarray(a, requires_grad=True)
            xp.sum(loss(xp, x, phases)).backward()
            grads.append(np.asarray(x.grad))
        np.testing.assert_allclose(grads[0], grads[1], atol=1e-10)
        assert_same_as_torch(xp, lambda ns, x, d=d: loss(ns, x, d), [a])
        check_grad(lambda x, d=d: loss(xp, x, d), a, xp=xp)


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_eig_gauge_invariance(xp, complex_):
    a = _spread((2, 3, 3), complex_)
    c = _m((2, 3, 3), True)
    d = _phases((2, 3), True)  # eigenvectors are complex even for a real input

    def rebuild(xp, x):  # (V D) diag(w) (V D)^-1 = A
        w, v = xp.linalg.eig(x)
        v = v * xp.asarray(d)[..., None, :]
        return xp.linalg.solve(xp.matrix_transpose(v), xp.matrix_transpose(v * w[..., None, :])).mT

    g = _reconstruction_grad(xp, a, rebuild, c)
    np.testing.assert_allclose(g, np.conj(c) if complex_ else c.real, atol=1e-10)

    def loss(xp, x, d):  # phase free: |V D| and V D / (V D)[0]
        w, v = xp.linalg.eig(x)
        v = v * xp.asarray(d)[..., None, :]
        return xp.abs(v) + xp.real(v / v[..., :1, :]) * 0.5

    grads = []
    for phases in (np.ones_like(d), d):
        x = xp.asarray(a, requires_grad=True)
        xp.sum(loss(xp, x, phases) * xp.asarray(c.real)).backward()
        grads.append(np.asarray(x.grad))
    np.testing.assert_allclose(grads[0], grads[1], atol=1e-10)
    assert_same_as_torch(xp, lambda ns, x: loss(ns, x, d), [a])
    check_grad(lambda x: loss(xp, x, d), a, xp=xp)


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_qr_reconstruction_and_sign_flips(xp, complex_):
    for shape, mode in (((4, 3), "reduced"), ((3, 3), "reduced"), ((2, 3, 5), "reduced"),
                        ((2, 4), "complete"), ((5, 2), "complete")):  # fmt: skip
        a = _m(shape, complex_)
        c = _m(shape, True)
        k = min(shape[-2:])
        d = _phases(shape[:-2] + (k,), complex_)

        def rebuild(xp, x, d=d, mode=mode, k=k):  # (Q1 D)(D^H R1) = A
            q, r = xp.linalg.qr(x, mode=mode)
            dd = xp.asarray(d)
            return (q[..., :, :k] * dd[..., None, :]) @ (xp.conj(dd)[..., :, None] * r[..., :k, :])

        g = _reconstruction_grad(xp, a, rebuild, c)
        np.testing.assert_allclose(g, np.conj(c) if complex_ else c.real, atol=1e-10)


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_eigh_and_cholesky_reconstructions(xp, complex_):
    a = _spd((2, 3, 3), complex_)
    c = _m((2, 3, 3), True)
    d = _phases((2, 3), complex_)
    # the loss reads the hermitized input: its gradient is the Hermitian part of conj(c)
    expected = (np.conj(c) + np.swapaxes(c, -1, -2)) / 2
    expected = expected if complex_ else expected.real

    def eigh_rebuild(xp, x):
        w, v = xp.linalg.eigh(_herm(xp, x))
        v = v * xp.asarray(d)[..., None, :]
        return (v * w[..., None, :]) @ _H(xp, v)

    def chol_rebuild(xp, x):
        L = xp.linalg.cholesky(_herm(xp, x))
        return L @ _H(xp, L)

    for rebuild in (eigh_rebuild, chol_rebuild):
        g = _reconstruction_grad(xp, a, rebuild, c)
        np.testing.assert_allclose(g, expected, atol=1e-10)


# -- the completed columns of complete QR and full SVD ----------------------------------------
def _projector_reference(a, which):
    """torch's gradient of the same loss written with the reduced factors:
    Q2 Q2^H = I - Q1 Q1^H (U2 U2^H = I - U1 U1^H, V2 V2^H = I - V1 V1^H)."""
    t = torch.tensor(a, requires_grad=True)
    m, n = a.shape[-2:]
    if which == "qr":
        q1 = torch.linalg.qr(t)[0]
        p = torch.eye(m, dtype=t.dtype) - q1 @ q1.mH
    elif which == "svd tall":
        u1 = torch.linalg.svd(t, full_matrices=False)[0]
        p = torch.eye(m, dtype=t.dtype) - u1 @ u1.mH
    else:
        vh1 = torch.linalg.svd(t, full_matrices=False)[2]
        p = torch.eye(n, dtype=t.dtype) - vh1.mH @ vh1
    return t, p


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("which", ["qr", "svd tall", "svd wide"])
def test_completion_through_its_projector(xp, which, complex_):
    shape = (2, 3) if which == "svd wide" else (2, 5, 2)
    a = _m(shape, complex_)
    m, n = shape[-2:]
    c = _m((shape[0],) + ((n, n) if which == "svd wide" else (m, m)), True)

    def loss(xp, x):
        if which == "qr":
            q2 = xp.linalg.qr(x, mode="complete")[0][..., :, n:]
        elif which == "svd tall":
            q2 = xp.linalg.svd(x)[0][..., :, n:]
        else:
            q2 = _H(xp, xp.linalg.svd(x)[2][..., m:, :])
        return xp.real((q2 @ _H(xp, q2)) * xp.asarray(c))

    x = xp.asarray(a, requires_grad=True)
    xp.sum(loss(xp, x)).backward()
    g = np.asarray(x.grad)
    t, p = _projector_reference(a, which)
    (tg,) = torch.autograd.grad((p * torch.tensor(c)).real.sum(), t)
    assert np.any(g != 0)
    np.testing.assert_allclose(g, tg.resolve_conj().numpy(), rtol=1e-8, atol=1e-10)
    check_grad(lambda x: loss(xp, x), a, xp=xp)


def test_torch_refuses_complete_qr_of_a_tall_matrix():
    """Where we differ from torch: it refuses this backward (we follow the projector)."""
    t = torch.tensor(_m((4, 2), False), requires_grad=True)
    q = torch.linalg.qr(t, mode="complete")[0]
    with pytest.raises(RuntimeError, match="complete"):
        q.sum().backward()


# -- repeated values and ties ---------------------------------------------------------------
def test_svd_values_only_at_repeated_singular_values_is_finite(xp):
    a = np.eye(3) * 2.0
    for f in (lambda x: xp.sum(xp.linalg.svd(x).S),
              lambda x: xp.sum(xp.linalg.svdvals(x)),
              lambda x: xp.sum(xp.linalg.eigh(x).eigenvalues * xp.asarray([1.0, 2.0, 3.0])),
              lambda x: xp.sum(xp.abs(xp.linalg.eig(x).eigenvalues))):  # fmt: skip
        x = xp.asarray(a, requires_grad=True)
        f(x).backward()
        g = np.asarray(x.grad)
        assert np.all(np.isfinite(g))
    x = xp.asarray(a, requires_grad=True)
    xp.sum(xp.linalg.svd(x).S).backward()
    np.testing.assert_allclose(np.asarray(x.grad), np.eye(3), atol=1e-12)


def test_vectors_at_repeated_values_are_not_finite(xp):
    """As torch documents: a loss of U/V at repeated singular values (eigenvalues) has no
    gradient; it shows as inf/nan, never as a finite wrong number or an error."""
    a = np.diag([2.0, 2.0, 1.0])
    c = xp.asarray(RNG.standard_normal((3, 3)))
    for f in (lambda x: xp.sum(xp.linalg.svd(x).U * c),
              lambda x: xp.sum(xp.linalg.eigh(x).eigenvectors * c)):  # fmt: skip
        x = xp.asarray(a, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # inf - inf in the matrix products
            f(x).backward()
        assert not np.all(np.isfinite(np.asarray(x.grad)))


def test_matrix_norm_ties_split_evenly_as_torch(xp):
    a = np.array([[1.0, -1.0], [1.0, 1.0]])  # equal column sums, equal row sums
    for o, expected in ((1, a / 2), (INF, a / 2), (-1, a / 2), (-INF, a / 2)):
        x = xp.asarray(a, requires_grad=True)
        xp.linalg.matrix_norm(x, ord=o).backward()
        np.testing.assert_allclose(np.asarray(x.grad), expected, atol=1e-12)
        assert_same_as_torch(xp, lambda ns, t, o=o: ns.linalg.matrix_norm(t, ord=o), [a])
    # 2-norm at the identity (two equal singular values): U diag(1/2, 1/2) Vh = I / 2
    x = xp.asarray(np.eye(2), requires_grad=True)
    xp.linalg.matrix_norm(x, ord=2).backward()
    np.testing.assert_allclose(np.asarray(x.grad), np.eye(2) / 2, atol=1e-12)
    t = torch.eye(2, dtype=torch.float64, requires_grad=True)
    torch.linalg.matrix_norm(t, ord=2).backward()
    np.testing.assert_allclose(t.grad.numpy(), np.eye(2) / 2, atol=1e-12)


def test_vector_norm_ties_and_zeros(xp):
    x = xp.asarray(np.array([1.0, -1.0, 0.5]), requires_grad=True)
    xp.linalg.vector_norm(x, ord=INF).backward()
    np.testing.assert_allclose(np.asarray(x.grad), [0.5, -0.5, 0.0])
    # zeros: 0 at x = 0 for p < 1, 0 for a zero norm (never NaN)
    for o in (0.5, -1, 3, 2, 1, INF):
        a = np.array([[0.0, 0.7, -0.4], [0.0, 0.0, 0.0]])
        x = xp.asarray(a, requires_grad=True)
        with np.errstate(divide="ignore"):  # numpy's forward for ord < 0: 1 / |0|
            n = xp.linalg.vector_norm(x, axis=1, ord=o)
        xp.sum(n).backward()
        g = np.asarray(x.grad)
        assert np.all(np.isfinite(g)) and np.all(g[:, 0] == 0) and np.all(g[1] == 0), (o, g)
        t = torch.tensor(a, requires_grad=True)
        torch.linalg.vector_norm(t, dim=1, ord=o).sum().backward()
        np.testing.assert_allclose(g, t.grad.numpy(), atol=1e-12, err_msg=str(o))


def test_pinv_at_constant_rank(xp):
    """An exactly rank-deficient matrix (default rtol cuts the zero singular value):
    the Golub-Pereyra formula holds at constant rank, as torch's."""
    a = RNG.standard_normal((4, 2)) @ RNG.standard_normal((2, 3))
    assert_same_as_torch(xp, lambda ns, t: ns.linalg.pinv(t), [a], rtol=1e-6, atol=1e-8)


# -- second order ---------------------------------------------------------------------------
def _hessians(xp, f, a):
    ours = ad.hessian(lambda x: f(xp, x))(xp.asarray(a))
    theirs = torch.autograd.functional.hessian(lambda t: f(compat_torch, t), torch.tensor(a))
    return np.asarray(ours), theirs.numpy()


HESSIANS = {
    "svdvals": (lambda ns, x: ns.sum(ns.linalg.svdvals(x) * ns.asarray([1.0, -2.0])), (3, 2)),
    "svdvals squared, batched": (lambda ns, x: ns.sum(ns.linalg.svdvals(x) ** 2), (2, 2, 3)),
    "svd polar": (lambda ns, x: ns.sum(ns.sin(ns.linalg.svd(x, full_matrices=False).U
                                              @ ns.linalg.svd(x, full_matrices=False).Vh)), (3, 2)),
    "eigvalsh": (lambda ns, x: ns.sum(ns.linalg.eigvalsh(_herm(ns, x)) ** 3), (3, 3)),
    "eig": (lambda ns, x: ns.sum(ns.real(ns.linalg.eigvals(x)) ** 2), (3, 3)),
    "det": (lambda ns, x: ns.linalg.det(x) ** 2, (3, 3)),
    "slogdet": (lambda ns, x: ns.linalg.slogdet(x).logabsdet, (3, 3)),
    "qr": (lambda ns, x: ns.sum(ns.linalg.qr(x).Q[..., 0, :] * ns.linalg.qr(x).R[..., 0, :]),
           (4, 3)),
    "pinv": (lambda ns, x: ns.sum(ns.linalg.pinv(x) ** 2), (3, 2)),
    "matrix_norm nuc": (lambda ns, x: ns.linalg.matrix_norm(x, ord="nuc") ** 2, (3, 2)),
    "matrix_norm 2": (lambda ns, x: ns.linalg.matrix_norm(x, ord=-2) ** 2, (2, 3)),
    "vector_norm 3": (lambda ns, x: ns.linalg.vector_norm(x, ord=3), (4,)),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(HESSIANS))
def test_hessian_same_as_torch(xp, name):
    f, shape = HESSIANS[name]
    a = RNG.uniform(-1, 1, shape) + (2.5 * np.eye(shape[-1]) if name in ("det", "slogdet") else 0)
    ours, theirs = _hessians(xp, f, a)
    assert ours.shape == shape + shape
    assert np.all(np.isfinite(ours)) and np.any(ours != 0)
    np.testing.assert_allclose(ours, theirs, rtol=1e-7, atol=1e-9)


# -- the registry ---------------------------------------------------------------------------
def test_every_linalg_function_has_a_rule():
    ops = {n: op for n, op in registry.ops().items() if op.chapter == "linalg"}
    assert not [n for n, op in ops.items() if op.kind == registry.MISSING]
    assert ops["linalg.matrix_rank"].kind == registry.CONST
    for name in ("linalg.svd", "linalg.qr", "linalg.eig", "linalg.eigvals", "linalg.pinv",
                 "linalg.svdvals", "linalg.eigh", "linalg.eigvalsh", "linalg.det",
                 "linalg.slogdet", "linalg.matrix_norm", "linalg.vector_norm"):  # fmt: skip
        assert ops[name].kind == registry.DIFF and ops[name].twice, name
        assert SPECS[name].second_order, name
    for name in ops:
        assert ops[name].kind != registry.DIFF or name in SPECS, name


def test_det_and_slogdet_second_order_at_repeated_singular_values(xp):
    """The recorded rule (create_graph) of det / slogdet doesn't go through an SVD, whose
    derivative doesn't exist at repeated singular values: the identity, a rotation."""
    t = 0.3
    rotation = np.array([[np.cos(t), -np.sin(t), 0], [np.sin(t), np.cos(t), 0], [0, 0, 1.0]])
    for a in (np.eye(3), rotation, 2 * rotation):
        for f in (lambda ns, x: ns.linalg.det(x), lambda ns, x: ns.linalg.slogdet(x).logabsdet):
            ours, theirs = _hessians(xp, f, a)
            assert np.all(np.isfinite(ours)) and np.any(ours != 0)
            np.testing.assert_allclose(ours, theirs, rtol=1e-7, atol=1e-9)
