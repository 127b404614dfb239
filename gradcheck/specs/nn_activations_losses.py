"""Specs of the extension ops: activations and losses."""

from __future__ import annotations

import numpy as np

from autodiff.nn import functional as F

from .common import Sample, _away, _in, spec

spec("nn.relu", lambda rng: [Sample((_away(rng, s),), lambda xp, a: F.relu(a), f"shape={s}")
                             for s in ((), (4,), (2, 3))])  # fmt: skip


def _activation(name, call, values=_in, shapes=((), (4,), (2, 3))):
    spec(name, lambda rng: [Sample((values(rng, s),), call, f"shape={s}") for s in shapes])


_activation("nn.sigmoid", lambda xp, a: F.sigmoid(a * 4.0))
_activation("nn.silu", lambda xp, a: F.silu(a * 3.0))
spec("nn.softplus", lambda rng: [
    Sample((_in(rng, (2, 3)) * 3,), lambda xp, a: F.softplus(a), "default"),
    Sample((_in(rng, (2, 3)) * 3,), lambda xp, a: F.softplus(a, beta=2.0, threshold=1.5), "beta 2, threshold 1.5"),
])  # fmt: skip
spec("nn.gelu", lambda rng: [
    Sample((_in(rng, (2, 4)) * 4,), lambda xp, a: F.gelu(a), "exact"),
    Sample((_in(rng, (2, 4)) * 4,), lambda xp, a: F.gelu(a, approximate="tanh"), "tanh"),
    Sample((_in(rng, (5,)) * 0.5 + np.array([-5.0, -2.5, 0.0, 2.5, 5.0]),), lambda xp, a: F.gelu(a), "both erf pieces"),
])  # fmt: skip


def _softmax_like(name, f):
    def make(rng):
        x = _in(rng, (2, 3, 4)) * 2
        out = [Sample((x,), lambda xp, a, ax=ax: f(a, ax), f"axis={ax}") for ax in (-1, 0, 1)]
        out.append(Sample((_in(rng, (5,)),), lambda xp, a: f(a, -1), "1-D"))
        # a -inf entry (not differentiated: added as a constant mask)
        mask = np.array([[0.0, -np.inf, 0.0], [0.0, 0.0, 0.0]])
        out.append(
            Sample((_in(rng, (2, 3)),), lambda xp, a: f(a + xp.asarray(mask), -1), "a -inf entry")
        )
        return out

    spec(name, make)


_softmax_like("nn.softmax", lambda a, ax: F.softmax(a, axis=ax))


def _finite_log_softmax(a, ax):
    """log_softmax with its -inf outputs zeroed, so the check sums finite values."""
    out = F.log_softmax(a, axis=ax)
    xp = out.__array_namespace__()
    return xp.where(xp.isinf(out), xp.zeros_like(out), out)


_softmax_like("nn.log_softmax", _finite_log_softmax)
spec("nn.logsumexp", lambda rng: [
    Sample((_in(rng, (2, 3, 4)) * 2,), lambda xp, a, ax=ax, k=k: F.logsumexp(a, axis=ax, keepdims=k), f"axis={ax}, keepdims={k}")
    for ax in (None, 1, (0, 2)) for k in (False, True)
])  # fmt: skip


def _ce_samples(rng):
    t1 = np.array([1, 4, -100, 0])
    t2 = np.array([[0, 2, 1], [2, -100, 0]])
    out = []
    for red in ("mean", "sum", "none"):
        for ls in (0.0, 0.1):
            out.append(
                Sample(
                    (_in(rng, (4, 5)) * 2,),
                    lambda xp, a, red=red, ls=ls: F.cross_entropy(
                        a, xp.asarray(t1), reduction=red, label_smoothing=ls
                    ),
                    f"(N, C), {red}, smoothing {ls}",
                )
            )
    out.append(
        Sample(
            (_in(rng, (2, 3, 3)) * 2,),
            lambda xp, a: F.cross_entropy(a, xp.asarray(t2)),
            "(N, C, d), ignore_index",
        )
    )
    return out


spec("nn.cross_entropy", _ce_samples)
spec("nn.mse_loss", lambda rng: [
    Sample((_in(rng, (2, 3)), _in(rng, (2, 3))), lambda xp, a, b, r=r: F.mse_loss(a, b, reduction=r), f"reduction={r}")
    for r in ("mean", "sum", "none")
])  # fmt: skip


def _bce_samples(rng):
    out = []
    for red in ("mean", "sum", "none"):
        out.append(Sample((_in(rng, (2, 3)) * 3, _in(rng, (2, 3), 0.0, 1.0)),
                          lambda xp, x, y, red=red: F.binary_cross_entropy_with_logits(x, y, reduction=red),
                          f"reduction={red}"))  # fmt: skip
    out.append(Sample((_in(rng, (2, 3)) * 3, _in(rng, (2, 3), 0.0, 1.0), _in(rng, (2, 3), 0.5, 2.0), _in(rng, (3,), 0.5, 3.0)),
                      lambda xp, x, y, w, p: F.binary_cross_entropy_with_logits(x, y, weight=w, pos_weight=p),
                      "weight and pos_weight"))  # fmt: skip
    return out


spec("nn.binary_cross_entropy_with_logits", _bce_samples)

spec("nn.linear", lambda rng: [
    Sample((_in(rng, (4, 3)), _in(rng, (2, 3)), _in(rng, (2,))), lambda xp, x, w, b: F.linear(x, w, b), "batch"),
    Sample((_in(rng, (2, 4, 3)), _in(rng, (5, 3))), lambda xp, x, w: F.linear(x, w), "3-D input, no bias"),
    Sample((_in(rng, (3,)), _in(rng, (2, 3)), _in(rng, (2,))), lambda xp, x, w, b: F.linear(x, w, b), "1-D input"),
])  # fmt: skip
_activation("nn.leaky_relu", lambda xp, a: F.leaky_relu(a, 0.2), values=_away)
_activation("nn.elu", lambda xp, a: F.elu(a * 2.0, alpha=0.7), values=_away)
_activation("nn.mish", lambda xp, a: F.mish(a * 3.0))
_activation(
    "nn.hardswish",
    lambda xp, a: F.hardswish(a * 2.5 + 1.5 * xp.sign(a)),
    values=_away,
)
