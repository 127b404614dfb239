"""Specs of the extension ops: the further losses (nll, cross-entropy with probability
targets, L1, Huber, smooth L1, KL divergence, binary cross-entropy), similarity
(cosine_similarity, normalize) and padding."""

from __future__ import annotations

import numpy as np

from autodiff.nn import functional as F

from .common import Sample, _away, _in, spec

_REDS = ("mean", "sum", "none")
_T = np.array([1, 4, -100, 0])
_T3 = np.array([[0, 2, 1], [2, 1, 0]])


def _nll_samples(rng):
    out = [
        Sample((_in(rng, (4, 5)),), lambda xp, a, r=r: F.nll_loss(a, xp.asarray(_T), reduction=r),
               f"(N, C), {r}")
        for r in _REDS
    ]  # fmt: skip
    out += [
        Sample((_in(rng, (4, 5)), _in(rng, (5,), 0.5, 2.0)),
               lambda xp, a, w, r=r: F.nll_loss(a, xp.asarray(_T), w, reduction=r),
               f"(N, C), weight, {r}")
        for r in _REDS
    ]  # fmt: skip
    out.append(Sample((_in(rng, (2, 3, 3)), _in(rng, (3,), 0.5, 2.0)),
                      lambda xp, a, w: F.nll_loss(a, xp.asarray(_T3), w, ignore_index=1),
                      "(N, C, d), weight, ignore_index in range"))  # fmt: skip
    return out


def _soft(rng, shape):
    p = np.exp(_in(rng, shape))
    return p / p.sum(axis=1, keepdims=True)


def _ce_probs_samples(rng):
    out = []
    for r in _REDS:
        for ls in (0.0, 0.1):
            out.append(Sample((_in(rng, (3, 4)) * 2, _soft(rng, (3, 4))),
                              lambda xp, a, p, r=r, ls=ls: F.cross_entropy(a, p, reduction=r, label_smoothing=ls),
                              f"(N, C), {r}, smoothing {ls}"))  # fmt: skip
    out.append(Sample((_in(rng, (2, 3, 2)) * 2, _soft(rng, (2, 3, 2)), _in(rng, (3,), 0.5, 2.0)),
                      lambda xp, a, p, w: F.cross_entropy(a, p, w, label_smoothing=0.2),
                      "(N, C, d), weight, smoothing 0.2"))  # fmt: skip
    return out


def _pair(rng, shape):
    """(input, target) whose differences keep away from the kinks (|d| = 0, 0.7, 1)."""
    d = rng.choice([-1.6, -1.3, -0.5, -0.3, 0.3, 0.5, 1.3, 1.6], size=shape)
    d = d + rng.uniform(-0.05, 0.05, size=shape)
    x = _in(rng, shape)
    return x, x - d


def _elementwise_loss(name, f, extra=()):
    def make(rng):
        out = [Sample(_pair(rng, (2, 3)), lambda xp, a, b, r=r: f(a, b, r), f"reduction={r}")
               for r in _REDS]  # fmt: skip
        for label, g in extra:
            out.append(Sample(_pair(rng, (2, 3)), lambda xp, a, b, g=g: g(a, b), label))
        return out

    spec(name, make)


_elementwise_loss("nn.l1_loss", lambda a, b, r: F.l1_loss(a, b, reduction=r))
_elementwise_loss("nn.huber_loss", lambda a, b, r: F.huber_loss(a, b, reduction=r),
                  [("delta 0.7", lambda a, b: F.huber_loss(a, b, delta=0.7))])  # fmt: skip
_elementwise_loss("nn.smooth_l1_loss", lambda a, b, r: F.smooth_l1_loss(a, b, reduction=r),
                  [("beta 0.7", lambda a, b: F.smooth_l1_loss(a, b, beta=0.7)),
                   ("beta 0 (L1)", lambda a, b: F.smooth_l1_loss(a, b, beta=0.0))])  # fmt: skip


def _kl_samples(rng):
    out = []
    for r in _REDS + ("batchmean",):
        out.append(Sample((_in(rng, (2, 3)), _in(rng, (2, 3), 0.2, 1.0)),
                          lambda xp, a, t, r=r: F.kl_div(a, t, reduction=r), f"{r}"))  # fmt: skip
        out.append(Sample((_in(rng, (2, 3)), _in(rng, (2, 3))),
                          lambda xp, a, t, r=r: F.kl_div(a, t, reduction=r, log_target=True),
                          f"{r}, log_target"))  # fmt: skip
    return out


spec("nn.kl_div", _kl_samples)


def _bce_samples(rng):
    out = [Sample((_in(rng, (2, 3), 0.1, 0.9), _in(rng, (2, 3), 0.0, 1.0)),
                  lambda xp, x, y, r=r: F.binary_cross_entropy(x, y, reduction=r), f"reduction={r}")
           for r in _REDS]  # fmt: skip
    out.append(Sample((_in(rng, (2, 3), 0.1, 0.9), _in(rng, (2, 3), 0.0, 1.0), _in(rng, (3,), 0.5, 2.0)),
                      lambda xp, x, y, w: F.binary_cross_entropy(x, y, w), "weight (3,)"))  # fmt: skip
    return out


spec("nn.binary_cross_entropy", _bce_samples)
spec("nn.cosine_similarity", lambda rng: [
    Sample((_in(rng, (3, 4)), _in(rng, (3, 4))), lambda xp, a, b: F.cosine_similarity(a, b), "axis=1"),
    Sample((_in(rng, (2, 3, 4)), _in(rng, (4,))), lambda xp, a, b: F.cosine_similarity(a, b, axis=-1), "broadcast, axis=-1"),
    Sample((_in(rng, (2, 3)), _in(rng, (2, 3))), lambda xp, a, b: F.cosine_similarity(a, b, axis=0), "axis=0"),
])  # fmt: skip
spec("nn.normalize", lambda rng: [
    Sample((_away(rng, (3, 4)),), lambda xp, a, p=p: F.normalize(a, p=p), f"p={p}")
    for p in (2.0, 1.0, 3.0)
] + [Sample((_in(rng, (2, 3, 2)),), lambda xp, a: F.normalize(a, axis=-1), "axis=-1")])  # fmt: skip


def _pad_samples(rng):
    out = []
    for mode in ("constant", "reflect", "replicate", "circular"):
        out.append(Sample((_in(rng, (2, 4)),), lambda xp, a, m=mode: F.pad(a, (2, 1), mode=m),
                          f"{mode}, last axis"))  # fmt: skip
        out.append(Sample((_in(rng, (1, 2, 3, 4)),), lambda xp, a, m=mode: F.pad(a, (1, 2, 2, 1), mode=m),
                          f"{mode}, two axes"))  # fmt: skip
    out.append(Sample((_in(rng, (2, 3, 4)),), lambda xp, a: F.pad(a, (-1, 2, 1, 0, 0, 1), value=0.5),
                      "constant value 0.5, negative pad"))  # fmt: skip
    return out


spec("nn.pad", _pad_samples)
spec("nn.nll_loss", _nll_samples)
spec("nn.cross_entropy_probs", _ce_probs_samples)
