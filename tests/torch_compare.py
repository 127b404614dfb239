"""Gradients here and in torch.autograd of one real loss, for the tests that compare
the two: a function ``f(namespace, *tensors)`` runs once on our namespace and once on
array_api_compat's torch namespace (torch's own autograd)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the comparison needs torch")
compat_torch = pytest.importorskip("array_api_compat.torch", reason="needs array-api-compat")


def as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _np_dtype(t):
    return np.dtype(str(t.dtype).rsplit(".", 1)[-1])


def _cotangents(outs, seed):
    rng = np.random.default_rng(seed)
    us = []
    for o in outs:
        u = rng.standard_normal(tuple(o.shape))
        if _np_dtype(o).kind == "c":
            u = u + 1j * rng.standard_normal(tuple(o.shape))
        us.append(u)
    return us


def _loss(ns, outs, us, make):
    """sum over outputs of Re(conj(u) o): a real loss of every output."""
    total = 0.0
    for o, u in zip(outs, us):
        total = total + ns.sum(ns.real(o * make(np.conj(u), o)))
    return total


def ours_and_torch(xp, f, arrays, seed=0):
    """Gradients of one real loss of ``f``'s outputs that require grad, here and in
    torch.autograd (PyTorch's convention: ``z.grad = dL/dx + i dL/dy``), for the inputs
    ``arrays``; each gradient is checked to have its input's dtype and shape."""
    ts = [xp.asarray(a, requires_grad=True) for a in arrays]
    outs = [o for o in as_list(f(xp, *ts)) if o.requires_grad]
    us = _cotangents(outs, seed)
    _loss(xp, outs, us, lambda u, o: xp.asarray(u.astype(_np_dtype(o)))).backward()
    ours = [np.zeros_like(a) if t.grad is None else np.asarray(t.grad) for t, a in zip(ts, arrays)]
    tts = [torch.tensor(a, requires_grad=True) for a in arrays]
    touts = [o for o in as_list(f(compat_torch, *tts)) if o.requires_grad]
    assert len(touts) == len(outs), f"{len(touts)} outputs in torch, {len(outs)} here"
    tloss = _loss(torch, touts, us, lambda u, o: torch.tensor(u, dtype=o.dtype))
    tgs = torch.autograd.grad(tloss, tts, allow_unused=True)
    theirs = [np.zeros_like(a) if g is None else g.detach().resolve_conj().numpy()
              for g, a in zip(tgs, arrays)]  # fmt: skip
    for k, (a, g) in enumerate(zip(arrays, ours)):
        assert g.dtype == a.dtype and g.shape == a.shape, f"input {k}: {g.dtype} {g.shape}"
    return ours, theirs
