"""Element-wise functions. Each rule is ``rule(xp, g, ans, x)`` (or ``x1, x2``);
broadcasting and dtype casts of the gradient are undone centrally.

Forward mode derives their JVPs from these rules (a diagonal map is its own transpose),
except for the functions that are not holomorphic on complex inputs: ``conj``, ``real``,
``imag`` are linear (the op applied to the tangent), ``abs`` and ``sign`` have JVP rules
``jvp(xp, ts, ans, x)`` of their own."""

from __future__ import annotations

import cmath
import math

from ..engine.registry import defop
from ._util import binary, complex_of, conj, is_complex, nondiff, unary


def _is_scalar(v):
    return isinstance(v, (int, float, complex))


def _sign(xp, g, ans, x):
    """sign(z) = z/|z|: d sign = (dz - sign^2 conj(dz)) / (2|z|); its transpose. Zero
    for real x (and at 0), where sign is piecewise constant."""
    a = xp.abs(x)
    safe = xp.where(a == 0, xp.ones_like(a), a)
    r = (g - conj(xp, g * ans * ans)) / (2 * safe)
    return xp.where(a == 0, xp.zeros_like(r), r)


def _sign_jvp(xp, ts, ans, x):
    """(t - sign^2 conj(t)) / (2|z|) for complex z (0 at 0); none for real x."""
    if not is_complex(xp, x):
        return None  # piecewise constant
    (t,) = ts
    a = xp.abs(x)
    safe = xp.where(a == 0, xp.ones_like(a), a)
    r = (t - ans * ans * xp.conj(t)) / (2 * safe)
    return xp.where(a == 0, xp.zeros_like(r), r)


def _abs_jvp(xp, ts, ans, x):
    """d|z| = Re(conj(sign z) dz); sign(x) dx for real x (abs'(0) = 0)."""
    r = conj(xp, xp.sign(x)) * ts[0]
    return xp.real(r) if is_complex(xp, r) else r


def _imag(xp, g, ans, x):
    """imag(z) = Re(-i z): the transpose gives -i g (a real input keeps none of it)."""
    return complex_of(xp, g) * (-1j)


# -- one argument ------------------------------------------------------------
# abs'(0) = 0; d|z| = Re(conj(sign z) dz), whose transpose is g conj(sign z)
unary("abs", lambda xp, g, ans, x: g * conj(xp, xp.sign(x)), twice=False, jvp=_abs_jvp,
      holomorphic=False)  # fmt: skip
unary("acos", lambda xp, g, ans, x: -g / xp.sqrt(1 - x * x), domain=(-1, 1))
# acosh'(z) = 1 / (sqrt(z - 1) sqrt(z + 1)): for complex z, sqrt(z^2 - 1) is the other
# branch where Re(z) < 0
unary(
    "acosh",
    lambda xp, g, ans, x: g / (xp.sqrt(x - 1) * xp.sqrt(x + 1)),
    domain=(1, math.inf),
)
unary("asin", lambda xp, g, ans, x: g / xp.sqrt(1 - x * x), domain=(-1, 1))


def _asinh(xp, g, ans, x):
    """g / sqrt(x^2 + 1); for real x as hypot(x, 1): x^2 overflows at 1e155."""
    return g / (xp.sqrt(x * x + 1) if is_complex(xp, x) else xp.hypot(x, 1.0))


unary("asinh", _asinh)
unary("atan", lambda xp, g, ans, x: g / (1 + x * x))
unary("atanh", lambda xp, g, ans, x: g / (1 - x * x), domain=(-1, 1))
unary("conj", lambda xp, g, ans, x: conj(xp, g), saves=(), linear=True, holomorphic=False)
unary("cos", lambda xp, g, ans, x: -g * xp.sin(x))
unary("cosh", lambda xp, g, ans, x: g * xp.sinh(x))
unary("exp", lambda xp, g, ans, x: g * ans, saves=(), saves_ans=True)
unary("expm1", lambda xp, g, ans, x: g * (ans + 1), saves=(), saves_ans=True)
unary("log", lambda xp, g, ans, x: g / x, domain=(0, math.inf))
unary("log1p", lambda xp, g, ans, x: g / (x + 1), domain=(-1, math.inf))
unary("log2", lambda xp, g, ans, x: g / (x * math.log(2)), domain=(0, math.inf))
unary("log10", lambda xp, g, ans, x: g / (x * math.log(10)), domain=(0, math.inf))
unary("negative", lambda xp, g, ans, x: -g, saves=())
unary("positive", lambda xp, g, ans, x: g, saves=())
# Re(z): transpose g
unary("real", lambda xp, g, ans, x: g, saves=(), keeps_dtype=False, linear=True,
      holomorphic=False)  # fmt: skip
