"""Compare an ``autodiff`` function with its PyTorch twin, forward and backward,
in float64 (used by the tests of ``autodiff.nn.functional``)."""

from __future__ import annotations

import numpy as np


def compare(xp, ours, theirs, inputs, *, rtol=1e-10, atol=1e-10, seed=0):
    """``ours(*tensors)`` on namespace ``xp`` against ``theirs(*torch_tensors)``:
    the outputs and the gradients of ``sum(out * u)`` (``u`` random) for every
    float64 input. ``inputs`` are NumPy arrays; integer ones get no gradient."""
    import torch

    rng = np.random.default_rng(seed)
    ts = []
    for a in inputs:
        t = xp.asarray(a)
        if np.issubdtype(np.asarray(a).dtype, np.floating):
            t.requires_grad = True
        ts.append(t)
    tt = [torch.tensor(np.asarray(a), requires_grad=np.issubdtype(np.asarray(a).dtype, np.floating))
          for a in inputs]  # fmt: skip
    out, ref = ours(*ts), theirs(*tt)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    assert len(outs) == len(refs)
    total, ref_total = None, None
    for o, r in zip(outs, refs):
        np.testing.assert_allclose(np.asarray(o.data), r.detach().numpy(), rtol=rtol, atol=atol)
        u = rng.standard_normal(tuple(r.shape))
        term = xp.sum(o * xp.asarray(u))
        total = term if total is None else total + term
        rterm = (r * torch.tensor(u)).sum()
        ref_total = rterm if ref_total is None else ref_total + rterm
    total.backward()
    ref_total.backward()
    for i, (t, r) in enumerate(zip(ts, tt)):
        if r.requires_grad:
            assert t.grad is not None, f"input {i} got no gradient"
            np.testing.assert_allclose(np.asarray(t.grad.data), r.grad.numpy(), rtol=rtol,
                                       atol=atol, err_msg=f"gradient of input {i}")  # fmt: skip
