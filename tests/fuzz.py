"""A property-based fuzzer: random programs of 3-12 ops, run on our namespace and on
array_api_compat's torch namespace (torch.autograd) from the same program text, their
gradients compared first and second order (and with central differences). One program
in four is complex (complex128 inputs, the steps that take complex values, losses
``Re(sum(v * w))``: PyTorch's convention is checked too).

    python -m tests.fuzz --programs 2000 --seed 1

prints each failing program (its steps, as code) and a summary. The test-suite runs a
fixed seed and a bounded count (tests/test_fuzz.py).

A program starts from one to three float64 inputs of random shapes (0-d, size-1 and
size-0 axes included) and applies steps drawn from the table below, each written once
against the standard (``m`` is the namespace). A step whose shapes don't fit is drawn
again: a dry run on NumPy decides. Values are kept away from kinks and poles (``abs``
of values near 0, ``max`` ties, division by ~0, repeated singular values) by the steps
themselves or by a test of the dry run's values (KINKS), so a mismatch is a wrong
gradient, not a non-differentiable point. nn.functional ops run as ours, torch's and a
NumPy formula of their own (``_nn``); factorizations are compared through values blind
to LAPACK's sign choices.
"""

from __future__ import annotations

import argparse
import math
import re
import sys

import numpy as np

SHAPES = [(), (3,), (2, 3), (1, 3), (2, 1), (3, 1, 2), (0, 3), (2, 0)]