unary("imag", _imag, saves=(), keeps_dtype=False, linear=True, holomorphic=False)
unary("sign", _sign, saves_ans=True, jvp=_sign_jvp, holomorphic=False)
unary("reciprocal", lambda xp, g, ans, x: -g * ans * ans, saves=(), saves_ans=True)
unary("sin", lambda xp, g, ans, x: g * xp.cos(x))
unary("sinh", lambda xp, g, ans, x: g * xp.cosh(x))
unary("sqrt", lambda xp, g, ans, x: g / (2 * ans), saves=(), saves_ans=True, domain=(0, math.inf))


def _square(xp, g, ans, x):
    r = g * x  # then doubled in place: g is often a broadcast view (of a mean's cotangent)
    r *= 2
    return r


unary("square", _square)
unary("tan", lambda xp, g, ans, x: g * (1 + ans * ans), saves=(), saves_ans=True)
unary("tanh", lambda xp, g, ans, x: g * (1 - ans * ans), saves=(), saves_ans=True)

# -- two arguments -----------------------------------------------------------
binary("add", lambda xp, g, ans, x1, x2: g, lambda xp, g, ans, x1, x2: g, saves=())
binary("subtract", lambda xp, g, ans, x1, x2: g, lambda xp, g, ans, x1, x2: -g, saves=())
binary(
    "multiply",
    lambda xp, g, ans, x1, x2: g * x2,
    lambda xp, g, ans, x1, x2: g * x1,
    saves=((1,), (0,)),
    same="square",
)
binary(
    "divide",
    lambda xp, g, ans, x1, x2: g / x2,
    # -g x1 / x2^2, as two quotients: x2^2 under- or overflows where the derivative is finite
    lambda xp, g, ans, x1, x2: -(g / x2) * (x1 / x2),
)


def _atan2(which):
    """d atan2(x1, x2) = (x2 dx1 - x1 dx2) / r^2 with r = hypot(x1, x2), divided by r
    twice: x1^2 + x2^2 overflows near 1e155 (gradient 0) and underflows near 1e-155
    (inf), where the derivative is finite."""

    def rule(xp, g, ans, x1, x2):
        r = xp.hypot(x1, x2)
        return g * (x2 if which == 0 else -x1) / r / r

    return rule


binary("atan2", _atan2(0), _atan2(1), complex=False)


def _hypot(which):
    def rule(xp, g, ans, x1, x2):
        safe = xp.where(ans == 0, xp.ones_like(ans), ans)  # hypot'(0, 0) = 0
        return g * (x1 if which == 0 else x2) / safe

    return rule


binary("hypot", _hypot(0), _hypot(1), saves_ans=True, twice=False, complex=False)


def _logaddexp_share(xp, g, mine, other):
    """d logaddexp / d mine = sigmoid(mine - other) = 1 / (1 + exp(other - mine)), from the
    difference of the inputs: exp(mine - logaddexp) loses the digits that rounding took
    from the result (at 1e300 both sides got 1, not 1/2). exp of -|t| never overflows;
    a tie (infinities of one sign included: no inf - inf) gives half to each side."""
    tie, z = mine == other, xp.zeros_like(g)  # g: the result's shape; either side may be a scalar
    t = xp.where(tie, z, mine + z) - xp.where(tie, z, other + z)
    e = xp.exp(-xp.abs(t))
    return xp.where(t >= 0, 1 / (1 + e), e / (1 + e))


binary(
    "logaddexp",
    lambda xp, g, ans, x1, x2: g * _logaddexp_share(xp, g, x1, x2),
    lambda xp, g, ans, x1, x2: g * _logaddexp_share(xp, g, x2, x1),
    complex=False,
)


