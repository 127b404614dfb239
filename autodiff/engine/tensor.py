"""Tensor: a backend array and the node that produced it.

Each wrapped namespace has its own subclass of :class:`Tensor` (made by
``Autodiff(xp)``), whose operators are the namespace's functions: ``a + b``
costs one call of ``add`` and nothing more; ``x[key] = v`` and ``a += b`` are
bound there too (see inplace.py). Users never construct a Tensor; creation
functions and ops return them.

Slots: ``data`` (the backend array), ``_grad`` (read as ``grad``), and for the
engine ``_node`` and ``_index`` (the node and output that made it; None for a
leaf), ``_rg`` (requires grad), ``_version`` (a version counter shared with its
views, made on first use), ``_base`` (the tensor it is a view of) and ``_hooks``
(a leaf's ``register_hook`` hooks; unset until the first one).
"""

from __future__ import annotations

import warnings

from . import backward, hooks, tracing, versions
from .anomaly import host_read

__all__ = ["Tensor", "exported"]


class Tensor:
    """An array of a wrapped namespace that records how it was computed."""

    __slots__ = ("data", "_node", "_index", "_rg", "_grad", "_version", "_base", "_hooks",
                 "__weakref__")  # fmt: skip
    # numpy must defer ``ndarray * tensor`` to ``Tensor.__rmul__`` (a subclass over numpy
    # or cupy takes ufuncs itself: CONVERSIONS).
    __array_ufunc__ = None
    __array_priority__ = 1000
    _ns = None  # the public namespace; set on each subclass
    _rec = None  # its recorder (namespace.Recorder): backend, recording namespace, wrap

    def __new__(cls, *args, **kwargs):
        raise TypeError(
            "autodiff.Tensor is not constructed directly: use xp.asarray(...) of a "
            "namespace made by autodiff.Autodiff(xp)"
        )

    # -- attributes of the standard ------------------------------------------
    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def device(self):
        return self._rec.backend.device_of(self.data)

    @property
    def ndim(self):
        return self.data.ndim

    @property
    def size(self):
        return self._rec.backend.size_of(self.data)

    @property
    def T(self):
        if self.ndim != 2:
            raise ValueError(f"T: the array must be 2-D, got {self.ndim}-D (use .mT)")
        return self._rec.xp.permute_dims(self, (1, 0))

    @property
    def mT(self):
        return self._rec.xp.matrix_transpose(self)

    def __array_namespace__(self, *, api_version=None):
        return self._ns

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        # torch's functions can't take a Tensor (of any namespace, torch's included):
        # say so. On an operator (torch_array @ t) torch turns this TypeError into
        # NotImplemented, so Python calls the reflected operator of ours.
        name = getattr(func, "__name__", repr(func))
        raise TypeError(
            f"torch.{name}: a torch function called on a Tensor of {cls._ns.__name__}; "
            f"use the namespace's functions ({cls._ns.__name__}), or move the values "
            "first: torch.asarray(t.detach()) if no gradient should flow"
        )

    def to_device(self, device, /, *, stream=None):
        return self._rec.xp.to_device(self, device, stream=stream)

    def __dlpack__(self, /, *, stream=None, max_version=None, dl_device=None, copy=None):
        given = {"stream": stream, "max_version": max_version, "dl_device": dl_device, "copy": copy}
        # only what was given: libraries before DLPack 1.0 take stream= alone
        data = exported(self, "__dlpack__")
        return data.__dlpack__(**{k: v for k, v in given.items() if v is not None})

    def __dlpack_device__(self):
        return self.data.__dlpack_device__()

    def __bool__(self):
        if tracing.active[0] is not None:
            tracing.state_use(self, "bool()")
        # not a host read that cuts a graph: a branch on a value has no gradient to lose
        return bool(self.data)

    def __float__(self):
        if tracing.active[0] is not None:
            tracing.state_use(self, "float()")
        if self._rg:
            host_read(self, "float()")
        return float(self.data)

    def __int__(self):
        if tracing.active[0] is not None:
            tracing.state_use(self, "int()")
        if self._rg:
            host_read(self, "int()")
        return int(self.data)

    def __index__(self):
        if tracing.active[0] is not None:
            tracing.state_use(self, "an index")
        # integer tensors only, which never require grad: no graph to cut
        return self.data.__index__()

    def __complex__(self):
        if tracing.active[0] is not None:
            tracing.state_use(self, "complex()")
        if self._rg:
            host_read(self, "complex()")
        return complex(self.data)

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.data.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.data.shape[0]))

    def item(self):
        """The value of a one-element tensor as a Python scalar."""
        if tracing.active[0] is not None:
            tracing.state_use(self, "item()")
        if self.size != 1:
            raise ValueError(f"item: the tensor has {self.size} elements, not one")
        if self._rg:
            host_read(self, "item()")
        d = self.data
        if hasattr(d, "item"):
            return d.item()
        B = self._rec.backend
        x = B.reshape(d, ())
        if B.isdtype(d.dtype, "bool"):
            return bool(x)
        if B.isdtype(d.dtype, "integral"):
            return int(x)
        if B.isdtype(d.dtype, "complex floating"):
            return complex(x)
        return float(x)

    # -- autodiff -------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._rg

    @requires_grad.setter
    def requires_grad(self, value):
        if self._node is not None:
            raise RuntimeError(
                "requires_grad can only be changed on a leaf tensor; use .detach() "
                "to make a leaf from a computed one"
            )
        if value:
            self._rec.backend.check_differentiable(self.data.dtype, "requires_grad")
        self._rg = bool(value)

    def _read_grad(self):
        g = self._grad
        if g is None and self._node is not None and not hooks.retains_grad(self):
            warnings.warn(
                f"grad: reading .grad of a non-leaf tensor (computed by "
                f"'{self._node.op.name}'): backward() fills .grad of leaves only, so it is "
                "None. Call .retain_grad() on this tensor before backward() to keep its "
                "gradient, or read .grad of the leaf you meant",
                UserWarning,
                stacklevel=2,
            )
        return g

    def _write_grad(self, value):
        self._grad = value

    # A property (not the slot itself) so that reading a non-leaf's warns, as torch's does.
    grad = property(
        _read_grad,
        _write_grad,
        doc="""The gradient accumulated by backward passes: a Tensor of the same namespace
        (no history; recorded under ``create_graph=True``), or None. Filled for leaves,
        and for non-leaves after ``retain_grad()``.""",
    )

    def register_hook(self, hook):
        """Call ``hook(grad)`` on the gradient reaching this tensor in each backward pass;
        a non-None result replaces the gradient. Returns a handle with ``.remove()``.

        On a leaf, ``grad`` is the total this pass gives it, before it is added into
        ``.grad``; on a computed tensor, the complete gradient of the tensor (every use
        summed), before it flows on into the op that made it: replacing it by ``c * grad``
        scales every gradient upstream by ``c``. ``grad`` is a Tensor of the same
        namespace (recorded under ``create_graph=True``, so the hook is differentiated
        too); the replacement must have its shape and dtype. Hooks run in registration
        order, in ``backward()`` and in the transforms (``ad.grad``, ``ad.vjp``...)."""
        return hooks.register_hook(self, hook)

    def retain_grad(self):
        """Make backward passes fill this computed tensor's ``.grad`` too (accumulating,
        as a leaf's); a no-op on a leaf. The gradient kept is the one after its hooks."""
        hooks.retain_grad(self)

    @property
    def retains_grad(self) -> bool:
        """Whether ``retain_grad()`` was called on this computed tensor (False on leaves)."""
        return hooks.retains_grad(self)

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    @property
    def grad_fn(self):
        """The node that produced this tensor (None for a leaf)."""
        return self._node

    def detach(self):
        """The same values, cut from the graph (shares memory, and the version
        counter: an in-place change through it is seen by nodes that saved self)."""
        t = self._rec.wrap(self.data)
        versions.share_version(self, t, versions.ALIAS)  # see inplace.py
        return t

    def __copy__(self):
        """A second handle on the same value, node and buffer."""
        t = self._rec.wrap(self.data)
        t._node, t._index, t._rg, t._grad = self._node, self._index, self._rg, self._grad
        versions.share_version(self, t, versions.SAME)  # a write through either is seen by both
        return t

    def __deepcopy__(self, memo):
        """A copy with its own buffer. Of a leaf: a new leaf (the same ``requires_grad``,
        a copy of ``grad``), as torch. Of a computed tensor: the op ``asarray(x,
        copy=True)``, recorded, so gradients flow through it, as JAX differentiates
        through a copy (xarray's ``DataArray.copy()`` deep-copies its data)."""
        if self._node is not None:
            t = self._rec.xp.asarray(self, copy=True)
            memo[id(self)] = t
            return t
        t = self._rec.wrap(self._rec.backend.asarray(self.data, copy=True))
        t._rg = self._rg
        if self._grad is not None:
            t._grad = self._grad.__deepcopy__(memo)
        memo[id(self)] = t
        return t

    def backward(self, grad=None, *, retain_graph=False, create_graph=False):
        """Accumulate d(self)/d(leaf) into ``leaf.grad`` for every leaf it depends on."""
        backward.backward(self, grad, retain_graph, create_graph)

    def __repr__(self):
        """Values, dtype, device and the op that made it, as torch prints a tensor."""
        data = self.data
        try:
            import numpy as np

            from ..backends import to_host

            # array2string honours np.set_printoptions and summarizes big arrays; a
            # non-numpy array is copied to the host for display only.
            body = np.array2string(to_host(data), separator=", ", prefix="tensor(")
        except Exception:
            body = repr(data)
        dtype = getattr(data, "dtype", None)
        name = getattr(dtype, "name", None)
        if not isinstance(name, str):  # array_api_strict and torch: "module.float64"
            name = str(dtype).rsplit(".", 1)[-1]
        try:
            device = str(self.device)
        except Exception:
            device = "?"
        extra = [f"dtype={name}", f"device={device}"]
        if self._node is not None:
            extra.append(f"grad_fn=<{self._node.op.name}>")
        elif self._rg:
            extra.append("requires_grad=True")
        return f"tensor({body}, {', '.join(extra)})"

    __str__ = __repr__


