"""Activation functions and the softmax family: one registered op each, with
its own fused VJP rule.

Forwards are written with the standard's functions on the backend ``B``; rules
with the namespace they are given (the raw backend, or the differentiable one
under ``create_graph``), so both run on every backend and rules differentiate
again. The math both share is in plain helpers ``helper(xp, ...)``.
"""

from __future__ import annotations

import math

from ... import checks
from ...backends import device_of
from ...engine.namespace import recorder_of
from ...engine.registry import defop
from ...rules._util import axes_of, keep_shape, reduction_jvp
from ...rules.batch_rules import FLAT, axis
from ._dtypes import dtype_facts

__all__ = [
    "relu", "sigmoid", "silu", "softplus", "gelu", "softmax", "log_softmax", "logsumexp",
    "leaky_relu", "elu", "mish", "hardswish", "glu", "softmin",
]  # fmt: skip

CH = "nn.activation"


# -- helpers (array API on any namespace) ---------------------------------------
def _sigmoid(xp, x):
    """1 / (1 + exp(-x)), exact to rounding for every x (1 + e is computed with full
    relative precision even when e is huge). x is clamped where exp(-x) would
    overflow, far below where sigmoid underflows to 0: no warning, no where (slow
    in NumPy)."""
    low = -87.0 if x.dtype == xp.float32 else -708.0
    e = xp.exp(-xp.maximum(x, xp.asarray(low, dtype=x.dtype, device=device_of(x))))
    e += 1  # e is ours alone
    return 1 / e


# erf on [0, 2]: x * P1(x^2 / 2 - 1); on [2, 6]: 1 - exp(-x^2) / x * P2(3 (2 / x - 2/3));
# 1 beyond (erfc(6) < 2.2e-17). P1, P2: Chebyshev least-squares fits to math.erf made
# for this project (degrees 16 and 12, converted to monomials); max error 8e-16 in
# float64, checked against math.erf in the tests.
_ERF_P1 = (
    0.6749332360396552, -0.2611118609312477, 0.11947913860985698, -0.04866277744911614,
    0.017128344571755022, -0.005234875836397185, 0.001405091423992425,
    -0.0003351435330986578, 7.180100736319196e-05, -1.394627273623251e-05,
    2.475804094356354e-06, -4.045148619467755e-07, 6.119349922375035e-08,
    -8.608787685696722e-09, 1.1357960977602496e-09, -1.4677240762740918e-10,
    1.6481911249773977e-11,
)  # fmt: skip
_ERF_P2 = (
    0.5370034535441773,
    -0.02382655673910265,
    -0.003204801317854641,
    0.0009059268788668283,
    -7.918367797140458e-05,
    -1.2430100080596965e-05,
    5.915565035454808e-06,
    -1.017802264193519e-06,
    1.1447713500476046e-08,
    4.881259713743468e-08,
    -1.614643521821387e-08,
    1.8589293299124113e-09,
    2.974480809809773e-10,
)


def _horner(coefs, s):
    r = coefs[-1]
    for c in coefs[-2::-1]:
        r = r * s + c
    return r


def _erf(xp, x):
    """The error function, to about 1e-15 in float64 (the standard has none)."""
    a = xp.abs(x)
    small = xp.clip(a, max=2.0)
    inner = small * _horner(_ERF_P1, small * small / 2 - 1)
    big = xp.clip(a, min=2.0, max=6.0)
    outer = 1 - xp.exp(-big * big) / big * _horner(_ERF_P2, (2 / big - 2 / 3) * 3)
    r = xp.where(a <= 2, inner, xp.where(a <= 6, outer, xp.ones_like(a)))
    return xp.where(x < 0, -r, r)


def _max_const(xp, x, axis):
    """The max along ``axis`` as a constant, raised to the dtype's lowest finite value:
    for a row entirely -inf, x - max is then -inf (exp gives 0), not NaN."""
    axes = axes_of(axis, x.ndim)
    if any(x.shape[a] == 0 for a in axes):  # no max: the sums are 0 (logsumexp -inf)
        return xp.zeros(keep_shape(x.shape, axes), dtype=x.dtype, device=device_of(x))
    m = xp.stop_gradient(xp.max(x, axis=axis, keepdims=True))
    low = dtype_facts(xp, x.dtype).lowest
    return m if low is None else xp.maximum(m, low)  # integers have no -inf


def _exp_sum(xp, s):
    """A sum of exp(x - max) ready to divide by: it is >= 1 (the max term is exp(0))
    except for a row entirely -inf, where it is 0 and becomes 1 (softmax 0 there)."""
    return xp.where(s == 0, 1.0, s)  # maximum(s, 1) would halve the gradient at s == 1


