"""Dtype names across namespaces, and the default floating dtype of new parameters
(``set_default_dtype``/``get_default_dtype``, as torch's).

The default is a name (``"float32"``), not a dtype object: each namespace has its own
dtype objects, and a module picks its namespace's dtype of that name. It is
process-wide, as torch's. It decides the dtype of the parameters of the ``nn`` modules
made without ``dtype=``; the namespace's own functions (``xp.zeros``, ``xp.asarray``
of Python floats) keep the backend's default, as the standard says.
"""

from __future__ import annotations

__all__ = ["set_default_dtype", "get_default_dtype", "dtype_name", "dtype_in", "FLOATING"]

# the dtype names of the standard (and NumPy's half precision)
NAMES = frozenset(
    "bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 bfloat16 float32 "
    "float64 complex64 complex128".split()
)
FLOATING = frozenset(("float16", "bfloat16", "float32", "float64"))

_default = ["float32"]


def dtype_name(dtype, owner, floating=False):
    """The name of ``dtype`` (a dtype object of any namespace, or its name): a TypeError
    for what is no dtype, a ValueError for an unknown name (or, with ``floating``, a
    dtype that is not real floating), naming ``owner``."""
    if isinstance(dtype, str):
        name = dtype
    elif isinstance(dtype, (bool, int, float, complex)) or dtype is None:
        raise TypeError(f"{owner}: dtype must be a dtype or its name, got {dtype!r}")
    else:  # numpy: a scalar type (np.float32) or np.dtype; others print "lib.float32"
        name = getattr(dtype, "__name__", None) or getattr(dtype, "name", None) or str(dtype)
        if not isinstance(name, str):
            name = str(dtype)
        name = name.rsplit(".", 1)[-1].rstrip("_")
        if name not in NAMES:
            kind = type(dtype).__name__
            raise TypeError(f"{owner}: dtype must be a dtype or its name, got {dtype!r} ({kind})")
    if name not in NAMES:
        raise ValueError(f"{owner}: dtype {name!r} is not a dtype name")
    if floating and name not in FLOATING:
        raise ValueError(f"{owner}: dtype must be a real floating dtype, got {name!r}")
    return name


def dtype_in(xp, dtype, owner="Module", floating=False):
    """``dtype`` (a dtype object of any namespace, or its name) as ``xp``'s dtype."""
    if dtype is None:
        return None
    name = dtype_name(dtype, owner, floating)
    try:
        return getattr(xp, name)
    except AttributeError:
        raise ValueError(f"{owner}: {xp.__name__} has no dtype {name!r}") from None


def set_default_dtype(dtype):
    """Make ``dtype`` (a real floating dtype of any namespace, or its name) the dtype of
    the parameters of modules made without ``dtype=`` from now on (float32 at start).

    >>> import autodiff as ad, autodiff.nn as nn
    >>> ad.set_default_dtype("float64")
    >>> nn.Linear(2, 1).weight.dtype
    dtype('float64')
    >>> ad.set_default_dtype("float32")
    """
    _default[0] = dtype_name(dtype, "set_default_dtype", floating=True)


def get_default_dtype() -> str:
    """The name of the dtype new modules' parameters get (``"float32"`` at start).

    >>> import autodiff as ad
    >>> ad.get_default_dtype()
    'float32'
    """
    return _default[0]
