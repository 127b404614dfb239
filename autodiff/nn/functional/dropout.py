"""Dropout: one registered op, and the source of its masks."""

from __future__ import annotations

import threading

from ... import checks
from ...engine.batching import Batched, active
from ...engine.namespace import recorder_of
from ...engine.registry import defop
from ...rules.batch_rules import elementwise

__all__ = ["dropout"]

CH = "nn.normalization"  # its chapter (gradcheck --list groups it with the norms)


def _dropout_rule(xp, g, ans, x, scale):
    return g * scale


defop(
    "nn.dropout",
    _dropout_rule,
    None,
    chapter=CH,
    impl=lambda B: lambda x, scale: x * scale,
    saves=(1,),
    linear=True,  # the saved mask times the tangent
    batch=elementwise,  # x times the mask
    doc="x times a saved mask of 0 and 1 / (1 - p)",
)


def dropout(input, p=0.5, training=True, seed=None):
    """Zero each element with probability ``p`` and scale the rest by 1 / (1 - p)
    (inverted dropout); the identity when not ``training`` or ``p == 0``.

    ``seed`` (an int) makes the mask reproducible; without it each call draws a
    new one. The standard has no random numbers: the mask comes from the backend's
    ``bernoulli`` kernel: drawn by NumPy on the host and copied to the device once
    (never back), or on the device by CuPy's generator (the same seed then gives
    another mask than on NumPy). Inside ``vmap`` each example draws its own mask (as
    ``torch.func.vmap(..., randomness="different")``); with a ``seed``, each gets that
    seed's mask, as in a loop over the examples.
    """
    checks.number("dropout", "p", p, 0.0, 1.0)
    checks.flag("dropout", "training", training)
    if seed is not None:
        seed = int(checks.integer("dropout", "seed", seed, low=0))
    if not training or p == 0.0:
        return input
    return _dropout(input, p, seed, per_example=seed is None)


class _Masks(threading.local):
    """Where this thread's dropout masks come from: the backend's ``bernoulli``, or, while
    a checkpointed function runs (autodiff/transforms/checkpoint.py),
    ``draw(B, shape, keep, seed)``, which logs each mask's seed in its forward and draws
    the same mask again when it is recomputed."""

    draw = None


masks = _Masks()


def _dropout(input, p, seed, per_example=True):
    """``dropout`` while training, of checked arguments (0 < p <= 1, seed None or an int).
    ``per_example``: inside vmap, a mask per example (a module's seed is drawn afresh on
    each call, as no seed is); False for a seed the user gave, which fixes the mask of
    each example, as it fixes it in a loop over them."""
    rec = recorder_of(input)
    xp = rec.namespace
    draw = masks.draw
    # inside vmap, one mask per example (torch.func's randomness="different"): the
    # mask has an axis per running vmap, batched input or not
    running = active() if per_example else ()
    shape = tuple(size for _, size in running) + tuple(input.shape)
    if draw is None:
        keep = rec.backend.bernoulli(shape, 1.0 - p, seed)
    else:
        keep = draw(rec.backend, shape, 1.0 - p, seed)
    scale = xp.asarray(keep, dtype=input.dtype, device=input.device)
    if p < 1.0:
        scale = scale * (1.0 / (1.0 - p))
    if running:
        scale = Batched(scale, tuple(level for level, _ in running))
    return rec.xp.nn.dropout(input, scale)
