"""Creation functions. They accept ``requires_grad=False``; ``asarray`` of a
Tensor keeps its graph (dtype changes and copies are differentiable), so
array-API-generic code that starts with ``xp.asarray(x)`` stays differentiable."""

from __future__ import annotations

from ..backends import device_of
from ..engine.grad_mode import is_grad_enabled
from ..engine.namespace import recorder_of
from ..engine.registry import CONST, defop
from ..engine.tensor import Tensor, exported


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


for _name in (
    "arange", "empty", "empty_like", "eye", "full", "full_like", "linspace",
    "ones", "ones_like", "zeros", "zeros_like",
):  # fmt: skip
    defop(_name, chapter="creation", kind=CONST, style="creation")
defop("asarray", chapter="creation", kind=CONST, style="creation", public=_asarray_public)
defop("from_dlpack", chapter="creation", kind=CONST, style="creation", public=_from_dlpack_public)
defop("tril", _tri("tril"), chapter="creation", saves=(), linear=True)
defop("triu", _tri("triu"), chapter="creation", saves=(), linear=True)
defop(
    "meshgrid",
    vjp=_meshgrid,
    chapter="creation",
    impl=lambda B: lambda *arrays, indexing="xy": B.meshgrid(*arrays, indexing=indexing),
    saves=(),
    linear=True,
)
