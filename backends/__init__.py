"""Per-library kernels the standard lacks, behind one resolver.

``resolve(xp)`` returns a :class:`Backend`: the array-api-compat namespace of
``xp`` (every standard function, as attributes) plus the kernels of
:data:`KERNELS`. A kernel comes from the library's fast-path module when it has
one (``numpy_fast.py``, ``cupy_fast.py``, ``dask_fast.py``) and from ``generic.py``
otherwise, which is written in the Array API alone (and the other kernels, reached through
the namespace it is given) and works on every conforming namespace, the
recording one of autodiff included. Optional libraries are never imported
eagerly.

This folder is installed as ``autodiff.backends`` (a top-level ``backends``
would be shadowed by any ``backends.py`` in the user's folder); it imports
nothing of autodiff.
"""

from __future__ import annotations

import functools
import importlib
import types

from . import generic
from .generic import device_of

__all__ = ["Backend", "resolve", "KERNELS", "to_host", "device_of"]

KERNELS = (
    "index_add",
    "index_add_",
    "own",
    "apply_",
    "matmul_stack",
    "bernoulli",
    "pad2d",
    "windows2d",
    "col2im2d",
    "col2im2d_rows",
    "may_share_memory",
    "persist",
    "embed",
    "set_at",
    "set_",
)

# Module of fast paths (in this package), by the name of the canonical namespace.
_FAST = {
    "numpy": "numpy_fast",
    "cupy": "cupy_fast",
    "dask.array": "dask_fast",
    "sparse": "sparse_fast",
}

# Standard functions some libraries lack (array-api-compat's dask namespace): taken from
# the fast-path module, else from ``generic.py``, only where the library has none.
FILLS = ("take_along_axis",)

# Backends whose arrays live in device memory: reading a value back (``bool(any(...))``
# in a validity check) is a device-to-host copy that stalls the stream.
_DEVICE_MEMORY = frozenset({"cupy"})
# Lazy backends: reading a value back computes the graph built so far.
_LAZY = frozenset({"dask.array"})
# Device names (torch, jax, ...) that are not host memory; any other device is.
_ACCELERATORS = ("cuda", "gpu", "rocm", "hip", "mps", "xpu", "tpu", "meta")


def _canonical(xp):
    """(key, compute namespace) for a user's namespace: numpy and
    ``array_api_compat.numpy`` are one backend, computed with the latter."""
    import array_api_compat as compat

    for lib, check in (
        ("numpy", compat.is_numpy_namespace),
        ("cupy", compat.is_cupy_namespace),
        ("torch", compat.is_torch_namespace),
        ("dask.array", compat.is_dask_namespace),
    ):
        if check(xp):
            return lib, importlib.import_module(f"array_api_compat.{lib}")
    if compat.is_array_api_strict_namespace(xp):
        return "array_api_strict", xp
    name = getattr(xp, "__name__", None)
    if not isinstance(name, str) or not hasattr(xp, "asarray"):
        raise TypeError(f"Autodiff: {xp!r} is not an Array API namespace")
    # a library may expose its namespace under two names (cubed and cubed.array_api):
    # the one its arrays give is the backend
    own = getattr(xp.asarray(0), "__array_namespace__", None)
    own = own() if own is not None else xp
    if own is not xp and isinstance(getattr(own, "__name__", None), str):
        return own.__name__, own
    return name, xp


def _scalar_types(xp) -> tuple:
    """The type of what indexing one element gives, where that is no array (sparse's
    ``x[0, 1]`` is a ``numpy.float64``): wrapped as a 0-d array."""
    a = xp.asarray([[0.0]])
    try:
        s = a[0, 0]
    except Exception:
        return ()
    if isinstance(s, type(a)) or not hasattr(s, "dtype"):
        return ()
    return (type(s),)


def _mutable(xp) -> bool:
    """Whether ``xp``'s arrays take item assignment: one probe, on a 1-element array."""
    a = xp.zeros((1,))
    try:
        a[0] = 1
    except Exception:  # TypeError (JAX), AttributeError or NotImplementedError elsewhere
        return False
    return True


def _fast_module(key, xp, mutable):
    """The module of fast paths for the library: by name for the ones this folder knows;
    for an immutable library whose arrays have a functional updater (``x.at[key].set``,
    as JAX's), the one written with it."""
    if key in _FAST:
        return importlib.import_module(f"{__name__}.{_FAST[key]}")
    if not mutable and hasattr(xp.zeros((1,)), "at"):
        return importlib.import_module(f"{__name__}.at_fast")
    return None


def _identity(x, /):
    return x