def exported(t, what):
    """``t.data`` for a conversion to a foreign array (``numpy.asarray(t)``, DLPack, the
    buffer protocol), refused while ``t`` requires grad: the foreign array has no
    graph, so whatever is computed from it would get no gradient, silently."""
    if t._rg:
        raise RuntimeError(
            f"{what}: can't convert a tensor that requires grad to a foreign array: the "
            "graph would be cut silently and gradients lost. Use the namespace's functions "
            "to keep the gradient, or call .detach() first (numpy.asarray(t.detach())) "
            "if no gradient should flow"
        )
    return t.data


def _array(self, dtype=None, copy=None):
    data = exported(self, "__array__")
    return data.__array__(dtype) if copy is None else data.__array__(dtype, copy=copy)


def _buffer(self, flags, /):
    return exported(self, "__buffer__").__buffer__(flags)


# NumPy's (and CuPy's) names of ufuncs whose standard name differs.
_UFUNC_NAMES = {
    "absolute": "abs",
    "arccos": "acos",
    "arccosh": "acosh",
    "arcsin": "asin",
    "arcsinh": "asinh",
    "arctan": "atan",
    "arctan2": "atan2",
    "arctanh": "atanh",
    "invert": "bitwise_invert",
    "left_shift": "bitwise_left_shift",
    "right_shift": "bitwise_right_shift",
    "conjugate": "conj",
    "power": "pow",
}


