"""In-place writes into tensors: ``x[key] = v`` and ``x op= y``.

While recording, a write is copy-on-write when it must be: when the tensor (or
the tensor it is a view of) or the written value requires grad, or a node saved
the tensor's buffer. The new value is computed into a fresh buffer (recorded as
a node: ``__setitem__``, or the operator's op) and the tensor moves onto it, so
buffers that earlier nodes saved keep the values they saw. A write through a
view goes into its base, as in PyTorch: the base becomes ``base`` with the
view's region replaced (recorded, so gradients flow to both the base and the
written value), and every live view of the base is taken again from its new
value. Any other write goes into the buffer itself and bumps its version
counter, so nodes that saved it refuse to run (a read-only view, numpy's
``diagonal``, is written as when recording). A leaf that requires grad, and
its views, can't be written while recording: a clear error at the write.
Where the library made a copy rather than a view, a write stops at the copy;
a ``detach()`` alias writes into the buffer it shares. A buffer a transform borrowed
from its caller is copied before the first write into it (``_own``): ``f`` never
changes the arrays it is given.
"""

from __future__ import annotations

import functools

from . import batching, tracing, versions
from .errors import add_op_name
from .grad_mode import mode, no_grad
from .registry import get
from .tensor import INPLACE_OPERATORS, Tensor
from .versions import Alias, Same

__all__ = ["setitem", "inplace", "Index", "Call"]

_DUNDER = {name: dunder for dunder, name in INPLACE_OPERATORS.items()}


class Index:
    """How a view was taken: ``a[key]`` (a basic index)."""

    __slots__ = ("key",)

    def __init__(self, key):
        self.key = key

    def __call__(self, xp, a):
        return a[self.key]


class Call:
    """How a view was taken: ``xp.<name>(a, *args, **kwargs)``, output ``index`` of a
    multi-output op (``unstack``)."""

    __slots__ = ("name", "args", "kwargs", "index")

    def __init__(self, name, args, kwargs, index=None):
        self.name, self.args, self.kwargs, self.index = name, tuple(args), kwargs, index

    def __call__(self, xp, a):
        out = functools.reduce(getattr, self.name.split("."), xp)(a, *self.args, **self.kwargs)
        return out if self.index is None else out[self.index]


def _chain(t, through_alias=False):
    """The tensors ``t`` is a view of, nearest first, and how the chain ends: "root";
    "alias" at a ``detach()`` alias (unless ``through_alias``: a buffer write goes on into
    the tensor it was detached from); "copy" where the library made a copy, not a view
    (numpy's reshape of a transposed array, an integer index's scalar): a write stops
    there, as it does in the library."""
    chain = []
    may_share = t._rec.backend.may_share_memory
    while t._base is not None:
        base, how = t._base
        if how is None or (type(how) is Alias and not through_alias):
            return chain, "alias"
        if not may_share(t.data, base.data):
            return chain, "copy"
        chain.append(base)
        t = base
    return chain, "root"


def _copies(t, value):
    """Whether a write into ``t`` must give it a new buffer (see the module's docstring).
    Not for a ``detach()`` alias that nothing recorded reads: as in torch, the write goes
    into the buffer it shares (and nodes that saved it refuse to run)."""
    if not mode.enabled:
        return False
    if t._rg or (isinstance(value, Tensor) and value._rg):
        return True
    chain, end = _chain(t)
    if end == "alias":
        return False
    return versions.is_saved(t) or any(b._rg for b in chain)


def _own(t):
    """Give the family of ``t`` (its root and every live view or alias of it) a copy of
    the buffer a transform borrowed from its caller (``versions.lend``), before a first
    write into it: same values, same nodes, the caller's array untouched. No write has
    gone into the family since it was lent, so each view is taken again from its base
    (in creation order: a base before its views)."""
    c = t._version
    B = t._rec.backend
    root = t
    while root._base is not None:
        root = root._base[0]
    root.data = B.asarray(root.data, copy=True)
    for v in [r() for r in c[2]]:
        if v is None or v is root or v._base is None:
            continue
        base, how = v._base
        v.data = base.data if type(how) in (Alias, Same) else how(B, base.data)
    del c[3:]  # the family's buffer is its own now


