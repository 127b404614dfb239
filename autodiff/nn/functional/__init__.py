"""``autodiff.nn.functional`` (import as ``F``): the deep-learning extension ops.

Names, argument order, layouts (NCHW) and conventions follow
``torch.nn.functional``, except that a reduction axis is called ``axis``.
Each function is one registered op with a fused VJP rule and works on every
backend; raw backend arrays are accepted and wrapped. The ops live in the
modules of this package by family, each with its rule beside it:

- ``linear``: linear
- ``activations``: relu, gelu, silu, sigmoid, softplus, softmax, log_softmax, logsumexp,
  leaky_relu, elu, mish, hardswish, glu, softmin
- ``losses``: cross_entropy, nll_loss, mse_loss, l1_loss, huber_loss, smooth_l1_loss,
  kl_div, binary_cross_entropy, binary_cross_entropy_with_logits
- ``similarity``: cosine_similarity, normalize
- ``conv``: conv2d, conv_transpose2d, and conv1d, conv_transpose1d (over the 2-D ops)
- ``pooling``: max_pool2d, avg_pool2d, and max_pool1d, avg_pool1d (over the 2-D ops)
- ``resample``: adaptive_avg_pool1d, adaptive_avg_pool2d, interpolate (compositions)
- ``recurrent``: gru_cell, gru_sequence, lstm_cell, gated_memory_cell
- ``attention``: rope, scaled_dot_product_attention, self_attention_packed
- ``normalization``: layer_norm, batch_norm, group_norm, rms_norm
- ``embedding``: embedding; ``dropout``: dropout
- ``padding``: pad, one_hot

The modules ``linear``, ``embedding`` and ``dropout`` are shadowed here by the
functions of their names: import from them (``from autodiff.nn.functional.dropout
import masks``) rather than reach them as attributes of this package.
"""

from __future__ import annotations

from . import (
    activations,
    attention,
    conv,
    losses,
    normalization,
    padding,
    pooling,
    recurrent,
    resample,
    similarity,
)
from . import dropout as _dropout  # the name ``dropout`` is the function
from . import embedding as _embedding  # the name ``embedding`` is the function
from . import linear as _linear  # the name ``linear`` is the function below
from .activations import *  # noqa: F403
from .attention import *  # noqa: F403
from .conv import *  # noqa: F403
from .dropout import *  # noqa: F403
from .embedding import *  # noqa: F403
from .linear import *  # noqa: F403
from .losses import *  # noqa: F403
from .normalization import *  # noqa: F403
from .padding import *  # noqa: F403
from .pooling import *  # noqa: F403
from .recurrent import *  # noqa: F403
from .resample import *  # noqa: F403
from .similarity import *  # noqa: F403

_FAMILIES = (
    _linear,
    activations,
    losses,
    similarity,
    conv,
    pooling,
    resample,
    recurrent,
    attention,
    normalization,
    _embedding,
    _dropout,
    padding,
)
__all__ = [name for module in _FAMILIES for name in module.__all__]
