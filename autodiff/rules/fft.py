"""The ``fft`` extension: every transform has a rule.

All transforms are linear, so a rule is the transpose of the op itself (JAX's
convention, the pairing ``Re(ct * dz)``; see registry.py): the DFT matrix is
symmetric, so the rule of ``fft(x, n)`` is ``fft(g)`` along the same axis (same
``norm``) followed by the transpose of the crop/zero-pad that fitted ``x`` to
length ``n`` (a zero-pad/crop back to ``x``'s length).

The real transforms keep half a spectrum:

- ``rfft(x, n)`` keeps the first ``n//2 + 1`` rows of the complex DFT: its
  transpose zero-pads ``g`` back to ``n`` (``fft(g, n=n)``), and the real input
  keeps the real part (the backward pass does that centrally).
- ``irfft(X, n)`` is ``y_t = scale * Re(sum_k w_k X_k e^{+2 pi i k t / n})`` over
  ``k = 0 .. n//2`` with ``w_0 = 1``, ``w_{n/2} = 1`` when ``n`` is even and
  ``w_k = 2`` otherwise (the imaginary parts of the DC and Nyquist bins are
  ignored): its transpose is ``w_k * ifft(g)[k]``, computed for the real ``g`` as
  ``conj(rfft(g))`` with the opposite normalization (half the work).
- NumPy's ``hfft(a, n, norm) = irfft(conj(a), n, norm=swapped)`` and
  ``ihfft(a, n, norm) = conj(rfft(a, n, norm=swapped))``; the transpose of ``conj``
  is ``conj``.

Rules read only the input's shape (``saves=()``) and the cotangent's: the
output's length along a transformed axis is ``g``'s. They are written with the
standard's functions only, so under ``create_graph=True`` they are recorded and
differentiate again (second order of a linear op).
"""

from __future__ import annotations

from ..backends import device_of
from ..engine.registry import CONST, defop
from .batch_rules import axes_with_shape, axis

CH = "fft"
_SWAP = {"backward": "forward", "forward": "backward", "ortho": "ortho", None: "forward"}


def _swap(norm):
    """The normalization of the opposite direction (``forward`` <-> ``backward``)."""
    return _SWAP[norm]


def _axis(axis, ndim):
    return axis % ndim if ndim else axis


def _axes(ndim, s, axes):
    """The transformed axes of an n-dimensional transform, non-negative, in the order
    given (the last one is the real transform's axis of rfftn/irfftn)."""
    if axes is None:
        axes = range(ndim) if s is None else range(ndim - len(s), ndim)
    return tuple(_axis(a, ndim) for a in axes)


def _fit(xp, a, axis, m):
    """``a`` cropped or zero-padded at the end of ``axis`` to length ``m``."""
    k = a.shape[axis]
    if k == m:
        return a
    if k > m:
        return a[(slice(None),) * axis + (slice(0, m), ...)]
    shape = a.shape[:axis] + (m - k,) + a.shape[axis + 1 :]
    return xp.concat([a, xp.zeros(shape, dtype=a.dtype, device=device_of(a))], axis=axis)


def _fit_all(xp, a, axes, shape):
    for ax in axes:
        a = _fit(xp, a, ax, shape[ax])
    return a


def _hermitian_weights(xp, c, axis, n, dtype):
    """``c`` (the first ``n//2 + 1`` bins along ``axis``) times the weights of irfft's
    sum: 1 for the DC bin (and the Nyquist bin of an even ``n``), 2 for the others
    (``dtype``: the real dtype of ``c``'s precision)."""
    half = n // 2 + 1
    w = [1.0] + [2.0] * (half - 1)
    if n % 2 == 0 and half > 1:
        w[-1] = 1.0
    w = xp.asarray(w, dtype=dtype, device=device_of(c))
    return c * xp.reshape(w, (half,) + (1,) * (c.ndim - 1 - axis))


def _n_of(n, m):
    """A transform length argument (None or -1: the input's length ``m``)."""
    return m if n is None or n == -1 else n


# -- complex to complex ---------------------------------------------------------------
def _fft(xp, g, ans, x, *, n=None, axis=-1, norm="backward"):
    axis = _axis(axis, x.ndim)
    return _fit(xp, xp.fft.fft(g, axis=axis, norm=norm), axis, x.shape[axis])


def _ifft(xp, g, ans, x, *, n=None, axis=-1, norm="backward"):
    axis = _axis(axis, x.ndim)
    return _fit(xp, xp.fft.ifft(g, axis=axis, norm=norm), axis, x.shape[axis])