def _check_writable(t, what):
    for i, b in enumerate([t] + _chain(t)[0]):
        if b._node is None and b._rg:
            raise RuntimeError(
                f"{what}: a leaf tensor that requires grad"
                f"{', through a view of it,' if i else ''} can't be changed in place "
                "while grad is recorded; do it under autodiff.no_grad(), or on a copy"
            )


def _assign(rec, t, rkey, value, v):
    """``t`` with ``t[rkey] = value``, as a new tensor (recorded if either requires grad)."""
    try:
        new = rec.backend.set_at(t.data, rkey, v)
    except Exception as exc:
        add_op_name(exc, "__setitem__")
        raise
    if mode.enabled and (t._rg or (isinstance(value, Tensor) and value._rg)):
        return rec.record(get("__setitem__"), new, (t, value), (t.data, v), {"key": rkey})
    return rec.wrap(new)


def _put(rec, base, how, value, what):
    """``base`` with the region that the view ``how`` takes replaced by ``value``."""
    if type(how) is Index:
        return _assign(rec, base, how.key, value, value.data)
    if type(how) in (Same, Alias):
        return value
    # Any other view op: where each view element comes from, read off the view of
    # the positions 0..n-1; the base is then a gather from the new values there.
    B, xp = rec.backend, rec.xp
    n = B.size_of(base.data)
    device = B.device_of(base.data)
    positions = B.arange(n, device=device)
    source = B.reshape(how(B, B.reshape(positions, base.shape)), (-1,))
    m = source.shape[0]
    if m == 0:
        return base
    order = B.argsort(source)
    ranked = B.take(source, order)
    if m > 1 and bool(B.any(ranked[1:] == ranked[:-1])):
        raise ValueError(
            f"{what}: the tensor is a view that repeats elements of its base "
            f"({how.name}), so a write through it is ambiguous; write into a copy"
        )
    at = B.minimum(B.searchsorted(ranked, positions), m - 1)
    covered = B.take(ranked, at) == positions
    flat = xp.where(
        covered, xp.take(xp.reshape(value, (-1,)), B.take(order, at)), xp.reshape(base, (-1,))
    )
    return xp.reshape(flat, base.shape)


def _rebind(t, res):
    """Move tensor ``t`` onto the value and node of ``res``."""
    t.data = res.data
    t._node = res._node
    t._index = res._index
    t._rg = res._rg


def _write(t, new, what, keep=False):
    """Give ``t`` the value of the Tensor ``new``: through the bases of a view up to its
    root, which moves onto the new buffer; then each live view of the root is taken
    again from it (in creation order: a view's own base is taken before it). With
    ``keep`` (a write into the buffer, on a library that can't write in place) only the
    values change: the tensors keep their nodes and version counter, and the write goes
    on through ``detach()`` aliases, which share the buffer."""
    rec = t._rec
    for base in _chain(t, through_alias=keep)[0]:
        new = _put(rec, base, t._base[1], new, what)
        t = base
    # t is the root now, or a copy of its base (the write stops there), or an alias that
    # took a value requiring grad: either way its own buffer from here on
    old = t._version
    if keep:
        t.data = new.data
    else:
        _rebind(t, new)
        t._version = new._version
        t._base = None
    if old is None or len(old) == 1:
        return
    # the live views taken from t, directly or through others (the counter's list may
    # also hold views of a tensor t was a copy of, or views since cut from it)
    views = [v for v in (r() for r in old[2]) if v is not None and _descends(v, t)]
    if not views:
        return
    if keep:
        for v in views:
            base, how = v._base
            if type(how) in (Alias, Same):
                v.data = base.data
            else:
                with no_grad():
                    v.data = how(rec.xp, base).data
        return
    versions.version_counter(t)
    for v in views:
        base, how = v._base
        res = how(rec.xp, base)
        _rebind(v, res)
        versions.share_version(base, v, how)


