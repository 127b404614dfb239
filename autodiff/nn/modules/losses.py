"""Loss modules as in ``torch.nn``: the same names, constructor arguments (the
deprecated ``size_average``/``reduce`` too) and buffers (``weight``, ``pos_weight``);
each calls its ``autodiff.nn.functional`` op."""

from __future__ import annotations

from ... import checks
from ...engine.namespace import recorder_of
from ...engine.tensor import Tensor
from ..functional import losses, similarity
from .module import Module

__all__ = [
    "CrossEntropyLoss",
    "NLLLoss",
    "MSELoss",
    "L1Loss",
    "HuberLoss",
    "SmoothL1Loss",
    "KLDivLoss",
    "BCELoss",
    "BCEWithLogitsLoss",
    "CosineSimilarity",
]

_REDUCTIONS = ("none", "mean", "sum")


def _legacy(owner, size_average, reduce, reduction):
    """torch's rule for the deprecated arguments: either given decides the reduction."""
    if size_average is None and reduce is None:
        return reduction
    for name, v in (("size_average", size_average), ("reduce", reduce)):
        if v is not None:
            checks.flag(owner, name, v)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else ("mean" if size_average else "sum")


def _buffer(owner, name, a):
    if a is None or isinstance(a, Tensor):
        return a
    if getattr(a, "shape", None) is None:
        raise TypeError(f"{owner}: {name} must be an array or None, got {type(a).__name__}")
    return recorder_of(a).xp.asarray(a)


class _Loss(Module):
    _options = _REDUCTIONS

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        owner = type(self).__name__
        reduction = _legacy(owner, size_average, reduce, reduction)
        self.reduction = checks.choice(owner, "reduction", reduction, self._options)

    def extra_repr(self):
        return f"reduction={self.reduction!r}" if self.reduction != "mean" else ""


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", _buffer(type(self).__name__, "weight", weight))


class CrossEntropyLoss(_WeightedLoss):
    """``F.cross_entropy``: integer class targets or class probabilities."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean", label_smoothing=0.0):  # fmt: skip
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = checks.integer("CrossEntropyLoss", "ignore_index", ignore_index)
        checks.number("CrossEntropyLoss", "label_smoothing", label_smoothing, 0.0, 1.0)
        self.label_smoothing = float(label_smoothing)

    def forward(self, input, target):
        return losses.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                                    reduction=self.reduction,
                                    label_smoothing=self.label_smoothing)  # fmt: skip


class NLLLoss(_WeightedLoss):
    """``F.nll_loss`` of log-probabilities."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean"):  # fmt: skip
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = checks.integer("NLLLoss", "ignore_index", ignore_index)

    def forward(self, input, target):
        return losses.nll_loss(input, target, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction)  # fmt: skip


class MSELoss(_Loss):
    """``F.mse_loss``."""

    def forward(self, input, target):
        return losses.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """``F.l1_loss``."""

    def forward(self, input, target):
        return losses.l1_loss(input, target, reduction=self.reduction)


class HuberLoss(_Loss):
    """``F.huber_loss`` (``delta``)."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        checks.number("HuberLoss", "delta", delta, 0.0, open_low=True)
        self.delta = float(delta)

    def forward(self, input, target):
        return losses.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class SmoothL1Loss(_Loss):
    """``F.smooth_l1_loss`` (``beta``)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        checks.number("SmoothL1Loss", "beta", beta, 0.0)
        self.beta = float(beta)

    def forward(self, input, target):
        return losses.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class KLDivLoss(_Loss):
    """``F.kl_div`` ('batchmean' is the divergence; 'mean' averages every element)."""

    _options = _REDUCTIONS + ("batchmean",)

    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = checks.flag("KLDivLoss", "log_target", log_target)

    def forward(self, input, target):
        return losses.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class BCELoss(_WeightedLoss):
    """``F.binary_cross_entropy`` of probabilities."""

    def forward(self, input, target):
        return losses.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """``F.binary_cross_entropy_with_logits`` (``weight``, ``pos_weight`` buffers)."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean",
                 pos_weight=None):  # fmt: skip
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", _buffer("BCEWithLogitsLoss", "weight", weight))
        self.register_buffer("pos_weight", _buffer("BCEWithLogitsLoss", "pos_weight", pos_weight))

    def forward(self, input, target):
        return losses.binary_cross_entropy_with_logits(input, target, self.weight,
                                                       reduction=self.reduction,
                                                       pos_weight=self.pos_weight)  # fmt: skip


class CosineSimilarity(Module):
    """``F.cosine_similarity`` along ``dim`` (torch's name for the module's argument)."""

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim = checks.integer("CosineSimilarity", "dim", dim)
        checks.number("CosineSimilarity", "eps", eps, 0.0)
        self.eps = float(eps)

    def forward(self, x1, x2):
        return similarity.cosine_similarity(x1, x2, axis=self.dim, eps=self.eps)

    def extra_repr(self):
        return f"dim={self.dim}, eps={self.eps}"
