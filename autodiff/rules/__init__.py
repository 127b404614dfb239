"""VJP rules of the standard, one module per chapter of the spec.

Importing this package registers every rule in :mod:`autodiff.registry`.
"""

from . import (  # noqa: F401
    creation,
    data_types,
    elementwise,
    fft,
    indexing,
    linalg,
    linear_algebra,
    manipulation,
    searching,
    set_functions,
    sorting,
    statistical,
    utility,
)