# step name -> (arity, code with a, b: the operands). Each is an expression in ``m``.
UNARY = {
    "exp": "m.exp(m.tanh(a))",
    "sin": "m.sin(a)",
    "tanh": "m.tanh(a)",
    "square": "m.square(a)",
    "sqrt": "m.sqrt(a * a + 0.5)",
    "log": "m.log(m.abs(a) + 1.0)",
    "abs": "m.abs(a + 0.3)",
    "neg_recip": "-1.0 / (a * a + 1.0)",
    "sum_all": "m.sum(a)",
    "sum_0": "m.sum(a, axis=0)",
    "mean_last_keep": "m.mean(a, axis=-1, keepdims=True)",
    "max_last": "m.max(a + 0.0, axis=-1)",
    "prod_0": "m.prod(m.tanh(a) + 1.5, axis=0)",
    "cumsum_0": "m.cumulative_sum(a, axis=0)",
    "std_last": "m.std(a * 3.0, axis=-1, correction=0.0)",
    "reshape_flat": "m.reshape(a, (-1,))",
    "transpose": "m.matrix_transpose(a)",
    "flip": "m.flip(a, axis=0)",
    "expand0": "m.expand_dims(a, axis=0)",
    "slice": "a[..., :2]",
    "take0": "m.take(a, m.asarray([0, 0]), axis=0)",
    "where_pos": "m.where(a > 0.1, a * 2.0, -a)",
    "setitem": "_setitem(m, a)",
    "clip": "m.clip(a, -0.5, 0.7)",
    "concat_self": "m.concat([a, a * 0.5], axis=0)",
    "stack_self": "m.stack([a, m.sin(a)], axis=0)",
    "softmax_last": "_softmax(m, a)",
    "conj": "m.conj(a) * (1.0 + 0.5j) if m.isdtype(a.dtype, 'complex floating') else a",
    "real": "m.real(a)",
    "imag": "m.imag(a) if m.isdtype(a.dtype, 'complex floating') else a",
    "gram_inv": "m.linalg.inv(_gram(m, a))",
    "gram_det": "m.linalg.det(_gram(m, a))",
    "gram_solve": "m.linalg.solve(_gram(m, a), a)",
    "gram_cholesky": "m.linalg.cholesky(_gram(m, a))",
    "gram_eigvalsh": "m.linalg.eigvalsh(_gram(m, a))",
    "vector_norm": "m.linalg.vector_norm(a, axis=-1)",
    "relu": "_nn(m, 'relu')(a + 0.013)",
    "gelu": "_nn(m, 'gelu')(a)",
    "silu": "_nn(m, 'silu')(a)",
    "softplus": "_nn(m, 'softplus')(a)",
    "log_softmax": "_nn(m, 'log_softmax')(a)",
    "sigmoid": "_nn(m, 'sigmoid')(a)",
    "nn_softmax": "_nn(m, 'softmax')(a)",
    "logsumexp": "_nn(m, 'logsumexp')(a)",
    "layer_norm": "_nn(m, 'layer_norm')(a, (a.shape[-1],))",
    "attention": "_nn(m, 'scaled_dot_product_attention')(a, a, a)",
    "attention_causal": "_nn(m, 'scaled_dot_product_attention')(a, a, a, is_causal=True)",
    "conv2d": "_nn(m, 'conv2d')(_image(m, a), _kernel(m, a))[0, 0, ...]",
    "avg_pool2d": "_nn(m, 'avg_pool2d')(_image(m, a), 2)[0, 0, ...]",
    "max_pool2d": "_nn(m, 'max_pool2d')(_image(m, a), 2)[0, 0, ...]",
    "cross_entropy": "_nn(m, 'cross_entropy')(a, _targets(m, a))",
    "rope": "_nn(m, 'rope')(a)",
    "qr_rtr": "_qr_rtr(m, a)",
    "qr_qr": "_qr_qr(m, a)",
    "svd_usv": "_svd_usv(m, a)",
    "svdvals": "m.linalg.svdvals(a)",
    "gram_slogdet": "m.linalg.slogdet(_gram(m, a))[1]",
    "gram_pinv": "m.linalg.pinv(_gram(m, a))",
    "norm_fro": "m.linalg.matrix_norm(a, ord='fro')",
    "norm_nuc": "m.linalg.matrix_norm(a, ord='nuc')",
    "gram_eigh_top": "_eigh_top(m, a)",
    "trace": "m.linalg.trace(a)",
    "gram_power": "m.linalg.matrix_power(0.25 * _gram(m, a), 2)",  # small: central differences
    "cumprod_0": "m.cumulative_prod(m.tanh(_at_least(a, 1)) + 1.5, axis=0)",
    "var_last": "m.var(a, axis=-1, correction=1.0)",
    "sort_last": "m.sort(a, axis=-1)",
    "argmax_take": "m.take_along_axis(a, m.argmax(a, axis=-1, keepdims=True), axis=-1)",
    "mask": "a[a > 0.2]",
    "moveaxis": "m.moveaxis(a, 0, -1)",
    "roll_flat": "m.roll(a, 2)",
    "roll_0": "m.roll(a, -1, axis=0)",
    "tile": "m.tile(a, (2, 1))",
    "repeat_0": "m.repeat(_at_least(a, 1), 2, axis=0)",
    "squeeze_0": "m.squeeze(_at_least(a, 1), axis=0)",
    "broadcast_to": "m.broadcast_to(a, (2,) + tuple(a.shape))",
    "tril": "m.tril(_at_least(a, 2))",
    "triu": "m.triu(_at_least(a, 2), k=1)",
}
# The steps a complex program draws from (the others are defined for real values).
COMPLEX_OK = {
    "exp", "sin", "tanh", "square", "sqrt", "abs", "neg_recip", "sum_all", "sum_0",
    "mean_last_keep", "prod_0", "cumsum_0", "reshape_flat", "transpose", "flip", "expand0",
    "slice", "take0", "setitem", "concat_self", "stack_self", "gram_inv", "gram_det",
    "gram_solve", "vector_norm", "add", "sub", "mul", "div", "matmul", "conj", "real",
    "imag", "vecdot", "gram_cholesky", "gram_eigvalsh", "qr_rtr", "qr_qr", "svd_usv",
    "svdvals", "gram_slogdet", "gram_pinv", "norm_fro", "norm_nuc", "gram_eigh_top", "trace",
    "gram_power", "cumprod_0", "moveaxis", "roll_flat", "roll_0", "tile", "repeat_0",
    "squeeze_0", "broadcast_to", "tril", "triu", "outer", "tensordot", "cross",
}  # fmt: skip

