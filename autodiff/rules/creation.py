"""Creation functions. They accept ``requires_grad=False``; ``asarray`` of a
Tensor keeps its graph (dtype changes and copies are differentiable), so
array-API-generic code that starts with ``xp.asarray(x)`` stays differentiable."""

from __future__ import annotations

from ..backends import device_of
from ..engine.grad_mode import is_grad_enabled
from ..engine.namespace import recorder_of
from ..engine.registry import CONST, defop
from ..engine.tensor import Tensor, exported
from .batch_rules import leading, passthrough


def _has_tensor(obj):
    if isinstance(obj, Tensor):
        return True
    return isinstance(obj, (list, tuple)) and any(_has_tensor(o) for o in obj)


def _localize(obj, rec):
    """Tensors of another namespace become constants of this one (their values
    move; no graph crosses namespaces, so one that requires grad is refused)."""
    if isinstance(obj, Tensor):
        if recorder_of(obj) is rec:
            return obj
        if obj.requires_grad and is_grad_enabled():
            raise TypeError(
                f"asarray: the tensor belongs to {obj.__array_namespace__().__name__} and "
                f"requires grad; gradients can't flow between namespaces (pass .detach())"
            )
        return rec.wrap(rec.backend.asarray(obj.data))
    if isinstance(obj, (list, tuple)):
        return [_localize(o, rec) for o in obj]
    return obj


def _asarray_public(f, rec):
    def asarray(obj, /, *, dtype=None, device=None, copy=None, requires_grad=False):
        if requires_grad and copy is None:
            # A trainable leaf owns its buffer: optimizers update it in place, and
            # that must not write into the caller's array.
            copy = True
        if not _has_tensor(obj):
            return f(obj, dtype=dtype, device=device, copy=copy, requires_grad=requires_grad)
        xp = rec.xp
        obj = _localize(obj, rec)
        if isinstance(obj, Tensor):
            t = obj
        else:  # a nested sequence holding tensors: stack it (differentiably)
            t = xp.stack([asarray(o, dtype=dtype, device=device) for o in obj])
        if device is not None and device != device_of(t):
            if copy is False:
                raise ValueError("asarray: copy=False, but moving to another device copies")
            t = xp.to_device(t, device)
        if (dtype is not None and dtype != t.dtype) or copy:
            if copy is False:
                raise ValueError("asarray: copy=False, but changing the dtype copies")
            t = xp.astype(t, dtype if dtype is not None else t.dtype, copy=True)
        if requires_grad and not t.requires_grad:
            t = t.detach()
            t.requires_grad = True
        elif requires_grad and not t.is_leaf:
            raise ValueError(
                "asarray(requires_grad=True) of a computed tensor: call .detach() first"
            )
        return t

    return asarray


def _from_dlpack_public(f, rec):
    def from_dlpack(x, /, *, device=None, copy=None, requires_grad=False):
        if isinstance(x, Tensor):  # of any namespace: its buffer, refused if it requires grad
            x = exported(x, "from_dlpack")
        if requires_grad and copy is None:
            copy = True  # a trainable leaf owns its buffer (as asarray's)
        return f(x, device=device, copy=copy, requires_grad=requires_grad)

    return from_dlpack


def _asarray_batch(c, x, **kwargs):
    """``asarray`` of a batched value: the namespace's own, which keeps the graph of a
    Tensor (the creation function itself would take its raw array)."""
    flags = c.bd[0]
    if isinstance(flags, tuple):  # a sequence of one example's arrays: stacked
        if any(not hasattr(v, "shape") for v in x):
            return NotImplemented
        x = c.xp.stack([c.lift(v, b) for v, b in zip(x, flags)], axis=1)
    return c.xp.asarray(x, **kwargs)


def _from_dlpack_batch(c, x, **kwargs):
    if getattr(x, "requires_grad", False):
        raise RuntimeError(
            "from_dlpack: can't convert a tensor that requires grad to a foreign array "
            "(the graph would be cut silently); call .detach() first"
        )
    return c.f(x, **kwargs)


def _tri(which):
    return lambda xp, g, ans, x, *, k=0: getattr(xp, which)(g, k=k)


def _meshgrid(xp, gs, ans, *arrays, indexing="xy"):
    """Output i repeats input i along every axis but one: sum those away."""
    n = len(arrays)
    grads = []
    for i, g in enumerate(gs):
        axis = 1 - i if indexing == "xy" and n >= 2 and i < 2 else i
        other = tuple(a for a in range(g.ndim) if a != axis)
        grads.append(xp.reshape(xp.sum(g, axis=other), arrays[i].shape) if other else g)
    return grads


def _meshgrid_batch(c, *arrays, indexing="xy"):
    """Output i repeats input i (1-D) along every axis but its own."""
    xp = c.xp
    k = len(arrays)
    sizes = [a.shape[-1] for a in arrays]
    order = list(range(k))
    if indexing == "xy" and k >= 2:
        order[0], order[1] = 1, 0
    shape = tuple(sizes[j] for j in order)
    out = []
    for i, (a, b) in enumerate(zip(arrays, c.bd)):
        where = order.index(i)
        lone = tuple(sizes[i] if j == where else 1 for j in range(k))
        a = xp.reshape(c.lift(a, b), (c.n,) + lone)
        out.append(xp.broadcast_to(a, (c.n,) + shape))
    return out


for _name in (
    "arange", "empty", "empty_like", "eye", "full", "full_like", "linspace",
    "ones", "ones_like", "zeros", "zeros_like",
):  # fmt: skip
    # of an array (the *_like ones): the result has the batch axis first already; of no
    # array: no rule, the loop
    _batch = passthrough if _name.endswith("_like") else None
    defop(_name, chapter="creation", kind=CONST, style="creation", batch=_batch)
defop("asarray", chapter="creation", kind=CONST, style="creation", public=_asarray_public,
      batch=_asarray_batch)  # fmt: skip
defop("from_dlpack", chapter="creation", kind=CONST, style="creation", public=_from_dlpack_public,
      batch=_from_dlpack_batch)  # fmt: skip
defop("tril", _tri("tril"), chapter="creation", saves=(), linear=True, batch=leading)
defop("triu", _tri("triu"), chapter="creation", saves=(), linear=True, batch=leading)
defop(
    "meshgrid",
    vjp=_meshgrid,
    chapter="creation",
    impl=lambda B: lambda *arrays, indexing="xy": B.meshgrid(*arrays, indexing=indexing),
    saves=(),
    linear=True,
    batch=_meshgrid_batch,
)
