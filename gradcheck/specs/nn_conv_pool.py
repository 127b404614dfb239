"""Specs of the extension ops: conv and pool."""

from __future__ import annotations

import numpy as np

from autodiff.engine.namespace import recorder_of
from autodiff.nn import functional as F

from .common import Sample, _in, spec


def _conv(rng):
    x = _in(rng, (1, 2, 4, 5))
    out = []
    for kw, wshape in ((dict(padding=1), (2, 2, 2, 2)), (dict(stride=2, dilation=2), (2, 1, 2, 2)),
                       (dict(padding="same", groups=2), (2, 1, 3, 2))):  # fmt: skip
        g = kw.get("groups", 2 if wshape[1] == 1 else 1)
        kw = {**kw, "groups": g}
        out.append(Sample((x, _in(rng, wshape), _in(rng, (2,))),
                          lambda xp, a, w, b, kw=kw: F.conv2d(a, w, b, **kw), f"{kw}"))  # fmt: skip
    out.append(Sample((x, _in(rng, (3, 2, 2, 3))), lambda xp, a, w: F.conv2d(a, w, stride=(2, 1)),
                      "no bias, stride (2, 1), floors"))  # fmt: skip
    # stride 1 (input gradient on full-width rows), batch 2, dilation and uneven padding
    out.append(Sample((_in(rng, (2, 2, 4, 5)), _in(rng, (3, 2, 2, 3))),
                      lambda xp, a, w: F.conv2d(a, w, padding=(2, 1), dilation=(2, 1)),
                      "batch 2, padding (2, 1), dilation (2, 1)"))  # fmt: skip
    return out


def _conv_t(rng):
    x = _in(rng, (1, 2, 3, 2))
    return [
        Sample((x, _in(rng, (2, 2, 2, 2)), _in(rng, (2,))),
               lambda xp, a, w, b: F.conv_transpose2d(a, w, b, stride=2, padding=1, output_padding=1), "stride 2, padding 1, output_padding 1"),
        Sample((x, _in(rng, (2, 1, 2, 2))), lambda xp, a, w: F.conv_transpose2d(a, w, groups=2, dilation=2), "groups 2, dilation 2"),
    ]  # fmt: skip


def _distinct_image(rng, shape):
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) + rng.uniform(0.1, 0.4, shape)) / n


spec("nn.conv2d", _conv)
spec("nn.conv_transpose2d", _conv_t)
spec("nn.max_pool2d", lambda rng: [
    Sample((_distinct_image(rng, (1, 2, 4, 5)),), lambda xp, a: F.max_pool2d(a, 2), "2x2"),
    Sample((_distinct_image(rng, (1, 1, 5, 5)),), lambda xp, a: F.max_pool2d(a, 3, stride=2, padding=1, ceil_mode=True), "padding, ceil_mode"),
    Sample((_distinct_image(rng, (1, 1, 5, 6)),), lambda xp, a: F.max_pool2d(a, (2, 3), dilation=2), "dilation 2"),
])  # fmt: skip
spec("nn.avg_pool2d", lambda rng: [
    Sample((_in(rng, (1, 2, 4, 5)),), lambda xp, a: F.avg_pool2d(a, 2), "2x2"),
    Sample((_in(rng, (1, 1, 5, 5)),), lambda xp, a: F.avg_pool2d(a, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False), "padding excluded, ceil_mode"),
])  # fmt: skip


def _ops(t):
    """The recording namespace of ``t``: it holds the kernel ops, which the user's
    namespace doesn't."""
    return recorder_of(t).xp


spec(
    "pad2d",
    lambda rng: [
        Sample(
            (_in(rng, (1, 2, 3, 2)),),
            lambda xp, a: _ops(a).pad2d(a, pads=(1, 0, 2, 1), value=0.5),
            "value 0.5",
        )
    ],
)
spec(
    "windows2d",
    lambda rng: [
        Sample(
            (_in(rng, (1, 1, 4, 5)),),
            lambda xp, a: _ops(a).windows2d(
                a, kernel=(2, 2), stride=(2, 1), dilation=(1, 2), out=(2, 3)
            ),
            "stride, dilation",
        )
    ],
)
spec(
    "col2im2d",
    lambda rng: [
        Sample(
            (_in(rng, (1, 1, 2, 2, 2, 3)),),
            lambda xp, a: _ops(a).col2im2d(a, size=(4, 5), stride=(2, 1), dilation=(1, 2)),
            "stride, dilation",
        )
    ],
)
