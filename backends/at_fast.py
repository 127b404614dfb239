"""Fast paths for libraries whose arrays are immutable but have a functional updater,
``x.at[key].set(v)`` and ``.add(v)`` (JAX's): chosen by that capability, never by the
library's name, and imported only when such a library is the backend."""

from __future__ import annotations


def set_at(xp, x, key, value):
    """``out = copy(x); out[key] = value``, as one ``x.at[key].set(value)``."""
    return x.at[key].set(value)


def set_(xp, x, key, value):
    """``set_at``: the library has no write into ``x`` itself."""
    return x.at[key].set(value)


def embed(xp, g, shape, key):
    """A zero array of ``shape`` with ``g`` at the basic index ``key``."""
    z = xp.zeros(tuple(shape), dtype=g.dtype)
    parts = key if isinstance(key, tuple) else (key,)
    if any(k is None for k in parts):  # new axes: x[key] has them, the zeros don't
        key = tuple(k for k in parts if k is not None)
        g = xp.reshape(g, tuple(z[key].shape))
    return z.at[key].set(g)


def index_add(xp, x, indices, values, axis=0):
    """``out = copy(x); out[..., indices[j], ...] += values[..., j, ...]`` along ``axis``
    (duplicates accumulate), as one ``x.at[...].add``."""
    axis = axis % x.ndim
    return x.at[(slice(None),) * axis + (xp.reshape(indices, (-1,)),)].add(values)


def index_add_(xp, x, indices, values, axis=0):
    """``index_add``: the library has no write into ``x`` itself."""
    return index_add(xp, x, indices, values, axis=axis)
