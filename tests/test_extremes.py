"""Gradients at extreme inputs, where a formula that is exact in real numbers loses its
digits in floating point: each value is compared with a hand-derived one or with the
same math done in float64 from the difference of the inputs."""

import numpy as np
import pytest

import autodiff as ad
import autodiff.nn.functional as F


def _softmax64(z, axis=-1):
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# exp(x - logsumexp(x)) gives 1 per entry here (logsumexp rounds to 1e300); the truth is 1/3
HUGE = [1e300, 1e300, 1e300]


def test_logsumexp_gradient_is_the_softmax_at_huge_logits(xp):
    x = xp.asarray(HUGE, dtype=xp.float64)
    g = ad.grad(lambda a: F.logsumexp(a))(x)
    np.testing.assert_allclose(np.asarray(g.data), [1 / 3] * 3)


@pytest.mark.parametrize(
    "name, loss, truth",
    [
        ("logsumexp", lambda xp, a: xp.sum(F.logsumexp(a, axis=-1)), lambda z: _softmax64(z)),
        (
            "log_softmax",
            lambda xp, a: xp.sum(F.log_softmax(a, axis=-1)[:, 0]),
            lambda z: np.eye(z.shape[-1])[[0] * z.shape[0]] - _softmax64(z),
        ),
        (
            "cross_entropy",
            lambda xp, a: F.cross_entropy(a, xp.asarray([0, 1, 2, 3])),
            lambda z: (_softmax64(z) - np.eye(z.shape[-1])[[0, 1, 2, 3]]) / 4,
        ),
    ],
)
def test_softmax_family_float32_logits_near_1e4_keep_their_digits(xp, name, loss, truth):
    """float32 logits near 1e4: logsumexp's rounding (ulp 1e-3) must not reach the
    gradient; the softmax from x - max is good to float32's resolution."""
    z = 1e4 + np.random.default_rng(0).standard_normal((4, 5))
    z32 = z.astype(np.float32)
    g = ad.grad(lambda a: loss(xp, a))(xp.asarray(z32))
    assert g.dtype == xp.float32
    err = np.abs(np.asarray(g.data, dtype=np.float64) - truth(z32))
    assert err.max() < 2e-7, (name, err.max())  # was 2.5e-4 for logsumexp


def test_softmax_family_huge_logits_float64(xp):
    x = xp.asarray([HUGE], dtype=xp.float64)
    g = ad.grad(lambda a: xp.sum(F.log_softmax(a, axis=-1)[:, 0]))(x)
    np.testing.assert_allclose(np.asarray(g.data), [[2 / 3, -1 / 3, -1 / 3]])
    g = ad.grad(lambda a: F.cross_entropy(a, xp.asarray([0])))(x)
    np.testing.assert_allclose(np.asarray(g.data), [[-2 / 3, 1 / 3, 1 / 3]])


def test_logsumexp_keeps_its_conventions_at_infinities(xp):
    """A row of -inf has gradient 0; a row holding +inf has NaN only at the inf entry."""
    inf = float("inf")
    x = xp.asarray([[-inf, -inf, -inf], [inf, 0.0, 1.0], [0.0, 1.0, 2.0]], dtype=xp.float64)
    with np.errstate(invalid="ignore"):
        g = np.asarray(ad.grad(lambda a: xp.sum(F.logsumexp(a, axis=1)[0:1]))(x).data)
        np.testing.assert_array_equal(g[0], [0.0, 0.0, 0.0])
        _, vjp = ad.vjp(lambda a: F.logsumexp(a, axis=1), x)
        (g,) = vjp(xp.asarray([0.0, 1.0, 1.0], dtype=xp.float64))
    g = np.asarray(g.data)
    assert np.isnan(g[1, 0]) and (g[1, 1:] == 0).all()
    np.testing.assert_allclose(g[2], _softmax64([0.0, 1.0, 2.0]), rtol=1e-15)


