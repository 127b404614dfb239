"""Specs of the extension ops: activations and losses."""

from __future__ import annotations

from autodiff.nn import functional as F

from . import Sample, _away, spec

spec("nn.relu", lambda rng: [Sample((_away(rng, s),), lambda xp, a: F.relu(a), f"shape={s}")
                             for s in ((), (4,), (2, 3))])  # fmt: skip