def _descends(v, root):
    while v._base is not None:
        v = v._base[0]
        if v is root:
            return True
    return False


def _is_view(t):
    return t._base is not None and type(t._base[1]) in (Index, Call, Same)


def _fit(rec, t, res, what):
    """The result of ``t op= other`` in ``t``'s dtype: cast from another floating dtype,
    as the library casts in place (float32 += float64); anything else doesn't fit."""
    if res.shape == t.shape and res.dtype == t.dtype:
        return res
    B = rec.backend
    if res.shape == t.shape and all(B.isdtype(d, "real floating") for d in (res.dtype, t.dtype)):
        return rec.xp.astype(res, t.dtype)
    raise TypeError(
        f"{what}: the result ({res.dtype}, shape {res.shape}) "
        f"doesn't fit the tensor ({t.dtype}, shape {t.shape})"
    )


def setitem(t, key, value):
    """``t[key] = value``."""
    if tracing.active[0] is not None:
        tracing.state_use(t, "__setitem__", write=True)
    if batching.depth[0] and batching.holds((value,) + batching.key_parts(key), None):
        raise batching.unbatched_write_error("x[key] = value")
    c = t._version
    if c is not None and len(c) > 3:  # versions.is_lent, inlined: the hot path of writes
        _own(t)
    rec = t._rec
    rec.check_native("__setitem__", (value,))
    rkey = rec.raw_key(key)
    v = rec.raw(value, "__setitem__")
    if _copies(t, value):
        _check_writable(t, "__setitem__")
        _write(t, _assign(rec, t, rkey, value, v), "__setitem__")
        return
    if not rec.backend.mutable:  # a new buffer for the whole family of views
        with no_grad():
            new = _assign(rec, t, rkey, value, v)
        _write(t, new, "__setitem__", keep=True)
        versions.bump(t)
        return
    try:
        t.data[rkey] = v
    except ValueError as exc:  # a read-only view (numpy's diagonal, broadcast_to)
        if not _is_view(t):
            add_op_name(exc, "__setitem__")
            raise
        _write(t, _assign(rec, t, rkey, value, v), "__setitem__")
        return
    except Exception as exc:
        add_op_name(exc, "__setitem__")
        raise
    versions.bump(t)


def inplace(t, name, other):
    """``t op= other`` for the binary op ``name`` ("add" for ``+=``); returns ``t``."""
    if tracing.active[0] is not None:
        tracing.state_use(t, f"in-place {name}", write=True)
    if batching.depth[0] and type(other) is batching.Batched:
        raise batching.unbatched_write_error(f"in-place {name}")
    c = t._version
    if c is not None and len(c) > 3:  # versions.is_lent, inlined
        _own(t)
    rec = t._rec
    what = f"in-place {name}"
    rec.check_native(what, (other,))
    if _copies(t, other):
        _check_writable(t, what)
        _write(t, _fit(rec, t, getattr(rec.xp, name)(t, other), what), what)
        return t
    o = rec.raw(other, name)
    if not rec.backend.mutable or not hasattr(t.data, _DUNDER[name]):
        # immutable arrays (JAX's, dask's): a new buffer for the whole family of views
        with no_grad():
            new = _fit(rec, t, getattr(rec.xp, name)(t, other), what)
        _write(t, new, what, keep=True)
        versions.bump(t)
        return t
    try:
        out = getattr(t.data, _DUNDER[name])(o)
    except ValueError as exc:  # a read-only view: written as when recorded
        if not _is_view(t):
            add_op_name(exc, what)
            raise
        _write(t, _fit(rec, t, getattr(rec.xp, name)(t, other), what), what)
        return t
    except Exception as exc:
        add_op_name(exc, what)
        raise
    if out is NotImplemented:
        raise TypeError(f"{what}: unsupported operand {type(other).__name__}")
    t.data = out
    versions.bump(t)
    return t