# Steps with points where they are not (twice) differentiable, and the test of the dry
# run's values (the step's, then its operands') that keeps a program away from them.
KINKS = {
    "std_last": lambda out, *_: np.any(np.abs(out) < 1e-3),  # std of equal values
    # ties (a step may give b = a: attention over one key, a reconstruction, relu's 0s)
    "max_last": lambda out, a: _tied_max(a),
    "where_ab": lambda out, a, b: np.any(np.abs(a - b) < 1e-3),
    "maximum": lambda out, a, b: np.any(np.abs(a - b - 0.013) < 1e-3),
    "vector_norm": lambda out, *_: np.any(np.abs(out) < 1e-3),
    "norm_fro": lambda out, *_: np.any(np.abs(out) < 1e-3),
    # repeated eigenvalues: no second derivative (2 I, from a zero matrix)
    "gram_eigvalsh": lambda out, *_: _crowded(out, zero=False),
    # an eigenvector's derivative has 1 / (w_i - w_j): the gram's eigenvalues apart
    "gram_eigh_top": lambda out, a: _crowded(np.linalg.eigvalsh(_gram(np, a)), zero=False),
    # singular vectors need distinct nonzero singular values (1 / (s_i^2 - s_j^2), 1 / s)
    "svdvals": lambda out, *_: _crowded(out),
    "svd_usv": lambda out, a: _crowded(np.linalg.svd(a, compute_uv=False)),
    "norm_nuc": lambda out, a: _crowded(np.linalg.svd(a, compute_uv=False)),
    # R's derivative has R^-1 (for a wide a, that of its leading square block)
    "qr_rtr": lambda out, a: _rank_deficient(a),
    "qr_qr": lambda out, a: _rank_deficient(a),
    "sort_last": lambda out, *_: _crowded(out, zero=False),  # ties swap places
    "argmax_take": lambda out, a: _tied_max(a),
    "max_pool2d": lambda out, a: _tied_max(_windows(a)),  # ties inside a window
    "mask": lambda out, a: np.any(np.abs(a - 0.2) < 1e-3),  # an element crossing 0.2
}
BINARY = {
    "add": "a + b",
    "sub": "a - b",
    "mul": "a * b",
    "div": "a / (b * b + 0.5)",
    "maximum": "m.maximum(a, b + 0.013)",
    "matmul": "a @ b",
    "where_ab": "m.where(a > b, a, b * 0.5)",
    "pow": "(a * a + 0.5) ** m.tanh(b)",
    "atan2": "m.atan2(a, b * b + 0.5)",
    "vecdot": "m.vecdot(a, b)",
    "logaddexp": "m.logaddexp(a, b)",
    "linear": "_nn(m, 'linear')(a, b)",
    "mse_loss": "_nn(m, 'mse_loss')(a, b)",
    "bce_logits": "_nn(m, 'binary_cross_entropy_with_logits')(a, _nn(m, 'sigmoid')(b))",
    "outer": "m.linalg.outer(a, b)",
    "tensordot": "m.tensordot(a, b, axes=1)",
    "cross": "m.linalg.cross(a, b)",
}


def _setitem(m, a):
    out = a * 1.0
    out[..., :1] = 0.5 * a[..., :1]
    return out


def _ct(m, a):
    """The conjugate transpose of a (stack of) matrix (the transpose of a real one)."""
    t = m.matrix_transpose(a)
    return m.conj(t) if m.isdtype(t.dtype, "complex floating") else t


def _gram(m, a):
    """A Hermitian positive definite matrix made of ``a`` (..., n, k): a a^H + 2 I."""
    return a @ _ct(m, a) + 2.0 * m.eye(a.shape[-2], dtype=a.dtype)


def _at_least(a, ndim):
    """``a`` if it has ``ndim`` axes or more, else the dry run drops the step: NumPy takes
    a vector for tril, triu (torch and the standard don't), a 0-d array for axis 0 of
    squeeze, repeat, cumulative_prod (torch refuses some; cumulative_prod's shape is 1-D
    in NumPy, 0-d in torch)."""
    if a.ndim < ndim:
        raise ValueError(f"fewer than {ndim} axes")
    return a


