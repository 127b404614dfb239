"""NumPy fast paths of the kernels (imported only when numpy is the backend)."""

from __future__ import annotations

import numpy as np

ARRAY_TYPE = np.ndarray
SCALAR_TYPES = (np.generic,)


def index_add(xp, x, indices, values, axis=0):
    """``numpy.add.at`` on a copy: duplicates accumulate (see generic.index_add)."""
    out = np.array(x, copy=True)
    axis = axis % x.ndim
    key = (slice(None),) * axis + (np.reshape(indices, (-1,)),)
    np.add.at(out, key, values)
    return out


def own(xp, x):
    """A copy only when ``x`` is a view (of another gradient, or a read-only broadcast)."""
    if x.base is None and x.flags.writeable:
        return x
    return np.array(x, copy=True)
