"""Data type functions, and moving between devices. ``astype`` passes the
gradient back (cast to the input's dtype centrally)."""

from __future__ import annotations

from ..backends import device_of
from ..engine.registry import defop
from ._util import nondiff
from .batch_rules import leading, passthrough


def _astype_public(f, rec):
    def astype(x, dtype, /, *, copy=True, device=None):
        if device is not None and device != device_of(x):
            x = rec.xp.to_device(x, device)
        return f(x, dtype, copy=copy)

    return astype


def _to_device_public(f, rec):
    def to_device(x, device, /, *, stream=None):
        return f(x, device, stream=stream, source=device_of(x))

    return to_device


defop(
    "astype",
    lambda xp, g, ans, x, dtype, *, copy=True: g,
    chapter="data_types",
    saves=(),
    public=_astype_public,
    linear=True,
    batch=leading,
)
defop(
    "to_device",
    lambda xp, g, ans, x, device, *, stream=None, source=None: xp.to_device(g, source),
    chapter="data_types",
    impl=lambda B: (
        lambda x, device, stream=None, source=None: B.to_device(x, device, stream=stream)
    ),
    public=_to_device_public,
    saves=(),
    linear=True,
    batch=leading,
    doc="x.to_device(device): the gradient moves back to x's device",
)
# no array result, or one that doesn't depend on the values: the op itself
nondiff("data_types", "can_cast", "finfo", "iinfo", "isdtype", "result_type", batch=passthrough)