class Backend(types.SimpleNamespace):
    """A compute namespace: the standard's functions plus this project's kernels.

    It is also the ``xp`` that VJP rules get in a plain backward pass: ``records`` is
    False there (nothing they compute is recorded) and ``stop_gradient`` is the
    identity (the recording namespace of autodiff has the same two names)."""

    records = False
    stop_gradient = staticmethod(_identity)

    def __init__(self, key, xp):
        super().__init__(**{k: v for k, v in vars(xp).items() if not k.startswith("__")})
        self.__name__ = key
        self.key = key
        self.xp = xp
        self.__array_api_version__ = getattr(xp, "__array_api_version__", None)
        self.__array_namespace_info__ = getattr(xp, "__array_namespace_info__", None)
        for sub in ("linalg", "fft"):  # extensions may be loaded lazily (array_api_strict)
            mod = getattr(xp, sub, None)
            if mod is not None:
                setattr(self, sub, mod)
        import array_api_compat

        self.to_device = array_api_compat.to_device
        # Whether the arrays take item assignment (``x[key] = v``): JAX's, cubed's and
        # sparse's don't; kernels and rules then build new arrays instead.
        self.mutable = _mutable(xp)
        fast = _fast_module(key, xp, self.mutable)
        for name, fn in getattr(fast, "FUNCTIONS", {}).items():
            setattr(self, name, fn)
        for name in FILLS:
            if getattr(self, name, None) is None:
                impl = getattr(fast, name, None) or getattr(generic, name)
                setattr(self, name, functools.partial(impl, self))
        extra = getattr(fast, "LINALG", None)
        if extra:  # functions the library's linalg lacks or gets wrong
            own = {k: v for k, v in vars(self.linalg).items() if not k.startswith("__")}
            self.linalg = types.SimpleNamespace(**{**own, **extra})
        for name in KERNELS:  # bound to this Backend: generic kernels call the others
            impl = getattr(fast, name, None) or getattr(generic, name)
            setattr(self, name, functools.partial(impl, self))
        self.kernel_source = {
            name: ("fast" if getattr(fast, name, None) else "generic") for name in KERNELS
        }
        # numpy returns scalars (np.float64) from 0-d ufunc calls; arrays stay arrays.
        self.scalar_types = getattr(fast, "SCALAR_TYPES", None)
        if self.scalar_types is None:
            self.scalar_types = _scalar_types(xp)
        self.array_type = getattr(fast, "ARRAY_TYPE", None)
        # fn -> its function that writes into out= (or None): see numpy_fast.into
        self.into = getattr(fast, "into", None)
        # Whether validity checks (target or index out of range) may read a value back
        # to the host: True on eager CPU backends (never on a GPU, never on a lazy
        # backend, where it would compute); torch and others are decided per array by
        # ``checks_on_host``.
        self.host_checks = key not in _DEVICE_MEMORY and key not in _LAZY
        # Whether arrays are task graphs computed on demand (dask): persisted by the
        # optimizers each step so that the graph does not grow
        self.lazy = key in _LAZY

    def __repr__(self):
        return f"<Backend {self.key}>"

    device_of = staticmethod(device_of)

    def checks_on_host(self, x) -> bool:
        """Whether a check may read a value of ``x`` back to the host (never on a GPU,
        never on a lazy backend: dask would compute)."""
        if not self.host_checks:
            return False
        # As torch's CUDA kernels, which assert asynchronously: no sync for a check.
        device = str(self.device_of(x)).lower()
        return not device.startswith(_ACCELERATORS)

    def size_of(self, x):
        n = 1
        for s in x.shape:
            if s is None:
                return None
            n *= s
        return n

    def is_array(self, x):
        if self.array_type is not None:
            return isinstance(x, self.array_type)
        import array_api_compat

        return array_api_compat.is_array_api_obj(x) and not isinstance(x, (int, float, bool))

    def check_differentiable(self, dtype, where):
        if self.isdtype(dtype, ("real floating", "complex floating")):
            return
        raise TypeError(
            f"{where}: only floating-point tensors (real or complex) can require grad, "
            f"got dtype {dtype}"
        )


def to_host(x):
    """A numpy array with the values of the array ``x`` (any backend's), on the host.

    NumPy arrays come back as they are; other arrays may share memory with the
    result when they already live in host memory (DLPack). Raises ``TypeError``
    when no route to the host works.
    """
    import numpy as np

    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, np.generic):
        return np.asarray(x)
    module = type(x).__module__ or ""
    errors = []
    if module.startswith("cupy"):
        return x.get()
    if module.startswith("torch"):
        try:
            # torch's lazy conjugate and negation (conj, ihfft) must be materialized
            return x.detach().cpu().resolve_conj().resolve_neg().numpy()
        except Exception as exc:  # e.g. bfloat16: try DLPack below
            errors.append(exc)
    for convert in (np.from_dlpack, np.asarray):
        try:
            out = convert(x)
        except Exception as exc:
            errors.append(exc)
            continue
        if out.dtype != object:  # np.asarray wraps anything unknown in an object array
            return out
    detail = "; ".join(f"{type(e).__name__}: {e}" for e in errors) or "no conversion applies"
    raise TypeError(f"to_host: can't copy a {type(x).__name__} to a numpy array ({detail})")


_cache: dict = {}


def resolve(xp) -> Backend:
    key, compute = _canonical(xp)
    b = _cache.get(key)
    if b is None:
        b = _cache[key] = Backend(key, compute)
    return b
