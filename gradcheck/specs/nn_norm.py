"""Specs of the extension ops: batch norm, group norm and RMS norm."""

from __future__ import annotations

from autodiff.nn import functional as F

from .common import Sample, _in, spec


def _batch_norm_samples(rng):
    out = []
    for shape in ((4, 3), (3, 2, 4), (2, 3, 2, 2)):
        c = shape[1]
        x = _in(rng, shape) * 2
        w, b = _in(rng, (c,), 0.5, 1.5), _in(rng, (c,))
        m, v = _in(rng, (c,)), _in(rng, (c,), 0.5, 1.5)
        out += [
            Sample((x, w, b), lambda xp, a, w, b: F.batch_norm(a, None, None, w, b, True),
                   f"{shape} training"),
            Sample((x,), lambda xp, a: F.batch_norm(a, None, None, training=True, eps=0.1),
                   f"{shape} training, no affine"),
            Sample((x, w, b, m, v), lambda xp, a, w, b, m, v: F.batch_norm(a, m, v, w, b),
                   f"{shape} eval (running stats differentiated)"),
        ]  # fmt: skip
    return out


def _group_norm_samples(rng):
    out = []
    for shape, groups in (((2, 4), 2), ((2, 6, 3), 3), ((2, 4, 2, 3), 1), ((1, 4, 3), 4)):
        c = shape[1]
        x = _in(rng, shape) * 2
        w, b = _in(rng, (c,), 0.5, 1.5), _in(rng, (c,))
        out += [
            Sample((x, w, b), lambda xp, a, w, b, n=groups: F.group_norm(a, n, w, b),
                   f"{shape}, {groups} groups"),
            Sample((x,), lambda xp, a, n=groups: F.group_norm(a, n, eps=0.1),
                   f"{shape}, {groups} groups, no affine"),
        ]  # fmt: skip
    return out


def _rms_norm_samples(rng):
    out = []
    for shape, norm in (((2, 5), (5,)), ((2, 2, 3), (2, 3))):
        x = _in(rng, shape) * 2
        w = _in(rng, norm, 0.5, 1.5)
        out += [
            Sample((x, w), lambda xp, a, w, n=norm: F.rms_norm(a, n, w), f"{shape} over {norm}"),
            Sample((x,), lambda xp, a, n=norm: F.rms_norm(a, n, eps=0.01),
                   f"{shape} over {norm}, no weight"),
        ]  # fmt: skip
    return out


spec("nn.batch_norm", _batch_norm_samples)
spec("nn.group_norm", _group_norm_samples)
spec("nn.rms_norm", _rms_norm_samples)
