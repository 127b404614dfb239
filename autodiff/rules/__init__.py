"""The standard's ops, one module per chapter of the spec.

Each op is registered once, in its chapter's module, with its forward, its rules (VJP,
JVP, batching: written beside it, or derived from its metadata) and its metadata;
importing this package registers them in :mod:`autodiff.engine.registry`.
:mod:`.batch_rules` holds the generic batching rules and the helpers rules share.
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