def _softmax(xp, x, axis):
    e = xp.exp(x - _max_const(xp, x, axis))
    e /= _exp_sum(xp, xp.sum(e, axis=axis, keepdims=True))  # e is ours alone
    return e


def _softmax_raw(B, x, axis, overwrite=False):
    """``_softmax`` of forward passes (``B`` a backend): one new array at most, none with
    ``overwrite`` (``x``, then, is the caller's temporary and becomes the result)."""
    m = _max_const(B, x, axis)
    if overwrite:
        x -= m
    else:
        x = x - m
    e = B.apply_("exp", x)
    # _exp_sum's value by one call: a forward pass is never differentiated, so
    # maximum's half gradient at a tie can't matter here
    e /= B.maximum(B.sum(e, axis=axis, keepdims=True), 1.0)
    return e


def _logsumexp(xp, x, axis, keepdims):
    m = _max_const(xp, x, axis)
    # a row holding +inf is shifted by 0: its logsumexp is inf (inf - inf would give NaN),
    # as in torch, and its gradient NaN only at the inf entries
    m = xp.where(m == math.inf, xp.zeros_like(m), m)
    s = xp.sum(xp.exp(x - m), axis=axis, keepdims=True)
    out = xp.where(s == 0, xp.full_like(s, -math.inf), m + xp.log(_exp_sum(xp, s)))
    return (
        out
        if keepdims
        else xp.squeeze(out, axis=axis if axis is not None else tuple(range(x.ndim)))
    )


def _log_softmax(xp, x, axis):
    shifted = x - _max_const(xp, x, axis)
    s = xp.sum(xp.exp(shifted), axis=axis, keepdims=True)
    if dtype_facts(xp, shifted.dtype).lowest is None:  # integers: the result is floating
        return shifted - xp.log(_exp_sum(xp, s))
    shifted -= xp.log(_exp_sum(xp, s))  # shifted is ours alone
    return shifted


def _gelu(xp, x, approximate):
    if approximate == "tanh":
        return 0.5 * x * (1 + xp.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1 + _erf(xp, x / math.sqrt(2)))


def _gelu_grad(xp, x, approximate):
    if approximate == "tanh":
        k = math.sqrt(2 / math.pi)
        t = xp.tanh(k * (x + 0.044715 * x * x * x))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x)
    cdf = 0.5 * (1 + _erf(xp, x / math.sqrt(2)))
    return cdf + x * xp.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


# -- ops -----------------------------------------------------------------------------
def _zero(xp, a):
    """A 0-d zero of ``a``'s dtype and device (broadcasts without a full-size buffer)."""
    return xp.zeros((), dtype=a.dtype, device=device_of(a))


def _relu(B):
    return lambda x: B.maximum(x, _zero(B, x))  # one pass; NaN propagates


defop(
    "nn.relu",
    # relu'(0) = 0. A multiply by the 0/1 mask: NumPy's where is ten times slower.
    lambda xp, g, ans, x: g * xp.astype(ans > 0, g.dtype),
    chapter=CH, impl=_relu, saves=(), saves_ans=True, twice=False, diagonal=True,
    doc="max(x, 0); the gradient at 0 is 0",
)  # fmt: skip
defop(
    "nn.sigmoid",
    lambda xp, g, ans, x: g * ans * (1 - ans),
    chapter=CH, impl=lambda B: lambda x: _sigmoid(B, x), saves=(), saves_ans=True,
    diagonal=True, doc="1 / (1 + exp(-x)), stable for large |x|",
)  # fmt: skip
defop(
    "nn.silu",
    lambda xp, g, ans, x: g * (lambda s: s * (1 + x * (1 - s)))(_sigmoid(xp, x)),
    chapter=CH, impl=lambda B: lambda x: x * _sigmoid(B, x), diagonal=True,
    doc="x * sigmoid(x)",
)  # fmt: skip


def _softplus_impl(B):
    def softplus(x, *, beta=1.0, threshold=20.0):
        z = beta * x
        smooth = (_log1p_exp(B, z)) / beta
        return B.where(z > threshold, x, smooth)

    return softplus


def _log1p_exp(xp, z):
    """log(1 + exp(z)) without overflow."""
    return xp.log1p(xp.exp(-xp.abs(z))) + xp.where(z > 0, z, xp.zeros_like(z))


