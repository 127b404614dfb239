"""Flat buffers for collectives: parameters' gradients (or values) packed into a few
contiguous 1-D arrays of ~``cap`` bytes, one collective per buffer, then unpacked.

A bucket holds parameters of one backend, dtype and device. Its buffer is allocated once
with the parameters' own backend (NumPy on the CPU, CuPy on a GPU), so nothing leaves the
device, and is reused at every step. For gradients the buffer has one extra element per
parameter, 1 where this rank has a gradient: summed over the ranks it says whether any
rank had one (a parameter no rank used keeps ``grad = None``, as without distribution).
"""

from __future__ import annotations

import math

from ..engine.versions import bump


class Bucket:
    """Parameters ``params`` at ``offsets`` in one flat ``buffer`` (+ ``flags`` slots)."""

    def __init__(self, params, flags: bool):
        self.params = params
        self.rec = params[0]._rec
        self.B = self.rec.backend
        self.sizes = [math.prod(p.data.shape) for p in params]
        self.offsets = [sum(self.sizes[:i]) for i in range(len(params))]
        self.total = sum(self.sizes)
        self.flags = flags
        n = self.total + (len(params) if flags else 0)
        first = params[0].data
        self.buffer = self.B.zeros((n,), dtype=first.dtype, device=self.B.device_of(first))

    def _slot(self, i):
        a = self.offsets[i]
        return slice(a, a + self.sizes[i])

    # -- gradients ------------------------------------------------------------------------
    def pack_grads(self) -> None:
        buf, B = self.buffer, self.B
        for i, p in enumerate(self.params):
            g = p.grad
            if g is None:
                buf[self._slot(i)] = 0
            else:
                buf[self._slot(i)] = B.reshape(g.data, (-1,))
            buf[self.total + i] = 0 if g is None else 1

    def unpack_grads(self, scale: float) -> None:
        """Write ``scale`` times the reduced sums into the gradients (in place where the
        backend writes in place; a rank that had none gets a fresh one)."""
        if scale != 1:
            self.buffer *= scale  # one pass over the buffer (rebinds on immutable arrays)
        buf, B = self.buffer, self.B
        for i, p in enumerate(self.params):
            g = p.grad
            values = B.reshape(buf[self._slot(i)], p.data.shape)
            if g is None:
                # the only read back to the host: for a parameter this rank didn't use
                if not bool(buf[self.total + i] != 0):
                    continue
                p.grad = self.rec.wrap(B.asarray(values, copy=True))
            elif g.is_leaf and _writes_in_place(g.data):
                g.data[...] = values
                bump(g)
            else:  # a gradient with history (create_graph=True), or an immutable array
                p.grad = self.rec.wrap(B.asarray(values, copy=True))

    # -- values -------------------------------------------------------------------------
    def pack_values(self) -> None:
        for i, p in enumerate(self.params):
            self.buffer[self._slot(i)] = self.B.reshape(p.data, (-1,))

    def unpack_values(self) -> None:
        B = self.B
        for i, p in enumerate(self.params):
            values = B.reshape(self.buffer[self._slot(i)], p.data.shape)
            if _writes_in_place(p.data):
                p.data[...] = values
            else:
                p.data = B.asarray(values, copy=True)
            bump(p)


def _writes_in_place(a) -> bool:
    flags = getattr(a, "flags", None)  # NumPy's read-only arrays (broadcast views...)
    return hasattr(a, "__setitem__") and (flags is None or getattr(flags, "writeable", True))


def plan(params, cap_bytes: float, flags: bool) -> list[Bucket]:
    """Buckets of ``params`` in order, a new one when the backend, dtype or device changes
    or the current one has reached ``cap_bytes``."""
    buckets, current, size, key = [], [], 0, None
    for p in params:
        d = p.data
        k = (id(p._rec), str(d.dtype), str(p._rec.backend.device_of(d)))
        if current and (k != key or size >= cap_bytes):
            buckets.append(Bucket(current, flags))
            current, size = [], 0
        current.append(p)
        size += math.prod(d.shape) * _itemsize(d)
        key = k
    if current:
        buckets.append(Bucket(current, flags))
    return buckets


def _itemsize(a) -> int:
    size = getattr(a, "itemsize", None) or getattr(a.dtype, "itemsize", None)
    return size or 8
