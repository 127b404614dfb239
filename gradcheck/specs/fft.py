"""Specs of the ``fft`` extension."""

from __future__ import annotations

from .common import Sample, _in, spec

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