defop(
    "nn.softplus",
    lambda xp, g, ans, x, *, beta=1.0, threshold=20.0: xp.where(
        beta * x > threshold, g, g * _sigmoid(xp, beta * x)
    ),
    chapter=CH, impl=_softplus_impl, diagonal=True,
    doc="log(1 + exp(beta x)) / beta, x itself where beta x > threshold (as torch)",
)  # fmt: skip
defop(
    "nn.gelu",
    lambda xp, g, ans, x, *, approximate="none": g * _gelu_grad(xp, x, approximate),
    chapter=CH, impl=lambda B: lambda x, *, approximate="none": _gelu(B, x, approximate),
    diagonal=True, doc="x * Phi(x) (exact, with erf) or its tanh approximation",
)  # fmt: skip
defop(
    "nn.softmax",
    lambda xp, g, ans, x, *, axis=-1: ans * (g - xp.sum(g * ans, axis=axis, keepdims=True)),
    chapter=CH, impl=lambda B: lambda x, *, axis=-1: _softmax_raw(B, x, axis), saves=(),
    saves_ans=True, doc="exp(x - max) / sum(exp(x - max)); a row of -inf gives zeros",
    # its Jacobian diag(s) - s s^T is symmetric: the JVP is the rule on the tangent
    jvp=lambda xp, ts, ans, x, *, axis=-1: ans * (
        ts[0] - xp.sum(ts[0] * ans, axis=axis, keepdims=True)),
    batch=axis(default=-1, none=FLAT),
)  # fmt: skip
defop(
    "nn.log_softmax",
    lambda xp, g, ans, x, *, axis=-1: (
        g - _softmax(xp, x, axis) * xp.sum(g, axis=axis, keepdims=True)
    ),
    chapter=CH, impl=lambda B: lambda x, *, axis=-1: _log_softmax(B, x, axis),
    doc="x - logsumexp(x); a row of -inf stays -inf",
    jvp=lambda xp, ts, ans, x, *, axis=-1: (  # t - sum(softmax(x) t)
        ts[0] - xp.sum(_softmax(xp, x, axis) * ts[0], axis=axis, keepdims=True)),
    batch=axis(default=-1, none=FLAT),
)  # fmt: skip


def _logsumexp_rule(xp, g, ans, x, *, axis=None, keepdims=False):
    """g * softmax(x), the softmax computed from x - max: exp(x - logsumexp(x)) loses the
    digits rounding took from logsumexp (1 per entry of [1e300] * 3, not 1/3; three digits
    of float32 logits near 1e4). 0 for a row of -inf; as in torch NaN only at an +inf
    entry ([inf, 0, 1] gives [nan, 0, 0]: that row is shifted by 0, as in the forward)."""
    kept = keep_shape(x.shape, axes_of(axis, x.ndim))
    ge = g if keepdims else xp.reshape(g, kept)
    m = _max_const(xp, x, axis)
    m = xp.where(m == math.inf, xp.zeros_like(m), m)
    e = xp.exp(x - m)
    return ge * (e / _exp_sum(xp, xp.sum(e, axis=axis, keepdims=True)))


defop(
    "nn.logsumexp",
    _logsumexp_rule,
    chapter=CH,
    impl=lambda B: lambda x, *, axis=None, keepdims=False: _logsumexp(B, x, axis, keepdims),
    jvp=reduction_jvp(_logsumexp_rule),  # sum(softmax(x) t)
    batch=axis(),
    doc="log(sum(exp(x))) over axis; -inf for a row of -inf (gradient 0 there)",
)


def _elu(xp, x, alpha):
    return xp.where(x > 0, x, alpha * xp.expm1(xp.minimum(x, _zero(xp, x))))


def _mish_grad(xp, x):
    """d/dx x tanh(softplus(x)) = tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2)."""
    t = xp.tanh(_log1p_exp(xp, x))
    return t + x * _sigmoid(xp, x) * (1 - t * t)


def _hardswish_grad(xp, x):
    """0 up to -3, (2x + 3) / 6 between, 1 from 3 on (torch's values at the kinks)."""
    mid = (2 * x + 3) / 6
    return xp.where(x <= -3, xp.zeros_like(x), xp.where(x >= 3, xp.ones_like(x), mid))


defop(
    "nn.leaky_relu",
    lambda xp, g, ans, x, *, negative_slope=0.01: xp.where(x > 0, g, g * negative_slope),
    chapter=CH, diagonal=True,
    impl=lambda B: lambda x, *, negative_slope=0.01: B.where(x > 0, x, x * negative_slope),
    doc="x where x > 0, else negative_slope * x (the gradient at 0 is negative_slope)",
)  # fmt: skip
defop(
    "nn.elu",
    lambda xp, g, ans, x, *, alpha=1.0: xp.where(
        x > 0, g, g * alpha * xp.exp(xp.minimum(x, _zero(xp, x)))),
    chapter=CH, diagonal=True,
    impl=lambda B: lambda x, *, alpha=1.0: _elu(B, x, alpha),
    doc="x where x > 0, else alpha (exp(x) - 1)",
)  # fmt: skip
defop(
    "nn.mish",
    lambda xp, g, ans, x: g * _mish_grad(xp, x),
    chapter=CH, diagonal=True,
    impl=lambda B: lambda x: x * B.tanh(_log1p_exp(B, x)),
    doc="x tanh(softplus(x))",
)  # fmt: skip
defop(
    "nn.hardswish",
    lambda xp, g, ans, x: g * _hardswish_grad(xp, x),
    chapter=CH, diagonal=True,
    impl=lambda B: lambda x: x * B.clip(x + 3, 0, 6) / 6,
    doc="x relu6(x + 3) / 6",
)  # fmt: skip


