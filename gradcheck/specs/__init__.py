"""Sample inputs for every differentiable op of the registry (a small OpInfo): the
toolkit is in ``common.py``, the specs in one module per family of ops (importing
them registers them)."""

from . import (  # noqa: F401
    fft,
    linalg,
    nn_activations_losses,
    nn_conv_pool,
    nn_losses,
    nn_norm,
    nn_normalization,
    nn_recurrent_attention,
    standard,
)
from .common import SPECS, Sample, Spec, missing_specs, spec, specs

__all__ = ["Spec", "Sample", "SPECS", "spec", "specs", "missing_specs"]