def _image(m, a):
    """A matrix (H, W), H and W >= 2, as one single-channel image (1, 1, H, W)."""
    if a.ndim != 2 or min(a.shape) < 2:
        raise ValueError("not an image of at least 2 x 2")
    return m.reshape(a, (1, 1) + tuple(a.shape))


def _kernel(m, a):
    """A fixed 2 x 2 filter (1, 1, 2, 2) of ``a``'s dtype, made by the namespace."""
    return m.asarray([[[[0.5, -1.0], [0.25, 2.0]]]], dtype=a.dtype)


def _targets(m, a):
    """Fixed class indices 0, 1, ... mod C for logits ``a`` (N, C): int64, as torch needs."""
    if a.ndim != 2:
        raise ValueError("not logits (N, C)")
    return m.asarray([k % a.shape[1] for k in range(a.shape[0])], dtype=m.int64)


def _rope(m, a):
    """Rotary embedding over (..., seq, dim) in the standard (torch has none): split
    halves, positions 0 .. seq - 1, base 10000, as F.rope's defaults."""
    if a.ndim < 2 or a.shape[-1] % 2:
        raise ValueError("not (..., seq, even dim)")
    half = a.shape[-1] // 2
    theta = m.arange(a.shape[-2], dtype=a.dtype)[:, None] * 10000.0 ** (
        -2.0 * m.arange(half, dtype=a.dtype) / a.shape[-1]
    )
    c, s = m.cos(theta), m.sin(theta)
    x, y = a[..., :half], a[..., half:]
    return m.concat([x * c - y * s, x * s + y * c], axis=-1)


# Factorizations through values that don't depend on LAPACK's sign (phase) choices:
# NumPy's and torch's may differ, so Q, R, U, V themselves are never compared.
def _qr_rtr(m, a):
    """R^H R of a = QR (that is a^H a)."""
    r = m.linalg.qr(a)[1]
    return _ct(m, r) @ r


def _qr_qr(m, a):
    q, r = m.linalg.qr(a)
    return q @ r


def _svd_usv(m, a):
    """U diag(S) V^H of the thin SVD (that is a)."""
    u, s, vh = m.linalg.svd(a, full_matrices=False)
    return (u * s[..., None, :]) @ vh


def _eigh_top(m, a):
    """w v v^H for the largest eigenvalue w of the gram of ``a`` and its eigenvector v."""
    if a.shape[-2] == 0:
        raise ValueError("no eigenvalue")
    w, v = m.linalg.eigh(_gram(m, a))
    return (v[..., -1:] * w[..., None, -1:]) @ _ct(m, v[..., -1:])


# The kink tests (NumPy, on the dry run's values).
def _crowded(s, zero=True):
    """Whether values along the last axis lie within 1e-3 of each other (or of 0)."""
    s = np.sort(s, axis=-1)
    return bool(np.any(np.diff(s, axis=-1) < 1e-3) or (zero and np.any(np.abs(s) < 1e-3)))


def _rank_deficient(a):
    """Whether ``a`` (or its leading square block, which a wide a's R needs) is within
    1e-3 of a singular matrix."""
    k = min(a.shape[-2:])
    blocks = (a, a[..., :k, :k])
    return any(np.any(np.linalg.svd(x, compute_uv=False) < 1e-3) for x in blocks)


def _tied_max(a):
    """Whether the two largest values along the last axis lie within 1e-3."""
    if np.ndim(a) == 0:
        return False
    s = np.sort(a, axis=-1)
    return s.shape[-1] > 1 and bool(np.any(s[..., -1] - s[..., -2] < 1e-3))


def _windows(a):
    """The 2 x 2 windows of max_pool2d on ``a`` (H, W), as (H // 2, W // 2, 4)."""
    h, w = a.shape[0] // 2, a.shape[1] // 2
    return a[: 2 * h, : 2 * w].reshape(h, 2, w, 2).transpose(0, 2, 1, 3).reshape(h, w, 4)


# nn ops that reduce over an axis: ``axis`` ours, ``dim`` torch's (the last one here)
_LAST_AXIS = {"softmax", "log_softmax", "logsumexp"}


