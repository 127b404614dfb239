"""Specs of the ``fft`` extension.

Every transform with ``n``/``s`` smaller and larger than the input (even and odd),
``axis``/``axes`` variants (negative, subsets, out of order), every ``norm``, and
batched inputs. The complex transforms (and irfft/hfft/irfftn) get complex inputs:
the standard (array_api_strict) takes complex inputs only there. The real-input
transforms (rfft, rfftn, ihfft) take the real part of a complex input (gradcheck's
complex mode makes every input complex; NumPy and array_api_strict refuse complex
inputs there). Each op has one "squared" sample, whose second order goes through
the recorded rule (a linear op's own second derivative is zero).
"""

from __future__ import annotations

from .common import Sample, _in, spec


def _c(rng, shape):
    return _in(rng, shape) + 1j * _in(rng, shape)


def _re(xp, a):
    """The real part of a complex input (the standard's real-input transforms)."""
    return xp.real(a) if xp.isdtype(a.dtype, "complex floating") else a


def _label(kw):
    return ", ".join(f"{k}={v}" for k, v in kw.items()) or "defaults"


def _samples(name, make, cases, real_input=False):
    """One sample per (input shape, keyword arguments) of ``cases``; the last one also
    squared (``y * y``)."""

    def samples(rng):
        out = []
        for shape, kw in cases:

            def call(xp, a, kw=kw):
                return getattr(xp.fft, name)(_re(xp, a) if real_input else a, **kw)

            out.append(Sample((make(rng, shape),), call, f"{shape}, {_label(kw)}"))
        shape, kw = cases[-1]

        def squared(xp, a, kw=kw):
            y = getattr(xp.fft, name)(_re(xp, a) if real_input else a, **kw)
            return y * y

        out.append(Sample((make(rng, shape),), squared, f"{shape}, {_label(kw)}, squared"))
        return out

    spec(f"fft.{name}", samples)


# input length 6 (or 5) along the transformed axis: n smaller and larger, even and odd
ONE_D = [
    ((6,), {}),
    ((6,), {"n": 4, "norm": "ortho"}),
    ((6,), {"n": 9, "norm": "forward"}),
    ((6,), {"n": 3}),
    ((2, 5), {"axis": 0, "n": 4, "norm": "ortho"}),
    ((2, 3, 5), {"axis": -2, "n": 2, "norm": "forward"}),
    ((2, 5), {"n": 8}),
]
# irfft/hfft: the kept bins n//2 + 1 of an input of length 6: the default (n = 10,
# even: a Nyquist bin), cropped (n = 3, 4, 7) and zero-padded (n = 12, 13)
HALF = [
    ((6,), {}),
    ((6,), {"n": 3, "norm": "ortho"}),
    ((6,), {"n": 4, "norm": "forward"}),
    ((6,), {"n": 12}),
    ((6,), {"n": 13, "norm": "ortho"}),
    ((2, 5), {"axis": 0, "n": 7, "norm": "forward"}),
    ((2, 4, 3), {"axis": -2, "norm": "ortho"}),
    ((2, 5), {"n": 9}),
]
N_D = [
    ((3, 4), {}),
    ((3, 4), {"s": (2, 6), "axes": (0, 1), "norm": "ortho"}),
    ((3, 4), {"axes": (0,), "norm": "forward"}),
    ((2, 3, 4), {"s": (3, 3), "axes": (-1, 0)}),
    ((2, 3, 4), {"axes": (-2, -1), "norm": "ortho"}),
    ((2, 3, 4), {"s": (4, 2, 5), "axes": (0, 1, 2), "norm": "forward"}),
    ((3, 4), {"s": (5, 3), "axes": (1, 0)}),
]
# irfftn: the last axis given is the real one: default (2 * (4 - 1) = 6), cropped
# (s[-1] = 5: 3 bins) and zero-padded (s[-1] = 8: 5 bins)
HALF_N = [
    ((3, 4), {}),
    ((3, 4), {"s": (2, 5), "axes": (0, 1), "norm": "ortho"}),
    ((3, 4), {"s": (4, 8), "axes": (0, 1), "norm": "forward"}),
    ((3, 4), {"axes": (0,)}),
    ((2, 3, 4), {"s": (3, 4), "axes": (2, 0), "norm": "ortho"}),
    ((2, 3, 4), {"axes": (-3, -1), "norm": "forward"}),
    ((3, 4), {"s": (2, 7), "axes": (0, 1)}),
]

for _name in ("fft", "ifft"):
    _samples(_name, _c, ONE_D)
for _name in ("rfft", "ihfft"):
    _samples(_name, _in, ONE_D, real_input=True)
for _name in ("irfft", "hfft"):
    _samples(_name, _c, HALF)
for _name in ("fftn", "ifftn"):
    _samples(_name, _c, N_D)
_samples("rfftn", _in, N_D, real_input=True)
_samples("irfftn", _c, HALF_N)

spec(
    "fft.fftshift",
    lambda rng: [Sample((_in(rng, (5,)),), lambda xp, a: xp.fft.fftshift(a), "odd length")],
)
spec(
    "fft.ifftshift",
    lambda rng: [
        Sample((_in(rng, (2, 4)),), lambda xp, a: xp.fft.ifftshift(a, axes=(1,)), "axes=1")
    ],
)
