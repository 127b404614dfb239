"""The rules of the ``fft`` extension against torch.autograd (float64 / complex128):
every transform with ``n``/``s`` smaller and larger than the input (even and odd),
``axis``/``axes`` variants and every ``norm``, on numpy and array_api_strict; second
order through ``backward(create_graph=True)``; the Hermitian bookkeeping of irfft
(the imaginary parts of the DC and Nyquist bins get no gradient)."""

import numpy as np
import pytest

import autodiff as ad
from autodiff import registry

torch = pytest.importorskip("torch", reason="the comparisons need torch")

NORMS = ("backward", "ortho", "forward")
ONE_D = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
N_D = ("fftn", "ifftn", "rfftn", "irfftn")
REAL_IN = ("rfft", "ihfft", "rfftn")  # the standard's real-input transforms


def _input(name, shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    return x if name in REAL_IN else x + 1j * rng.standard_normal(shape)


def _weights(shape, is_complex, seed):
    rng = np.random.default_rng(seed + 1000)
    w = rng.uniform(0.5, 1.5, shape)
    c = rng.standard_normal(shape)
    if is_complex:
        c = c + 1j * rng.standard_normal(shape)
    return w, c


def _np(a):
    if isinstance(a, torch.Tensor):
        return a.detach().resolve_conj().numpy()
    return np.asarray(a.data)


def _loss(m, y, w, c):
    """A real loss of the output on namespace ``m`` (ours or torch): quadratic and
    linear terms, so the cotangent is neither constant nor proportional to y."""
    return m.sum(m.real(y * m.conj(y)) * w) + m.sum(m.real(y * c))


def _torch_loss(y, w, c):
    return _loss(torch, y, torch.tensor(w), torch.tensor(c))


def _compare(xp, name, x, kw, tkw, rtol=1e-10, atol=1e-10):
    """Forward values and the gradient of ``_loss`` against torch; returns the gradient."""
    t = xp.asarray(x, requires_grad=True)
    y = getattr(xp.fft, name)(t, **kw)
    tt = torch.tensor(x, requires_grad=True)
    ty = getattr(torch.fft, name)(tt, **tkw)
    np.testing.assert_allclose(_np(y), _np(ty), rtol=rtol, atol=atol)
    w, c = _weights(tuple(ty.shape), ty.is_complex(), x.size)
    _loss(xp, y, xp.asarray(w), xp.asarray(c)).backward()
    _torch_loss(ty, w, c).backward()
    assert t.grad.shape == t.shape and t.grad.dtype == t.dtype
    np.testing.assert_allclose(_np(t.grad), _np(tt.grad), rtol=rtol, atol=atol)
    return _np(t.grad)


# -- one-dimensional transforms -------------------------------------------------------
# input length 6 along the axis: n smaller (odd 3, even 4) and larger (9, 11, 12) than
# it; for irfft/hfft these crop the spectrum (n//2 + 1 = 2, 3, 5 < 6), keep it (11: 6)
# or zero-pad it (12: 7), with even and odd output lengths (the Nyquist bin or not)
ONE_D_CASES = [
    pytest.param(name, (2, 6), n, -1, norm, id=f"{name}-n={n}-{norm}")
    for name in ONE_D
    for n in (None, 3, 4, 9, 11, 12)
    for norm in NORMS
] + [
    pytest.param(name, shape, n, axis, norm, id=f"{name}-{shape}-axis={axis}-n={n}-{norm}")
    for name in ONE_D
    for shape, n, axis, norm in (
        ((6, 3), None, 0, "ortho"),
        ((6, 3), 5, 0, "forward"),
        ((2, 5, 3), 8, -2, "backward"),
        ((2, 5, 3), None, 1, "ortho"),
        ((7,), None, -1, "backward"),
        ((7,), 2, 0, "forward"),
    )
]


@pytest.mark.parametrize("name, shape, n, axis, norm", ONE_D_CASES)
def test_one_dimensional_matches_torch(xp, name, shape, n, axis, norm):
    x = _input(name, shape, seed=len(shape) + (n or 0))
    _compare(xp, name, x, dict(n=n, axis=axis, norm=norm), dict(n=n, dim=axis, norm=norm))


# -- n-dimensional transforms ---------------------------------------------------------
ND_VARIANTS = (
    (None, None),  # every axis, the input's lengths
    ((3, 6), None),  # the last len(s) axes: crop one, pad the other
    (None, (0, 2)),  # a subset
    ((4,), (-1,)),  # one negative axis
    ((2, 7), (2, 0)),  # axes out of order (the last one given is the real one)
    ((5, 3, 2), (0, 1, 2)),  # every axis, pad/crop/crop
    ((4, 5), (-3, -2)),  # negative axes, even and odd lengths
)
ND_CASES = [
    pytest.param(name, s, axes, norm, id=f"{name}-s={s}-axes={axes}-{norm}")
    for name in N_D
    for s, axes in ND_VARIANTS
    for norm in NORMS
]


# array_api_compat and array_api_strict pass s with axes=None on to NumPy 2, which
# deprecates it (the standard defines it: the last len(s) axes); the rules pass axes
@pytest.mark.filterwarnings("ignore:`axes` should not be `None`:DeprecationWarning")
@pytest.mark.parametrize("name, s, axes, norm", ND_CASES)
def test_n_dimensional_matches_torch(xp, name, s, axes, norm):
    x = _input(name, (3, 4, 5), seed=7)
    _compare(xp, name, x, dict(s=s, axes=axes, norm=norm), dict(s=s, dim=axes, norm=norm))


def test_two_dimensional_input_all_axes(xp):
    for name in N_D:
        _compare(xp, name, _input(name, (4, 5), seed=3), {}, {})


# -- second order ---------------------------------------------------------------------
SECOND_CASES = [
    ("fft", dict(n=4, norm="ortho"), dict(n=4, norm="ortho")),
    ("ifft", dict(n=9, axis=0), dict(n=9, dim=0)),
    ("rfft", dict(n=5, norm="forward"), dict(n=5, norm="forward")),
    ("irfft", dict(n=8), dict(n=8)),
    ("irfft", dict(n=11, axis=0, norm="ortho"), dict(n=11, dim=0, norm="ortho")),
    ("hfft", dict(n=7, norm="forward"), dict(n=7, norm="forward")),
    ("ihfft", dict(n=4), dict(n=4)),
    ("fftn", dict(s=(3, 7), norm="ortho"), dict(s=(3, 7), norm="ortho")),
    ("ifftn", dict(axes=(0,)), dict(dim=(0,))),
    ("rfftn", dict(s=(5, 4)), dict(s=(5, 4))),
    ("irfftn", dict(s=(4, 7), norm="forward"), dict(s=(4, 7), norm="forward")),
]


@pytest.mark.filterwarnings("ignore:`axes` should not be `None`:DeprecationWarning")
@pytest.mark.parametrize(
    "name, kw, tkw", SECOND_CASES, ids=[f"{c[0]}-{c[1]}" for c in SECOND_CASES]
)
def test_second_order_matches_torch(xp, name, kw, tkw):
    x = _input(name, (5, 6), seed=11)
    t = xp.asarray(x, requires_grad=True)
    y = getattr(xp.fft, name)(t, **kw)
    tt = torch.tensor(x, requires_grad=True)
    ty = getattr(torch.fft, name)(tt, **tkw)
    w, c = _weights(tuple(ty.shape), ty.is_complex(), 0)
    _loss(xp, y, xp.asarray(w), xp.asarray(c)).backward(create_graph=True)
    (tg,) = torch.autograd.grad(_torch_loss(ty, w, c), tt, create_graph=True)
    g = t.grad
    assert g.requires_grad  # the rule was recorded
    np.testing.assert_allclose(_np(g), _np(tg), rtol=1e-10, atol=1e-10)
    # a second loss of the gradient: the rule's own rules (the fft of the cotangent) run
    w2, c2 = _weights(x.shape, np.iscomplexobj(x), 1)
    t.grad = None
    _loss(xp, g, xp.asarray(w2), xp.asarray(c2)).backward()
    _torch_loss(tg, w2, c2).backward()
    np.testing.assert_allclose(_np(t.grad), _np(tt.grad), rtol=1e-9, atol=1e-9)


def test_hessian_of_a_real_quadratic(xp):
    # |rfft(x)|^2 summed: x^T (F^T W F) x, whose Hessian ad.hessian builds from the
    # recorded rule; against torch's
    x = np.random.default_rng(5).standard_normal(6)

    def f(m, a):
        return m.sum(m.abs(m.fft.rfft(a, n=7, norm="ortho")) ** 2)

    h = ad.hessian(lambda a: f(xp, a))(xp.asarray(x))
    th = torch.autograd.functional.hessian(lambda a: f(torch, a), torch.tensor(x))
    np.testing.assert_allclose(_np(h), th.numpy(), rtol=1e-10, atol=1e-10)
    assert h.shape == (6, 6)


# -- the Hermitian bookkeeping --------------------------------------------------------
@pytest.mark.parametrize("n", [8, 9])
def test_irfft_ignores_the_imaginary_part_of_dc_and_nyquist(xp, n):
    # irfft(X, n) reads Im(X_0) (and Im(X_{n/2}) for an even n) nowhere: those parts get
    # a zero gradient, the others the weight 2 of the folded negative frequencies
    L = n // 2 + 1
    X = _input("irfft", (L,), seed=n)
    g = _compare(xp, "irfft", X, dict(n=n), dict(n=n))
    assert g[0].imag == 0.0
    assert (g[-1].imag == 0.0) == (n % 2 == 0)
    # by hand: y_t = (1/n) Re(sum_k w_k X_k e^{2 pi i k t/n}) and L = sum(y * u)
    u = np.random.default_rng(n).standard_normal(n)
    t = xp.asarray(X, requires_grad=True)
    xp.sum(xp.fft.irfft(t, n=n) * xp.asarray(u)).backward()
    w = np.full(L, 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    # PyTorch's convention: grad = dL/dRe + i dL/dIm = w_k * (1/n) sum_t u_t e^{-2 pi i k t/n}
    # (real at k = 0 and k = n/2: e^{-2 pi i k t/n} is real there)
    expected = w * np.fft.fft(u)[:L] / n
    np.testing.assert_allclose(_np(t.grad), expected, rtol=1e-12, atol=1e-12)


# -- dtypes and inputs ----------------------------------------------------------------
def test_real_input_to_a_complex_transform():
    # numpy's fft takes real inputs (array_api_strict's refuses them, as the standard
    # allows): the gradient is real, torch's
    xp = ad.Autodiff(np)
    for name, kw, tkw in (
        ("fft", dict(n=5), dict(n=5)),
        ("ifft", dict(norm="ortho"), dict(norm="ortho")),
        ("fftn", dict(s=(3, 3), axes=(0, 1)), dict(s=(3, 3), dim=(0, 1))),
        ("ifftn", dict(axes=(0,)), dict(dim=(0,))),
    ):
        x = np.random.default_rng(0).standard_normal((2, 4))
        g = _compare(xp, name, x, kw, tkw)
        assert g.dtype == np.float64


def test_strict_refuses_real_inputs_to_complex_transforms():
    strict = pytest.importorskip("array_api_strict")
    xp = ad.Autodiff(strict)
    x = xp.asarray(np.ones(4), requires_grad=True)
    with pytest.raises(TypeError, match="fft"):
        xp.fft.fft(x)


@pytest.mark.parametrize("name", ONE_D + N_D)
def test_complex64_keeps_single_precision(xp, name):
    x = _input(name, (3, 4), seed=2)
    x = x.astype(np.float32 if name in REAL_IN else np.complex64)
    t = xp.asarray(x, requires_grad=True)
    y = getattr(xp.fft, name)(t)
    tt = torch.tensor(x, requires_grad=True)
    ty = getattr(torch.fft, name)(tt)
    w, c = _weights(tuple(ty.shape), ty.is_complex(), 0)
    w, c = w.astype(np.float32), c.astype(np.complex64 if ty.is_complex() else np.float32)
    _loss(xp, y, xp.asarray(w), xp.asarray(c)).backward()
    _torch_loss(ty, w, c).backward()
    assert t.grad.dtype == t.dtype
    np.testing.assert_allclose(_np(t.grad), _np(tt.grad), rtol=1e-4, atol=1e-4)


def test_every_fft_op_has_a_rule():
    fft_ops = {n: op for n, op in registry.ops().items() if n.startswith("fft.")}
    assert not [n for n, op in fft_ops.items() if op.kind == registry.MISSING]
    diff = sorted(n for n, op in fft_ops.items() if op.kind == registry.DIFF)
    assert diff == sorted(f"fft.{n}" for n in ONE_D + N_D + ("fftshift", "ifftshift"))
    assert all(fft_ops[n].twice for n in diff)