def _nn(m, name):
    """The nn.functional op ``name`` of ``m``'s library: ours, or torch's for torch's
    namespace (its softmax family takes ``dim``, ours ``axis``)."""
    if getattr(m, "__name__", "").startswith("array_api_compat.torch"):
        import torch

        if name == "logsumexp":  # torch.logsumexp: not in torch.nn.functional
            return lambda a: torch.logsumexp(a, dim=-1)
        if name == "rope":  # torch has none: the formula, on torch's namespace
            return lambda a: _rope(m, a)
        if name == "scaled_dot_product_attention":  # the math kernel: twice differentiable
            return _torch_attention
        f = getattr(torch.nn.functional, name)
        return (lambda a: f(a, dim=-1)) if name in _LAST_AXIS else f
    if m.__name__ == "numpy":  # the dry run: NumPy formulas of the same functions
        return _NUMPY_NN[name]
    from autodiff.nn import functional as F

    f = getattr(F, name)
    return (lambda a: f(a, axis=-1)) if name in _LAST_AXIS else f


def _torch_attention(*args, **kwargs):
    """torch's attention through its math kernel (its CPU flash kernel has no double
    backward)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return torch.nn.functional.scaled_dot_product_attention(*args, **kwargs)


def _np_log_softmax(a):
    z = a - a.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def _np_logsumexp(a):
    top = a.max(axis=-1, keepdims=True)
    return (top + np.log(np.exp(a - top).sum(axis=-1, keepdims=True)))[..., 0]


def _np_layer_norm(a, shape):
    if a.shape[-1:] != shape:
        raise ValueError("normalized_shape is not the last axis")
    return (a - a.mean(axis=-1, keepdims=True)) / np.sqrt(a.var(axis=-1, keepdims=True) + 1e-5)


def _np_attention(q, k, v, is_causal=False):
    if q.ndim < 2 or 0 in q.shape[-2:]:  # no query or no feature: not compared
        raise ValueError("attention on (..., L, E), L and E >= 1")
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if is_causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    return np.exp(_np_log_softmax(s)) @ v


def _np_linear(x, w):
    if w.ndim != 2 or x.ndim < 1 or x.shape[-1] != w.shape[1]:
        raise ValueError("linear needs x (..., in) and weight (out, in)")
    return x @ w.T


def _same_shapes(f):
    """``f(a, b)`` of two arrays of one shape (ours refuses others, torch's mse_loss
    broadcasts them)."""

    def g(a, b):
        if a.shape != b.shape:
            raise ValueError("shapes differ")
        return f(a, b)

    return g


def _np_conv2d(x, w):
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[-2:], axis=(-2, -1))
    return np.einsum("nchwij,ocij->nohw", windows, w)


def _np_pool(reduce):
    def pool(x, k):
        n, c, h, w = x.shape[0], x.shape[1], x.shape[2] // k, x.shape[3] // k
        return reduce(x[:, :, : h * k, : w * k].reshape(n, c, h, k, w, k), axis=(3, 5))

    return pool


def _np_cross_entropy(z, t):
    return np.mean(_np_logsumexp(z) - z[np.arange(len(t)), t])


_NUMPY_NN = {
    "relu": lambda a: np.maximum(a, 0.0),
    "gelu": lambda a: a * 0.5 * (1 + np.vectorize(math.erf, otypes=[float])(a / 2**0.5)),
    "silu": lambda a: a / (1 + np.exp(-a)),
    "softplus": lambda a: np.log1p(np.exp(a)),
    "log_softmax": _np_log_softmax,
    "sigmoid": lambda a: 1 / (1 + np.exp(-a)),
    "softmax": lambda a: np.exp(_np_log_softmax(a)),
    "logsumexp": _np_logsumexp,
    "layer_norm": _np_layer_norm,
    "scaled_dot_product_attention": _np_attention,
    "linear": _np_linear,
    "mse_loss": _same_shapes(lambda a, b: np.mean((a - b) ** 2)),
    "binary_cross_entropy_with_logits": _same_shapes(
        lambda x, y: np.mean(np.logaddexp(0.0, x) - x * y)
    ),
    "conv2d": _np_conv2d,
    "avg_pool2d": _np_pool(np.mean),
    "max_pool2d": _np_pool(np.max),
    "cross_entropy": _np_cross_entropy,
    "rope": lambda a: _rope(np, a),
}


def _softmax(m, a):
    e = m.exp(a - m.max(a, axis=-1, keepdims=True))
    return e / m.sum(e, axis=-1, keepdims=True)


# what the steps' code may call, besides ``m``
_HELPERS = {
    f.__name__: f
    for f in (_setitem, _softmax, _gram, _nn, _image, _kernel, _targets, _at_least, _qr_rtr,
              _qr_qr, _svd_usv, _eigh_top)
}  # fmt: skip


def _run(m, steps, inputs):
    """The values of a program on namespace ``m``: its inputs, then one per step."""
    vals = list(inputs)
    env = {"m": m, **_HELPERS}
    for code, i, j in steps:
        env["a"], env["b"] = vals[i], (vals[j] if j is not None else None)
        vals.append(eval(code, env))  # noqa: S307 - our own table of expressions
    return vals


def make_program(rng):
    """(input arrays, steps): each step (code, operand index, operand index or None).
    One program in four is complex: complex128 inputs, steps from COMPLEX_OK."""
    n_in = int(rng.integers(1, 4))
    shapes = [SHAPES[int(rng.integers(len(SHAPES)))] for _ in range(n_in)]
    inputs = [rng.uniform(-1.5, 1.5, s) for s in shapes]
    cplx = rng.random() < 0.25
    if cplx:
        inputs = [np.asarray(a + 1j * rng.uniform(-1.0, 1.0, a.shape)) for a in inputs]
    unary = [n for n in UNARY if not cplx or n in COMPLEX_OK]
    binary = [n for n in BINARY if not cplx or n in COMPLEX_OK]
    import numpy as m  # the dry run: NumPy decides whether the shapes fit

    vals = list(inputs)
    steps = []
    target = int(rng.integers(3, 13))
    tries = 0
    while len(steps) < target and tries < 200:
        tries += 1
        if rng.random() < 0.35 and len(vals) > 1:
            name = binary[int(rng.integers(len(binary)))]
            code = BINARY[name]
            i, j = (int(k) for k in rng.choice(len(vals), size=2))
        else:
            name = unary[int(rng.integers(len(unary)))]
            code = UNARY[name]
            i, j = int(rng.integers(len(vals))), None
        operands = [vals[i]] + ([vals[j]] if j is not None else [])
        try:
            with np.errstate(all="ignore"):
                (out,) = _run(m, [(code, 0, None if j is None else 1)], operands)[-1:]
        except Exception:
            continue
        out = np.asarray(out)
        if (
            out.dtype.kind not in "fc"
            or out.ndim > 4
            or out.size > 64
            or not np.all(np.isfinite(out))
        ):
            continue
        if name in KINKS and KINKS[name](out, *operands):
            continue
        steps.append((code, i, j))
        vals.append(out)
    return inputs, steps


def _loss(m, vals, weights, to):
    """sum over every value of Re(sum(v * w)): every step's gradient is exercised (w is
    complex for a complex v)."""
    total = 0.0
    for v, w in zip(vals, weights):
        total = total + m.sum(m.real(v * to(w)))
    return total


def _host(g, like):
    """A torch gradient as NumPy (torch may hand back a lazy zero tensor)."""
    if g is None or g._is_zerotensor():
        return np.zeros_like(like)
    return g.detach().resolve_conj().resolve_neg().numpy()


OK, FAIL, SKIP = "ok", "fail", "skip"


def _backend_refuses(xp, steps, inputs):
    """Whether the backend itself (no autodiff) raises on the program."""
    from autodiff.engine.namespace import recorder_of

    B = recorder_of(xp.asarray(0.0)).backend
    try:
        with np.errstate(all="ignore"):
            _run(B, steps, [B.asarray(a) for a in inputs])
    except Exception:
        return True
    return False


def check(inputs, steps, xp, seed=0, central=True):
    """(OK, "") if our gradients (first and second order) equal torch's and central
    differences; (FAIL, the first mismatch); (SKIP, why) where torch can't run the
    program or computes other shapes (its backend, not ours)."""
    import torch
    from array_api_compat import torch as ct

    rng = np.random.default_rng(seed)
    with np.errstate(all="ignore"):
        import numpy as m

        shapes = [np.shape(v) for v in _run(m, steps, inputs)]
    kinds = [np.iscomplexobj(v) for v in _run(m, steps, inputs)]

    def draw(shape, c):
        return rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if c else 0)

    weights = [draw(sh, c) for sh, c in zip(shapes, kinds)]
    vs = [draw(np.shape(a), np.iscomplexobj(a)) for a in inputs]

    ts = [xp.asarray(a, requires_grad=True) for a in inputs]
    try:
        vals = _run(xp, steps, ts)
    except Exception as exc:
        if _backend_refuses(xp, steps, inputs):  # array_api_strict: out-of-bounds slices
            return SKIP, f"the backend refuses it: {type(exc).__name__}: {exc}"
        raise
    loss = _loss(xp, vals, weights, xp.asarray)
    loss.backward(create_graph=True)
    ours = [np.zeros_like(a) if t.grad is None else np.asarray(t.grad.detach()) for t, a in
            zip(ts, inputs)]  # fmt: skip
    hv = [t.grad for t in ts if t.grad is not None and t.grad.requires_grad]
    ours2 = [np.zeros_like(a) for a in inputs]
    if hv:
        h = sum(xp.sum(xp.real(t.grad * xp.asarray(np.conj(v)))) for t, v in zip(ts, vs)
                if t.grad is not None and t.grad.requires_grad)  # fmt: skip
        for t in ts:
            t.grad = None
        h.backward()
        ours2 = [np.zeros_like(a) if t.grad is None else np.asarray(t.grad) for t, a in
                 zip(ts, inputs)]  # fmt: skip

    tts = [torch.tensor(a, requires_grad=True) for a in inputs]
    try:
        tvals = _run(ct, steps, tts)
    except Exception as exc:  # torch (through array-api-compat) can't run it: not ours
        return SKIP, f"torch can't run it: {type(exc).__name__}: {exc}"
    if [tuple(v.shape) for v in tvals] != [tuple(s) for s in shapes]:
        # NumPy's cumulative_sum of a 0-d array is 1-D, torch's 0-d: nothing to compare
        return SKIP, "torch's values have other shapes than NumPy's"
    tloss = _loss(ct, tvals, weights, torch.tensor)
    tg = torch.autograd.grad(tloss, tts, create_graph=True, allow_unused=True)
    theirs = [_host(g, a) for g, a in zip(tg, inputs)]
    terms = [(g * torch.tensor(np.conj(v))).real.sum() for g, v in zip(tg, vs)
             if g is not None and g.requires_grad]  # fmt: skip
    theirs2 = [np.zeros_like(a) for a in inputs]
    if terms:
        t2 = torch.autograd.grad(sum(terms), tts, allow_unused=True)
        theirs2 = [_host(g, a) for g, a in zip(t2, inputs)]

    for order, a_list, b_list in ((1, ours, theirs), (2, ours2, theirs2)):
        for k, (a, b) in enumerate(zip(a_list, b_list)):
            if a.shape != b.shape or not np.allclose(a, b, rtol=1e-7, atol=1e-9):
                return FAIL, f"order {order}, input {k}: ours {a!r}, torch {b!r}"
    if central:
        eps = 1e-6
        with np.errstate(all="ignore"):
            for k, a in enumerate(inputs):
                num = np.zeros_like(a)
                # a complex input: along its real and its imaginary part (PyTorch's
                # convention: grad = dL/dx + i dL/dy)
                for step in (1.0, 1j) if np.iscomplexobj(a) else (1.0,):
                    for idx in np.ndindex(a.shape):
                        f = []
                        for sgn in (1, -1):
                            pert = [x.copy() for x in inputs]
                            pert[k][idx] += sgn * eps * step
                            vals = _run(m, steps, pert)
                            f.append(sum(float(np.sum(np.real(np.asarray(v) * w)))
                                         for v, w in zip(vals, weights)))  # fmt: skip
                        num[idx] += step * (f[0] - f[1]) / (2 * eps)
                if not np.allclose(ours[k], num, rtol=1e-5, atol=1e-6):
                    return (
                        FAIL,
                        f"central differences, input {k}: ours {ours[k]!r}, numeric {num!r}",
                    )
    return OK, ""


def program_text(inputs, steps):
    lines = [f"x{k} = {np.array2string(np.asarray(a), separator=', ')}  # shape {np.shape(a)}"
             for k, a in enumerate(inputs)]  # fmt: skip
    n = len(inputs)
    for s, (code, i, j) in enumerate(steps):
        text = re.sub(r"\ba\b", f"x{i}", code)
        if j is not None:
            text = re.sub(r"\bb\b", f"x{j}", text)
        lines.append(f"x{n + s} = {text}")
    return "\n".join(lines)


def fuzz(programs, seed, xp=None):
    """{OK: count, SKIP: count, FAIL: [(program text, what)]}."""
    import autodiff as ad

    xp = xp or ad.Autodiff(np)
    rng = np.random.default_rng(seed)
    out = {OK: 0, SKIP: 0, FAIL: []}
    for p in range(programs):
        inputs, steps = make_program(rng)
        try:
            status, what = check(inputs, steps, xp, seed=p)
        except Exception as exc:  # a crash on valid input is a failure too
            status, what = FAIL, f"{type(exc).__name__}: {exc}"
        if status == FAIL:
            out[FAIL].append((program_text(inputs, steps), what))
        else:
            out[status] += 1
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.splitlines()[0])
    p.add_argument("--programs", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="numpy", help="numpy or array_api_strict")
    args = p.parse_args(argv)
    import importlib

    import autodiff as ad

    xp = ad.Autodiff(importlib.import_module(args.backend))
    out = fuzz(args.programs, args.seed, xp)
    for text, what in out[FAIL]:
        print(f"---\n{text}\n# {what}")
    print(f"{args.programs} programs on {args.backend}, seed {args.seed}: {out[OK]} matched "
          f"torch.autograd and central differences (first and second order), "
          f"{len(out[FAIL])} failed, {out[SKIP]} that torch or the backend can't run "
          "alike")  # fmt: skip
    return 1 if out[FAIL] else 0


if __name__ == "__main__":
    sys.exit(main())


def check_jit(inputs, steps, xp, seed=0):
    """(OK, "") if ``ad.jit`` of the program's ``value_and_grad`` (the loss of ``_loss``)
    equals eager bit for bit, on the tracing call and on a replay at other values;
    (FAIL, what differed or what raised); (SKIP, why) where eager itself raises."""
    import autodiff as ad

    rng = np.random.default_rng(seed)
    with np.errstate(all="ignore"):
        vals = _run(np, steps, inputs)
    weights = [rng.standard_normal(np.shape(v))
               + (1j * rng.standard_normal(np.shape(v)) if np.iscomplexobj(v) else 0)
               for v in vals]  # fmt: skip

    def loss(*ins):
        return _loss(xp, _run(xp, steps, ins), weights, xp.asarray)

    eager = ad.value_and_grad(loss, argnums=tuple(range(len(inputs))))
    jitted = ad.jit(eager)
    for shift in (0.0, 0.01):  # the trace, then a replay
        ins = [xp.asarray(np.asarray(a) + shift) for a in inputs]
        try:
            with np.errstate(all="ignore"):
                want = eager(*ins)
        except Exception as exc:  # the backend's refusal (strict's slices), not jit's
            return SKIP, f"{type(exc).__name__}: {exc}"
        try:
            with np.errstate(all="ignore"):
                got = jitted(*ins)
        except Exception as exc:
            return FAIL, f"{type(exc).__name__}: {exc}"
        (wv, wg), (gv, gg) = want, got
        for w, g in zip((wv, *wg), (gv, *gg)):
            if not np.array_equal(np.asarray(w.data), np.asarray(g.data), equal_nan=True):
                return FAIL, f"shift {shift}: jit {g} != eager {w}"
    if jitted.traces != 1:
        return FAIL, f"traced {jitted.traces} times"
    return OK, ""