# -- public functions ----------------------------------------------------------------
def leaky_relu(x, negative_slope=0.01):
    """x where x > 0, else ``negative_slope`` x."""
    checks.number("leaky_relu", "negative_slope", negative_slope)
    return recorder_of(x).xp.nn.leaky_relu(x, negative_slope=negative_slope)


def elu(x, alpha=1.0):
    """x where x > 0, else alpha (exp(x) - 1)."""
    checks.number("elu", "alpha", alpha)
    return recorder_of(x).xp.nn.elu(x, alpha=alpha)


def mish(x):
    """x tanh(softplus(x))."""
    return recorder_of(x).xp.nn.mish(x)


def hardswish(x):
    """x relu6(x + 3) / 6."""
    return recorder_of(x).xp.nn.hardswish(x)


def glu(x, axis=-1):
    """a sigmoid(b), where a and b are the two halves of ``x`` along ``axis`` (torch's
    ``dim``); a composition of slicing, sigmoid and multiply."""
    recorder_of(x)  # a non-array named first
    checks.integer("glu", "axis", axis)
    n = x.shape[axis]
    if n % 2:
        raise ValueError(f"glu: axis {axis} must have an even length, got {n}")
    xp = recorder_of(x).xp
    a = xp.take(x, xp.arange(n // 2, device=device_of(x)), axis=axis)
    b = xp.take(x, xp.arange(n // 2, n, device=device_of(x)), axis=axis)
    return a * sigmoid(b)


def softmin(x, axis=-1):
    """softmax(-x) along ``axis``."""
    recorder_of(x)  # a non-array named first
    return softmax(-x, axis=axis)


def relu(x):
    """max(x, 0) elementwise; relu'(0) = 0."""
    return recorder_of(x).xp.nn.relu(x)


def sigmoid(x):
    """1 / (1 + exp(-x)), stable for large |x|."""
    return recorder_of(x).xp.nn.sigmoid(x)


def silu(x):
    """x * sigmoid(x) (swish)."""
    return recorder_of(x).xp.nn.silu(x)


def _check_softplus(owner, beta, threshold):
    checks.number(owner, "beta", beta, low=0, open_low=True)
    checks.number(owner, "threshold", threshold)


def softplus(x, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta (beta > 0); x itself where beta x > threshold (as torch)."""
    _check_softplus("softplus", beta, threshold)
    return recorder_of(x).xp.nn.softplus(x, beta=beta, threshold=threshold)


def gelu(x, approximate="none"):
    """x * Phi(x), Phi the standard normal CDF; ``approximate="tanh"`` as torch."""
    checks.choice("gelu", "approximate", approximate, ("none", "tanh"))
    return recorder_of(x).xp.nn.gelu(x, approximate=approximate)


def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along ``axis`` (an int, or None: every axis), computed from
    x - max; rows partly -inf are exact, a row entirely -inf gives zeros (and zero
    gradient)."""
    if axis is not None:
        axis = int(checks.integer("softmax", "axis", axis))
    return recorder_of(x).xp.nn.softmax(x, axis=axis)


def log_softmax(x, axis=-1):
    """x - logsumexp(x) along ``axis`` (an int, or None); a row entirely -inf stays -inf."""
    if axis is not None:
        axis = int(checks.integer("log_softmax", "axis", axis))
    return recorder_of(x).xp.nn.log_softmax(x, axis=axis)


def logsumexp(x, axis=None, keepdims=False):
    """log(sum(exp(x))) over ``axis`` (an int, a tuple of ints, or None: all axes), stable;
    -inf for a row entirely -inf, with zero gradient."""
    if isinstance(axis, (tuple, list)):
        axis = tuple(int(i) for i in checks.integers("logsumexp", "axis", axis))
    elif axis is not None:
        axis = int(checks.integer("logsumexp", "axis", axis))
    checks.flag("logsumexp", "keepdims", keepdims)
    return recorder_of(x).xp.nn.logsumexp(x, axis=axis, keepdims=keepdims)