def _ufunc(self, ufunc, method, *inputs, **kwargs):
    """``numpy.exp(t)``, ``ndarray * t``: a ufunc that is a function of the standard, called
    plainly, is that function of the namespace (recorded); any other use (``out=``,
    ``reduce``, a ufunc outside the standard) runs on the raw arrays, as a conversion
    would, so it is refused for a tensor that requires grad."""
    rec = self._rec
    name = _UFUNC_NAMES.get(ufunc.__name__, ufunc.__name__)
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    if method == "__call__" and not kwargs and hasattr(rec.namespace, name):
        return getattr(rec.xp, name)(*inputs)
    what = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    for out in kwargs.get("out", ()):
        if isinstance(out, Tensor):
            raise TypeError(f"{what}: out= can't be a Tensor; use the namespace's functions")
    raws = [exported(a, what) if isinstance(a, Tensor) else a for a in inputs]
    return getattr(ufunc, method)(*raws, **kwargs)


# Conversions bound on a subclass where its backend's arrays offer them (``__array__`` on
# numpy and array_api_strict arrays, ``__buffer__`` on strict's), so that a Tensor converts
# exactly as its backend array does.
CONVERSIONS = {"__array__": _array, "__buffer__": _buffer, "__array_ufunc__": _ufunc}

# Operators of the standard, bound on each subclass to the namespace's functions.
BINARY_OPERATORS = {
    "__add__": "add",
    "__sub__": "subtract",
    "__mul__": "multiply",
    "__truediv__": "divide",
    "__floordiv__": "floor_divide",
    "__mod__": "remainder",
    "__pow__": "pow",
    "__matmul__": "matmul",
    "__and__": "bitwise_and",
    "__or__": "bitwise_or",
    "__xor__": "bitwise_xor",
    "__lshift__": "bitwise_left_shift",
    "__rshift__": "bitwise_right_shift",
    "__lt__": "less",
    "__le__": "less_equal",
    "__gt__": "greater",
    "__ge__": "greater_equal",
    "__eq__": "equal",
    "__ne__": "not_equal",
}
REFLECTED_OPERATORS = {
    "__radd__": "add",
    "__rsub__": "subtract",
    "__rmul__": "multiply",
    "__rtruediv__": "divide",
    "__rfloordiv__": "floor_divide",
    "__rmod__": "remainder",
    "__rpow__": "pow",
    "__rmatmul__": "matmul",
    "__rand__": "bitwise_and",
    "__ror__": "bitwise_or",
    "__rxor__": "bitwise_xor",
    "__rlshift__": "bitwise_left_shift",
    "__rrshift__": "bitwise_right_shift",
}
# In-place operators: the tensor moves onto a new node (see inplace.py).
INPLACE_OPERATORS = {
    "__iadd__": "add",
    "__isub__": "subtract",
    "__imul__": "multiply",
    "__itruediv__": "divide",
    "__ifloordiv__": "floor_divide",
    "__imod__": "remainder",
    "__ipow__": "pow",
    "__imatmul__": "matmul",
    "__iand__": "bitwise_and",
    "__ior__": "bitwise_or",
    "__ixor__": "bitwise_xor",
    "__ilshift__": "bitwise_left_shift",
    "__irshift__": "bitwise_right_shift",
}
UNARY_OPERATORS = {
    "__neg__": "negative",
    "__pos__": "positive",
    "__abs__": "abs",
    "__invert__": "bitwise_invert",
}
