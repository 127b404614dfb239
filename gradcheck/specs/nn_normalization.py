"""Specs of the extension ops: normalization."""

from __future__ import annotations

from autodiff.nn import functional as F

from .common import Sample, _in, spec


def _layer_norm_samples(rng):
    out = []
    for shape, norm in (((2, 5), (5,)), ((2, 2, 3), (2, 3))):
        x = _in(rng, shape) * 2
        w, b = _in(rng, norm, 0.5, 1.5), _in(rng, norm)
        out.append(
            Sample(
                (x, w, b),
                lambda xp, a, w, b, n=norm: F.layer_norm(a, n, w, b),
                f"{shape} over {norm}",
            )
        )
        out.append(
            Sample(
                (x,), lambda xp, a, n=norm: F.layer_norm(a, n), f"{shape} over {norm}, no affine"
            )
        )
    return out


spec("nn.layer_norm", _layer_norm_samples)
spec("nn.embedding", lambda rng: [
    Sample((_in(rng, (5, 3)),), lambda xp, w: F.embedding(xp.asarray([[1, 1], [4, 0]]), w), "repeated rows"),
    # padding rows get no gradient by convention: the check masks their outputs out
    Sample((_in(rng, (5, 3)),), lambda xp, w: F.embedding(xp.asarray([2, 0, 2, 3]), w, padding_idx=2)
           * xp.asarray([[0.0], [1.0], [0.0], [1.0]]), "padding_idx (masked)"),
])  # fmt: skip
spec("nn.dropout", lambda rng: [
    Sample((_in(rng, (3, 4)),), lambda xp, a: F.dropout(a, 0.3, seed=7), "p=0.3, fixed seed"),
    Sample((_in(rng, (3, 4)),), lambda xp, a: F.dropout(a, 0.5, training=False) * 1.0, "eval: identity"),
])  # fmt: skip