def _extremum(greater):
    """maximum/minimum: the larger (smaller) side gets g; a tie gives half to each."""

    def rule(xp, g, ans, mine, other):
        wins = mine > other if greater else mine < other
        tie = mine == other
        return xp.where(wins, g, xp.where(tie, g / 2, xp.zeros_like(g)))

    return rule


binary(
    "maximum",
    _extremum(True),
    lambda xp, g, ans, x1, x2: _extremum(True)(xp, g, ans, x2, x1),
    twice=False,
    complex=False,
)
binary(
    "minimum",
    _extremum(False),
    lambda xp, g, ans, x1, x2: _extremum(False)(xp, g, ans, x2, x1),
    twice=False,
    complex=False,
)


def _pow_base(xp, g, ans, x1, x2):
    """d/dx1 x1**x2 = x2 * x1**(x2-1); zero where x2 == 0 (also at x1 == 0)."""
    if _is_scalar(x2):
        if x2 == 2:  # x**2, the common case: x1**1 is x1, one power call less
            return g * x2 * x1
        return g * 0 if x2 == 0 else g * x2 * x1 ** (x2 - 1)
    return xp.where(x2 == 0, xp.zeros_like(g), g * x2 * x1 ** (x2 - 1))


def _pow_exponent(xp, g, ans, x1, x2):
    """d/dx2 x1**x2 = x1**x2 * log(x1); zero where x1 == 0 (the limit from x1 > 0)."""
    if _is_scalar(x1):
        if isinstance(x1, complex):
            return g * ans * cmath.log(x1) if x1 != 0 else g * 0
        return g * ans * math.log(x1) if x1 > 0 else g * 0
    safe = xp.where(x1 == 0, xp.ones_like(x1), x1)
    return xp.where(x1 == 0, xp.zeros_like(g), g * ans * xp.log(safe))


binary("pow", _pow_base, _pow_exponent, saves_ans=True)
binary(
    "remainder",
    lambda xp, g, ans, x1, x2: g,
    lambda xp, g, ans, x1, x2: -g * xp.floor(x1 / x2),
    twice=False,
    complex=False,
)


def _copysign(xp, g, ans, x1, x2):
    """+g where x1 already has x2's sign, -g where copysign flips it."""
    negative = math.copysign(1.0, x2) < 0 if _is_scalar(x2) else xp.signbit(x2)
    return xp.where(xp.signbit(x1) == negative, g, -g)


binary("copysign", _copysign, None, twice=False, complex=False)


def _clip_x(xp, g, ans, x, lo, hi):
    keep = None
    if lo is not None:
        keep = x >= lo
    if hi is not None:
        keep = x <= hi if keep is None else keep & (x <= hi)
    return g if keep is None else xp.where(keep, g, xp.zeros_like(g))


def _clip_bound(low):
    def rule(xp, g, ans, x, lo, hi):
        return xp.where(x < lo if low else x > hi, g, xp.zeros_like(g))

    return rule


def _clip_impl(B):
    def clip(x, min=None, max=None):
        return B.clip(x, min=min, max=max)

    return clip


defop(
    "clip",
    vjp=(_clip_x, _clip_bound(True), _clip_bound(False)),
    chapter="elementwise",
    impl=_clip_impl,
    public=lambda f, rec: lambda x, /, min=None, max=None: f(x, min, max),
    twice=False,
    complex=False,
    diagonal=True,  # element-wise in x and both bounds: the JVP is derived from the rules
)

# nextafter(x1, x2) is x1 moved by one ulp: its derivative is that of x1 (1), none in x2
binary(
    "nextafter",
    lambda xp, g, ans, x1, x2: g,
    lambda xp, g, ans, x1, x2: xp.zeros_like(g),
    saves=(),
    complex=False,
)

# -- piecewise constant, integer or boolean results: no gradient ----------------
nondiff(
    "elementwise",
    "ceil", "floor", "round", "signbit", "trunc", "isfinite", "isinf", "isnan",
    "logical_not", "bitwise_invert",
    style="unary",
)  # fmt: skip
nondiff(
    "elementwise",
    "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
    "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "floor_divide",
    style="binary",
)  # fmt: skip
