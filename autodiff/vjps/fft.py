"""The ``fft`` extension: complex-valued, so no rules yet (real inputs to the
shifts excepted). Calling a transform on a tensor that requires grad raises."""

from __future__ import annotations

from ..registry import CONST, defop
from ._util import missing

missing(
    "fft",
    *(f"fft.{n}" for n in ("fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn",
                           "irfftn", "hfft", "ihfft")),
)  # fmt: skip
defop("fft.fftfreq", chapter="fft", kind=CONST, style="creation")
defop("fft.rfftfreq", chapter="fft", kind=CONST, style="creation")
defop(
    "fft.fftshift",
    lambda xp, g, ans, x, *, axes=None: xp.fft.ifftshift(g, axes=axes),
    chapter="fft",
    saves=(),
)
defop(
    "fft.ifftshift",
    lambda xp, g, ans, x, *, axes=None: xp.fft.fftshift(g, axes=axes),
    chapter="fft",
    saves=(),
)