def _fftn(xp, g, ans, x, *, s=None, axes=None, norm="backward"):
    axes = _axes(x.ndim, s, axes)
    return _fit_all(xp, xp.fft.fftn(g, axes=axes, norm=norm), axes, x.shape)


def _ifftn(xp, g, ans, x, *, s=None, axes=None, norm="backward"):
    axes = _axes(x.ndim, s, axes)
    return _fit_all(xp, xp.fft.ifftn(g, axes=axes, norm=norm), axes, x.shape)


# -- real to half spectrum ------------------------------------------------------------
def _rfft(xp, g, ans, x, *, n=None, axis=-1, norm="backward"):
    axis = _axis(axis, x.ndim)
    m = x.shape[axis]
    full = xp.fft.fft(g, n=_n_of(n, m), axis=axis, norm=norm)  # zero-pads g to n
    return _fit(xp, full, axis, m)


def _rfftn(xp, g, ans, x, *, s=None, axes=None, norm="backward"):
    axes = _axes(x.ndim, s, axes)
    last = axes[-1]
    n = x.shape[last] if s is None else _n_of(s[-1], x.shape[last])
    sizes = [g.shape[a] for a in axes[:-1]] + [n]
    full = xp.fft.fftn(g, s=sizes, axes=axes, norm=norm)  # zero-pads the last axis to n
    return _fit_all(xp, full, axes, x.shape)


def _ihfft(xp, g, ans, x, *, n=None, axis=-1, norm="backward"):
    axis = _axis(axis, x.ndim)
    m = x.shape[axis]
    full = xp.fft.fft(xp.conj(g), n=_n_of(n, m), axis=axis, norm=_swap(norm))
    return _fit(xp, full, axis, m)


# -- half spectrum to real ------------------------------------------------------------
def _irfft(xp, g, ans, x, *, n=None, axis=-1, norm="backward"):
    axis = _axis(axis, x.ndim)
    n = g.shape[axis]
    c = xp.conj(xp.fft.rfft(g, axis=axis, norm=_swap(norm)))  # = ifft(g)[: n//2 + 1]
    return _fit(xp, _hermitian_weights(xp, c, axis, n, g.dtype), axis, x.shape[axis])


def _irfftn(xp, g, ans, x, *, s=None, axes=None, norm="backward"):
    axes = _axes(x.ndim, s, axes)
    last = axes[-1]
    c = xp.conj(xp.fft.rfftn(g, axes=axes, norm=_swap(norm)))  # = ifftn(g), half the last axis
    return _fit_all(xp, _hermitian_weights(xp, c, last, g.shape[last], g.dtype), axes, x.shape)


def _hfft(xp, g, ans, x, *, n=None, axis=-1, norm="backward"):
    axis = _axis(axis, x.ndim)
    c = xp.fft.rfft(g, axis=axis, norm=norm)  # conj of irfft's rule at the swapped norm
    return _fit(xp, _hermitian_weights(xp, c, axis, g.shape[axis], g.dtype), axis, x.shape[axis])


# batching: the transformed axis (axes) shifted past the batch axis; the n-D ones'
# axes=None means the last len(s) axes of one example
_ONE, _SOME = axis(default=-1), axes_with_shape()
for _name, _rule, _batch in (
    ("fft", _fft, _ONE),
    ("ifft", _ifft, _ONE),
    ("fftn", _fftn, _SOME),
    ("ifftn", _ifftn, _SOME),
    ("rfft", _rfft, _ONE),
    ("irfft", _irfft, _ONE),
    ("rfftn", _rfftn, _SOME),
    ("irfftn", _irfftn, _SOME),
    ("hfft", _hfft, _ONE),
    ("ihfft", _ihfft, _ONE),
):
    defop(f"fft.{_name}", _rule, chapter=CH, saves=(), linear=True, batch=_batch)

defop("fft.fftfreq", chapter=CH, kind=CONST, style="creation")
defop("fft.rfftfreq", chapter=CH, kind=CONST, style="creation")
defop(
    "fft.fftshift",
    lambda xp, g, ans, x, *, axes=None: xp.fft.ifftshift(g, axes=axes),
    chapter=CH,
    saves=(),
    linear=True,
    batch=axis(name="axes"),
)
defop(
    "fft.ifftshift",
    lambda xp, g, ans, x, *, axes=None: xp.fft.fftshift(g, axes=axes),
    chapter=CH,
    saves=(),
    linear=True,
    batch=axis(name="axes"),
)