def test_logaddexp_gradient_from_the_difference(xp):
    """d logaddexp(a, b) / da = sigmoid(a - b): 1/2 at 1e300 (exp(a - out) gave 1), a
    tie of infinities of one sign gives 1/2 to each side, a finite side beside +inf
    gets 0, and no warning is raised for inf - inf."""
    inf = float("inf")
    a = xp.asarray([1e300, 1.0, -inf, 2.0, inf, 5.0, 800.0], dtype=xp.float64)
    b = xp.asarray([1e300, 3.0, -inf, inf, inf, -inf, -800.0], dtype=xp.float64)
    with np.errstate(invalid="raise", over="raise", divide="raise"):
        _, vjp = ad.vjp(xp.logaddexp, a, b)
        ga, gb = (np.asarray(g.data) for g in vjp(xp.ones(7, dtype=xp.float64)))
    s = 1 / (1 + np.exp(2.0))  # sigmoid(1 - 3)
    np.testing.assert_allclose(ga, [0.5, s, 0.5, 0.0, 0.5, 1.0, 1.0], rtol=1e-15)
    np.testing.assert_allclose(gb, [0.5, 1 - s, 0.5, 1.0, 0.5, 0.0, 0.0], rtol=1e-15)
    # a Python scalar on either side
    g = ad.grad(lambda x: xp.sum(xp.logaddexp(x, 1e300)))(xp.asarray([1e300], dtype=xp.float64))
    np.testing.assert_allclose(np.asarray(g.data), [0.5])


def _with_singular_values(rng, m, n, values):
    u, _ = np.linalg.qr(rng.standard_normal((m, m)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    s = np.zeros((m, n))
    s[range(len(values)), range(len(values))] = values
    return u @ s @ v.T


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (4, 4)])
def test_pinv_gradient_is_that_of_the_truncated_pseudo_inverse(xp, shape):
    """``pinv(a, rtol=0.1)`` cuts the singular value 0.05: the gradient is the derivative
    of the truncated pseudo-inverse (central differences of NumPy's pinv), not
    Golub-Pereyra's formula at ``a`` (off by 5e-3)."""
    rng = np.random.default_rng(3)
    k = min(shape)
    a = _with_singular_values(rng, *shape, [3.0, 1.0, 0.05, 0.0][:k])
    c = rng.standard_normal(shape[::-1])

    def loss(m):
        return np.sum(np.linalg.pinv(m, rtol=0.1) * c)

    h, numeric = 1e-6, np.zeros(shape)
    for idx in np.ndindex(*shape):
        e = np.zeros(shape)
        e[idx] = h
        numeric[idx] = (loss(a + e) - loss(a - e)) / (2 * h)
    ct = xp.asarray(c)
    g = ad.grad(lambda m: xp.sum(xp.linalg.pinv(m, rtol=0.1) * ct))(xp.asarray(a))
    np.testing.assert_allclose(np.asarray(g.data), numeric, atol=1e-8)


def test_quotient_rules_divide_twice_instead_of_squaring(xp):
    """atan2, divide and asinh: a square of the input under- or overflows near 1e+-155
    where the derivative is finite (it gave inf or 0); hand-derived values."""
    f64 = xp.float64
    a = xp.asarray([1e-200, 1e200, 3.0], dtype=f64)
    b = xp.asarray([1e-200, 1e200, 4.0], dtype=f64)
    _, vjp = ad.vjp(xp.atan2, a, b)
    ga, gb = (np.asarray(g.data) for g in vjp(xp.ones(3, dtype=f64)))
    np.testing.assert_allclose(ga, [5e199, 5e-201, 4 / 25], rtol=1e-15)
    np.testing.assert_allclose(gb, [-5e199, -5e-201, -3 / 25], rtol=1e-15)
    _, vjp = ad.vjp(xp.divide, a, b)
    ga, gb = (np.asarray(g.data) for g in vjp(xp.ones(3, dtype=f64)))
    np.testing.assert_allclose(ga, [1e200, 1e-200, 1 / 4], rtol=1e-15)
    np.testing.assert_allclose(gb, [-1e200, -1e-200, -3 / 16], rtol=1e-15)
    g = ad.grad(lambda x: xp.sum(xp.asinh(x)))(xp.asarray([1e200, -3.0, 0.0], dtype=f64))
    np.testing.assert_allclose(np.asarray(g.data), [1e-200, 1 / 10**0.5, 1.0], rtol=1e-15)
