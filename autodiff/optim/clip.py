"""Gradient clipping, as torch.nn.utils: ``clip_grad_norm_`` and ``clip_grad_value_``.

Both write the gradients in place (on a lazy backend they rebind and persist them,
so that the step that reads them computes the backward pass once).
"""

from __future__ import annotations

from .. import checks
from ..engine.namespace import recorder_of
from ..engine.tensor import Tensor
from ..engine.versions import bump
from .optimizer import _lazy, _persist


def _tensors(owner, parameters) -> list:
    """``parameters`` (a Tensor or an iterable of them) as a list, each checked."""
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(f"{owner}: parameters must be Tensors, got a {type(p).__name__}")
    return params


def clip_grad_value_(parameters, clip_value):
    """Clamp every gradient in place to ``[-clip_value, clip_value]``, as torch.

    ``g = clip(g, -clip_value, clip_value)``; parameters without a gradient are skipped.
    """
    clip_value = float(checks.number("clip_grad_value_", "clip_value", clip_value, 0))
    grads = [p.grad for p in _tensors("clip_grad_value_", parameters) if p.grad is not None]
    for g in grads:
        B = recorder_of(g).backend
        g.data = B.set_(g.data, ..., B.clip(g.data, -clip_value, clip_value))
        bump(g)
    if grads and _lazy(recorder_of(grads[0]).backend):
        _persist(recorder_of(grads[0]).backend, grads)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale the gradients in place so that their joint norm is at most ``max_norm``.

    ``total = ||(||g_1||, ..., ||g_n||)||``; each ``g *= min(max_norm/(total+1e-6), 1)``.
    Returns ``total`` as a 0-d Tensor without history. The coefficient stays an
    array (no read back to the host), so the gradients are always multiplied.
    """
    checks.number("clip_grad_norm_", "max_norm", max_norm, 0)
    if norm_type in ("inf", "-inf"):  # torch takes these spellings too
        norm_type = float(norm_type)
    norm_type = float(checks.number("clip_grad_norm_", "norm_type", norm_type))
    checks.flag("clip_grad_norm_", "error_if_nonfinite", error_if_nonfinite)
    params = _tensors("clip_grad_norm_", parameters)
    if not params:
        raise ValueError("clip_grad_norm_: got no parameters")
    grads = [p.grad for p in params if p.grad is not None]
    rec = recorder_of(params[0])
    B = rec.backend
    if not grads:
        p = params[0].data
        return rec.wrap(B.zeros((), dtype=p.dtype, device=B.device_of(p)))
    norms = [B.asarray(B.linalg.vector_norm(g.data, ord=norm_type)) for g in grads]
    total = B.linalg.vector_norm(B.stack(norms), ord=norm_type)
    out = {"total": B.asarray(total)}  # numpy gives a scalar for a 0-d result
    lazy = _lazy(B)
    if error_if_nonfinite:
        if lazy:  # the check reads the total: compute it and the gradients once
            _persist(B, grads, [out])
        if not bool(B.all(B.isfinite(out["total"]))):
            raise RuntimeError(
                f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
                "non-finite, so it can't be clipped; pass error_if_nonfinite=False to skip "
                "the check"
            )
    coef = B.minimum(B.asarray(max_norm / (out["total"] + 1e-6)), 1.0)
    for g in grads:
        c = coef if coef.dtype == g.data.dtype else B.astype(coef, g.data.dtype)
        g.data *= c
        bump(g)
    if lazy:
        _persist(B, grads, [out])
    return rec.wrap(out["total"])
