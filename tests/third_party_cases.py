"""The table of tests/test_third_party.py: real third-party code, called unchanged on Tensors.

One :class:`Case` per library call. ``fn`` takes the arrays (Tensors of the namespace under
test, or plain NumPy float64 arrays for the reference) and calls the library on them; it may
pick fields of a result or reduce it to a small vector, but never reimplements it. ``make``
builds the NumPy inputs from a seeded generator: floating inputs are differentiated (unless
``wrt`` names the ones that are), the others (integer labels, boolean masks...) enter as
constants of the namespace.

``expect`` says what a call on inputs that require grad must do, the same on every backend
or per backend (``{"numpy": ..., "strict": ...}``):

- ``GRAD``: the forward equals the library on NumPy arrays, and the gradient equals
  central differences;
- ``FORWARD``: a non-differentiable function (integer, boolean or index outputs, a shape,
  a dtype): the forward only, and no output may require grad;
- a :class:`Raises`: a clear error. ``HOST`` for code that is not array-API generic and
  converts its input with ``numpy.asarray`` (the engine refuses to convert a Tensor that
  requires grad, rather than cut the graph silently); or the library's own error where it
  rejects the namespace itself (as it rejects raw array_api_strict arrays).

The libraries are imported lazily (``_Lazy``), so that a missing one skips its own cases
only, and scipy reads ``SCIPY_ARRAY_API=1`` (set in conftest.py) at its first import.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from array_api_compat import array_namespace

__all__ = [
    "Case",
    "Raises",
    "GRAD",
    "FORWARD",
    "HOST",
    "UFUNC",
    "CASES",
    "XPX_EXCLUDED",
]

GRAD = "grad"
FORWARD = "forward"


@dataclass(frozen=True)
class Raises:
    """A clear error: ``exc`` whose message matches every regular expression of ``match``."""

    exc: type
    match: tuple = ()
    why: str = ""

    def __repr__(self):
        return f"Raises({self.exc.__name__}, {self.match})"


# numpy.asarray / __array__ / __dlpack__ / __buffer__ of a Tensor that requires grad.
HOST = Raises(RuntimeError, ("requires grad", "detach"), "converts to NumPy and runs compiled code")


# A NumPy ufunc called on a Tensor directly (Tensor sets __array_ufunc__ = None).
UFUNC = Raises(TypeError, ("does not support ufuncs",), "calls a NumPy ufunc on its input")
# A write into a leaf that requires grad (xpx.at with copy=None/False updates in place,
# as on any writeable array).
LEAF_WRITE = Raises(RuntimeError, ("leaf tensor that requires grad", "in place"))


@dataclass(frozen=True)
class Case:
    id: str
    lib: str  # the module pytest.importorskip's for this case
    fn: Callable
    make: Callable  # rng -> tuple of NumPy arrays
    expect: Any = GRAD  # GRAD, FORWARD, a Raises, or {"numpy": ..., "strict": ...}
    wrt: tuple | None = None  # positions differentiated (default: the float64 inputs)
    rtol: float = 1e-9  # forward against the NumPy reference
    atol: float = 1e-12
    mode: str = "auto"  # of check_grad

    def expectation(self, backend):
        e = self.expect
        return e[backend] if isinstance(e, dict) else e

    def diff_positions(self, inputs):
        if self.wrt is not None:
            return tuple(self.wrt)
        return tuple(i for i, a in enumerate(inputs) if a.dtype == np.float64)


class _Lazy:
    """A module imported at its first attribute access."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        return getattr(importlib.import_module(self._name), attr)


special = _Lazy("scipy.special")
stats = _Lazy("scipy.stats")
integrate = _Lazy("scipy.integrate")
vq = _Lazy("scipy.cluster.vq")
optimize = _Lazy("scipy.optimize")
signal = _Lazy("scipy.signal")
xpx = _Lazy("array_api_extra")
pairwise = _Lazy("sklearn.metrics.pairwise")
metrics = _Lazy("sklearn.metrics")
preprocessing = _Lazy("sklearn.preprocessing")
extmath = _Lazy("sklearn.utils.extmath")
decomposition = _Lazy("sklearn.decomposition")
linear_model = _Lazy("sklearn.linear_model")
discriminant_analysis = _Lazy("sklearn.discriminant_analysis")
kernel_ridge = _Lazy("sklearn.kernel_ridge")


# -- input builders: rng -> NumPy array ---------------------------------------------------
def normal(*shape):
    return lambda rng: rng.standard_normal(shape)


def positive(*shape, low=0.5, high=2.0):
    return lambda rng: rng.uniform(low, high, shape)


def spread(*shape, low=-2.0, high=2.0):
    """Distinct values, well apart (no ties, no kinks between them), shuffled."""
    n = int(np.prod(shape))

    def make(rng):
        x = rng.permutation(np.linspace(low, high, n)) + rng.uniform(-0.05, 0.05, n)
        return x.reshape(shape)

    return make


def const(value, dtype=None):
    return lambda rng: np.asarray(value, dtype=dtype)


def inputs(*builders):
    return lambda rng: tuple(b(rng) for b in builders)


def _ns(*arrays):
    return array_namespace(*arrays)


CASES: list[Case] = []


def case(id, lib, fn, *builders, **kw):
    CASES.append(Case(id, lib, fn, inputs(*builders), **kw))


# == scipy.special ========================================================================
def sp(id, fn, *builders, **kw):
    case("special." + id, "scipy", fn, *builders, **kw)


sp("logsumexp", lambda x: special.logsumexp(x), normal(6))
sp("logsumexp-axis", lambda x: special.logsumexp(x, axis=1), normal(2, 4))
sp("logsumexp-b", lambda x, b: special.logsumexp(x, b=b), normal(5), positive(5))
sp("logsumexp-axis-b", lambda x, b: special.logsumexp(x, axis=0, b=b), normal(3, 2), positive(3, 2))
sp(
    "logsumexp-return-sign",
    lambda x, b: special.logsumexp(x, b=b, return_sign=True)[0],
    normal(5),
    const([1.0, -0.5, 2.0, 0.3, -0.2]),
    wrt=(0,),
)
sp("softmax", lambda x: special.softmax(x, axis=1), normal(2, 3))
sp("log_softmax", lambda x: special.log_softmax(x, axis=-1), normal(2, 3))
sp("xlogy", lambda x, y: special.xlogy(x, y), normal(4), positive(4))
sp("xlog1py", lambda x, y: special.xlog1py(x, y), normal(4), positive(4), expect=HOST)
sp("rel_entr", lambda x, y: special.rel_entr(x, y), positive(4), positive(4))
sp("entr", lambda x: special.entr(x), positive(4), expect=HOST)
sp("kl_div", lambda x, y: special.kl_div(x, y), positive(4), positive(4), expect=HOST)
sp("expit", lambda x: special.expit(x), normal(4), expect=HOST)
sp("logit", lambda p: special.logit(p), positive(4, low=0.1, high=0.9), expect=HOST)
sp("erf", lambda x: special.erf(x), normal(4), expect=HOST)
sp("erfc", lambda x: special.erfc(x), normal(4), expect=HOST)
sp("gammaln", lambda x: special.gammaln(x), positive(4), expect=HOST)
sp("ndtr", lambda x: special.ndtr(x), normal(4), expect=HOST)
sp("log_ndtr", lambda x: special.log_ndtr(x), normal(4), expect=HOST)
sp("i0", lambda x: special.i0(x), normal(4), expect=HOST)
sp("stdtr", lambda t: special.stdtr(3.0, t), normal(4), expect=HOST)
# numpy.logaddexp / numpy.log_expit ufuncs: a ufunc of the standard is the namespace's
# function on a NumPy-backed Tensor; log_expit is not in the standard.
sp("softplus", lambda x: special.softplus(x), normal(4), expect={"numpy": GRAD, "strict": UFUNC})
sp("log_expit", lambda x: special.log_expit(x), normal(4), expect={"numpy": HOST, "strict": UFUNC})
sp("sinc", lambda x: special.sinc(x), spread(4, low=0.2, high=1.7), expect=HOST)


# == scipy.stats ==========================================================================
def st(id, fn, *builders, **kw):
    case("stats." + id, "scipy", fn, *builders, **kw)


st("moment-3", lambda x: stats.moment(x, order=3), normal(6))
st("moment-2-axis", lambda x: stats.moment(x, order=2, axis=1), normal(2, 4))
st("skew", lambda x: stats.skew(x), normal(6))
st("skew-unbiased", lambda x: stats.skew(x, bias=False), normal(6))
st("kurtosis", lambda x: stats.kurtosis(x), normal(6))
st("kurtosis-pearson-unbiased", lambda x: stats.kurtosis(x, fisher=False, bias=False), normal(6))
st("variation", lambda x: stats.variation(x, ddof=1), positive(5))
st("zscore", lambda x: stats.zscore(x), normal(5))
st("zscore-axis-ddof", lambda x: stats.zscore(x, axis=1, ddof=1), normal(2, 4))
st("zmap", lambda s, c: stats.zmap(s, c), normal(3), normal(5))
st("gmean", lambda x: stats.gmean(x), positive(5))
st("gmean-weights", lambda x, w: stats.gmean(x, weights=w), positive(5), positive(5))
st("hmean", lambda x: stats.hmean(x), positive(5))
st("hmean-weights", lambda x, w: stats.hmean(x, weights=w), positive(5), positive(5))
st("pmean", lambda x: stats.pmean(x, 2.5), positive(5))
# tvar/tstd/tsem: NaN outside the limits, then (x - mean)**2 masked by where (NaN * 0
# reaches mean); var = mean(...)[()]; var *= factor (a view); factor from apply_where.
st("tmean", lambda x: stats.tmean(x, (-1.0, 1.0)), spread(7))
st("tvar", lambda x: stats.tvar(x, (-1.0, 1.0)), spread(7))
st("tstd", lambda x: stats.tstd(x, (-1.0, 1.0)), spread(7))
st("tsem", lambda x: stats.tsem(x, (-1.0, 1.0)), spread(7))
st("tmin", lambda x: stats.tmin(x, -1.0), spread(7))
st("tmax", lambda x: stats.tmax(x, 1.0), spread(7))
st("sem", lambda x: stats.sem(x), normal(5))
st("describe-mean", lambda x: stats.describe(x).mean, normal(6))
st("describe-variance", lambda x: stats.describe(x).variance, normal(6))
st("describe-skewness", lambda x: stats.describe(x).skewness, normal(6))
st("describe-kurtosis", lambda x: stats.describe(x).kurtosis, normal(6))
st("describe-minmax", lambda x: stats.describe(x).minmax, spread(6))
st("describe-nobs", lambda x: stats.describe(x).nobs, normal(6), expect=FORWARD)
# entropy(pk) calls special.entr (compiled); entropy(pk, qk) the generic rel_entr.
st("entropy", lambda p: stats.entropy(p), positive(5), expect=HOST)
st("entropy-base", lambda p: stats.entropy(p, base=2.0), positive(5), expect=HOST)
st("entropy-qk", lambda p, q: stats.entropy(p, q), positive(5), positive(5))
st(
    "entropy-qk-base",
    lambda p, q: stats.entropy(p, q, base=2.0),
    positive(5),
    positive(5),
)
st("differential_entropy", lambda x: stats.differential_entropy(x), spread(12))
st(
    "differential_entropy-ebrahimi",
    lambda x: stats.differential_entropy(x, method="ebrahimi"),
    spread(12),
)
# The statistics are generic, but the p-values that come with them go through compiled
# special functions (stdtr -> betainc) on arrays computed from the inputs.
st("ttest_1samp-statistic", lambda x: stats.ttest_1samp(x, 0.2).statistic, normal(6), expect=HOST)
st(
    "ttest_ind-statistic",
    lambda a, b: stats.ttest_ind(a, b).statistic,
    normal(5),
    normal(6),
    expect=HOST,
)
st(
    "ttest_ind-welch-statistic",
    lambda a, b: stats.ttest_ind(a, b, equal_var=False).statistic,
    normal(5),
    normal(6),
    expect=HOST,
)
st(
    "ttest_rel-statistic",
    lambda a, b: stats.ttest_rel(a, b).statistic,
    normal(5),
    normal(5),
    expect=HOST,
)
st(
    "pearsonr-statistic",
    lambda x, y: stats.pearsonr(x, y).statistic,
    normal(6),
    normal(6),
    expect=HOST,
)
st("quantile", lambda x: stats.quantile(x, 0.3), spread(7))
st(
    "quantile-weibull",
    lambda x, p: stats.quantile(x, p, method="weibull"),
    spread(7),
    const([0.3, 0.6]),
    wrt=(0,),
)
st("iqr", lambda x: stats.iqr(x), spread(7))
# log(var(y)) goes through apply_where, which broadcasts (cond, *args) in one call, the
# bool first: once a silently wrong gradient (the multi-output op decided from the bool).
st("yeojohnson_llf", lambda x: stats.yeojohnson_llf(0.7, x), normal(6))
st("boxcox_llf", lambda x: stats.boxcox_llf(0.4, x), positive(6))
st("circmean", lambda x: stats.circmean(x), positive(5, low=0.1, high=2.0))
st("circvar", lambda x: stats.circvar(x), positive(5, low=0.1, high=2.0))
st("circstd", lambda x: stats.circstd(x), positive(5, low=0.1, high=2.0))
st("gstd", lambda x: stats.gstd(x), positive(5))
st("kstat", lambda x: stats.kstat(x, 3), normal(6))
st("kstatvar", lambda x: stats.kstatvar(x), normal(6))
st("trim_mean", lambda x: stats.trim_mean(x, 0.2), spread(7))
st("median_abs_deviation", lambda x: stats.median_abs_deviation(x), spread(7))
# The p-values: chdtrc -> gammaincc, compiled.
st(
    "power_divergence-statistic",
    lambda f: stats.power_divergence(f, lambda_=0.5).statistic,
    positive(4),
    expect=HOST,
)
st("chisquare-statistic", lambda f: stats.chisquare(f).statistic, positive(4), expect=HOST)
st("rankdata", lambda x: stats.rankdata(x), spread(5), expect=FORWARD)


# == scipy.integrate ======================================================================
def it(id, fn, *builders, **kw):
    case("integrate." + id, "scipy", fn, *builders, **kw)


it("trapezoid", lambda y: integrate.trapezoid(y), normal(6))
it("trapezoid-dx", lambda y: integrate.trapezoid(y, dx=0.3), normal(6))
it("trapezoid-x", lambda y, x: integrate.trapezoid(y, x), normal(6), spread(6))
it("trapezoid-axis", lambda y: integrate.trapezoid(y, axis=0), normal(4, 2))
it("simpson", lambda y: integrate.simpson(y), normal(7), expect=HOST)
it("simpson-even", lambda y: integrate.simpson(y, dx=0.5), normal(6), expect=HOST)
it(
    "simpson-x",
    lambda y, x: integrate.simpson(y, x=x),
    normal(7),
    const(np.cumsum([0.3, 0.5, 0.2, 0.4, 0.6, 0.3, 0.5])),
    wrt=(0,),
    expect=HOST,
)
it("cumulative_trapezoid", lambda y: integrate.cumulative_trapezoid(y), normal(6))
it(
    "cumulative_trapezoid-initial",
    lambda y: integrate.cumulative_trapezoid(y, dx=0.5, initial=0),
    normal(5),
)
it("cumulative_simpson", lambda y: integrate.cumulative_simpson(y), normal(6))
it("romb", lambda y: integrate.romb(y, dx=0.25), normal(9))


# == scipy.cluster, scipy.optimize, scipy.signal ==========================================
case("cluster.vq.whiten", "scipy", lambda x: vq.whiten(x), normal(5, 2))
case(
    "cluster.vq.vq-codes",
    "scipy",
    lambda x, c: vq.vq(x, c)[0],
    normal(5, 2),
    normal(3, 2),
    expect=HOST,
)
case("optimize.rosen", "scipy", lambda x: optimize.rosen(x), normal(4))
# x[1:] of a 2-D array is not standard indexing: it fails on raw array_api_strict too.
case(
    "optimize.rosen-2d",
    "scipy",
    lambda x: optimize.rosen(x),
    normal(3, 2),
    expect={"numpy": GRAD, "strict": Raises(IndexError, ("multi-axes index",))},
)
case("optimize.rosen_der", "scipy", lambda x: optimize.rosen_der(x), normal(4))
case("optimize.rosen_hess", "scipy", lambda x: optimize.rosen_hess(x), normal(3))
case(
    "optimize.rosen_hess_prod",
    "scipy",
    lambda x, p: optimize.rosen_hess_prod(x, p),
    normal(4),
    normal(4),
)


def sg(id, fn, *builders, **kw):
    case("signal." + id, "scipy", fn, *builders, **kw)


# scipy.signal converts to NumPy (compiled filters, np.polynomial...) wherever it
# accepts other namespaces at all; FFT-based functions reach fft.* or complex values.
sg(
    "convolve-direct",
    lambda a, b: signal.convolve(a, b, method="direct"),
    normal(5),
    normal(3),
    expect=HOST,
)
sg(
    "correlate-direct",
    lambda a, b: signal.correlate(a, b, method="direct"),
    normal(5),
    normal(3),
    expect=HOST,
)
sg(
    "fftconvolve",
    lambda a, b: signal.fftconvolve(a, b),
    normal(5),
    normal(3),
)
sg(
    "lfilter",
    lambda b, a, x: signal.lfilter(b, a, x),
    normal(2),
    const([1.0, -0.5]),
    normal(5),
    wrt=(0, 2),
    expect=HOST,
)
sg("detrend-linear", lambda x: signal.detrend(x), normal(6), expect=HOST)
sg("detrend-constant", lambda x: signal.detrend(x, type="constant"), normal(6), expect=HOST)
sg("hilbert", lambda x: signal.hilbert(x), normal(6))  # complex output, fft inside
sg("periodogram", lambda x: signal.periodogram(x)[1], normal(8), expect=HOST)
sg("zpk2tf", lambda z, p: signal.zpk2tf(z, p, 2.0)[1], normal(2), normal(2), expect=HOST)
sg("savgol_filter", lambda x: signal.savgol_filter(x, 5, 2), normal(8), expect=HOST)
sg("medfilt", lambda x: signal.medfilt(x, 3), spread(6), expect=HOST)
sg(
    "windows.general_hamming",
    lambda a: signal.windows.general_hamming(5, a),
    const(0.6),
    expect=HOST,
)


# == array_api_extra: every public function ===============================================
# xpx.testing is a module of test helpers, not a function of arrays.
XPX_EXCLUDED = {"__version__", "testing"}


def xx(id, fn, *builders, **kw):
    case("xpx." + id, "array_api_extra", fn, *builders, **kw)


xx("angle", lambda x: xpx.angle(x), spread(6))  # of real values: 0 or pi, a zero gradient
xx("angle-deg", lambda x: xpx.angle(x, deg=True), spread(6))
# apply_where broadcasts (cond, *args) with one broadcast_arrays call: bool first.
xx(
    "apply_where",
    lambda x: xpx.apply_where(x > 0, x, _ns(x).sqrt, fill_value=-1.0),
    spread(6),
)
xx(
    "apply_where-f2",
    lambda x, y: xpx.apply_where(x > 0, (x, y), lambda a, b: _ns(a).log(a) * b, lambda a, b: a - b),
    spread(6),
    normal(6),
)
xx("argpartition", lambda x: _ns(x).sort(xpx.argpartition(x, 2)[:3]), spread(6), expect=FORWARD)
# xpx.at updates a writeable array in place unless copy=True (a Tensor is writeable): on a
# leaf that requires grad, copy=True; in place, a clear error (as torch's).
xx("at-set", lambda x, v: xpx.at(x)[1:3].set(v, copy=True), normal(5), normal(2))
xx("at-set-int-index", lambda x, v: xpx.at(x, 2).set(v, copy=True), normal(5), const(0.7))
xx(
    "at-set-bool-mask",
    lambda x, m: xpx.at(x, m).set(0.0, copy=True),
    normal(5),
    const([True, False, True, False, False]),
)
xx("at-set-computed", lambda x, v: xpx.at(x * 2.0)[1:3].set(v), normal(5), normal(2))
xx(
    "at-set-leaf-in-place",
    lambda x, v: xpx.at(x)[1:3].set(v),
    normal(5),
    normal(2),
    expect=LEAF_WRITE,
)
xx("at-set-copy-false", lambda x: xpx.at(x)[0].set(1.0, copy=False), normal(3), expect=LEAF_WRITE)
xx("at-add", lambda x, v: xpx.at(x)[::2].add(v, copy=True), normal(5), normal(3))
xx(
    "at-add-computed",
    lambda x, v: xpx.at(x * 2.0)[::2].add(v),
    normal(5),
    normal(3),
)
xx(
    "at-subtract",
    lambda x, v: xpx.at(x)[1:].subtract(v, copy=True),
    normal(4),
    normal(3),
)
xx(
    "at-multiply",
    lambda x, v: xpx.at(x)[:2].multiply(v, copy=True),
    normal(4),
    normal(2),
)
xx(
    "at-divide",
    lambda x, v: xpx.at(x)[2:].divide(v, copy=True),
    normal(4),
    positive(2),
)
xx(
    "at-power",
    lambda x, v: xpx.at(x)[:2].power(v, copy=True),
    positive(4),
    normal(2),
)
xx(
    "at-min",
    lambda x, v: xpx.at(x)[:3].min(v, copy=True),
    spread(4),
    const([0.1, 0.35, -0.8]),
    wrt=(0,),
)
xx(
    "at-max",
    lambda x, v: xpx.at(x)[:3].max(v, copy=True),
    spread(4),
    const([0.1, 0.35, -0.8]),
    wrt=(0,),
)
xx(
    "at-2d",
    lambda x, v: xpx.at(x)[1, :].add(v, copy=True),
    normal(2, 3),
    normal(3),
)
xx("atleast_nd", lambda x: xpx.atleast_nd(x, ndim=3), normal(3))
xx(
    "broadcast_shapes",
    lambda x: xpx.broadcast_shapes((2, 1), (1, 3), (3,)),
    normal(1),
    expect=FORWARD,
)
xx("cov", lambda x: xpx.cov(x), normal(2, 5))
xx("cov-aweights", lambda x, w: xpx.cov(x, aweights=w), normal(2, 5), positive(5))
xx("create_diagonal", lambda x: xpx.create_diagonal(x), normal(3))
xx("create_diagonal-offset", lambda x: xpx.create_diagonal(x, offset=-1), normal(3))
xx("default_dtype", lambda x: xpx.default_dtype(_ns(x)), normal(1), expect=FORWARD)
xx("deg2rad", lambda x: xpx.deg2rad(x), normal(4))
xx("rad2deg", lambda x: xpx.rad2deg(x), normal(4))
xx("diag_indices", lambda x: xpx.diag_indices(3, xp=_ns(x)), normal(1), expect=FORWARD)
xx("diag_indices-gather", lambda x: x[xpx.diag_indices(3, xp=_ns(x))], normal(3, 3))
xx("expand_dims", lambda x: xpx.expand_dims(x, axis=(0, 2)), normal(2, 3))
xx("isclose", lambda a, b: xpx.isclose(a, b, atol=0.3), normal(6), normal(6), expect=FORWARD)
xx("isin", lambda a, b: xpx.isin(a, b), const([1, 2, 3, 4]), const([2, 4, 6]), expect=FORWARD)
xx("kron", lambda a, b: xpx.kron(a, b), normal(2, 2), normal(2, 3))
xx(
    "lazy_apply",
    lambda x: xpx.lazy_apply(lambda a: a * a + 1.0, x, shape=x.shape, dtype=x.dtype),
    normal(4),
)
xx(
    "lazy_apply-as_numpy",
    lambda x: xpx.lazy_apply(lambda a: a * a, x, shape=x.shape, dtype=x.dtype, as_numpy=True),
    normal(4),
    expect=HOST,
)
nan, inf = float("nan"), float("inf")
xx("nan_to_num", lambda x: xpx.nan_to_num(x, fill_value=3.0), const([1.5, nan, -2.0, 0.5]))
xx("nan_to_num-inf", lambda x: xpx.nan_to_num(x), const([0.5, inf, -2.0, -inf]))
xx("nanmax", lambda x: xpx.nanmax(x, axis=0), const([[0.3, nan], [1.2, -0.4], [nan, 0.8]]))
xx("nanmin", lambda x: xpx.nanmin(x, axis=1), const([[0.3, nan, 1.1], [-0.4, 0.9, 0.2]]))
xx("nanmean", lambda x: xpx.nanmean(x), const([0.3, nan, 1.1, -0.4]))
xx("nansum", lambda x: xpx.nansum(x, axis=1), const([[0.3, nan, 1.1], [-0.4, 0.9, nan]]))
xx("nunique", lambda x: xpx.nunique(x), const([1.0, 2.0, 1.0, 3.0]), expect=FORWARD)
xx("one_hot", lambda i: xpx.one_hot(i, 4), const([0, 3, 1]), expect=FORWARD)
xx(
    "one_hot-weighted",
    lambda i, w: xpx.one_hot(i, 3, dtype=w.dtype) * w[:, None],
    const([0, 2, 1]),
    normal(3),
)
xx("pad", lambda x: xpx.pad(x, 2), normal(3))
xx("pad-2d", lambda x: xpx.pad(x, ((1, 0), (0, 2)), constant_values=0.5), normal(2, 2))
xx("partition", lambda x: xpx.partition(x, 2)[2], spread(6))
xx("partition-sorted-head", lambda x: _ns(x).sort(xpx.partition(x, 2)[:2]), spread(6))
xx(
    "searchsorted",
    lambda a, v: xpx.searchsorted(a, v),
    const([0.0, 1.0, 2.0]),
    normal(4),
    expect=FORWARD,
)
xx(
    "setdiff1d",
    lambda a, b: xpx.setdiff1d(a, b),
    const([3.0, 1.0, 2.0, 5.0]),
    const([2.0, 4.0]),
    wrt=(),
    expect=FORWARD,
)
xx(
    "setdiff1d-unique-grad",
    lambda a, b: xpx.setdiff1d(a, b, assume_unique=True),
    spread(4),
    const([7.0]),
    wrt=(0,),
)
xx("sinc", lambda x: xpx.sinc(x), spread(5, low=0.2, high=1.8))
xx("tril_indices", lambda x: xpx.tril_indices(3, xp=_ns(x)), normal(1), expect=FORWARD)
xx("triu_indices", lambda x: xpx.triu_indices(3, offset=1, xp=_ns(x)), normal(1), expect=FORWARD)
xx("triu_indices-gather", lambda x: x[xpx.triu_indices(3, xp=_ns(x))], normal(3, 3))
xx(
    "union1d",
    lambda a, b: xpx.union1d(a, b),
    const([3.0, 1.0, 2.0]),
    const([2.0, 4.0]),
    wrt=(),
    expect=FORWARD,
)
xx("unravel_index", lambda i: xpx.unravel_index(i, (2, 3)), const([0, 4, 5]), expect=FORWARD)


# == scikit-learn, array_api_dispatch=True ================================================
def _dispatch(f):
    def g(*args):
        import sklearn

        with sklearn.config_context(array_api_dispatch=True):
            return f(*args)

    return g


def sk(id, fn, *builders, **kw):
    case("sklearn." + id, "sklearn", _dispatch(fn), *builders, **kw)


X, Y = normal(4, 3), normal(3, 3)
sk("rbf_kernel", lambda x, y: pairwise.rbf_kernel(x, y, gamma=0.3), X, Y)
sk("linear_kernel", lambda x, y: pairwise.linear_kernel(x, y), X, Y)
sk("polynomial_kernel", lambda x, y: pairwise.polynomial_kernel(x, y, degree=2, coef0=0.5), X, Y)
sk("sigmoid_kernel", lambda x, y: pairwise.sigmoid_kernel(x, y, gamma=0.2), X, Y)
sk("laplacian_kernel", lambda x, y: pairwise.laplacian_kernel(x, y, gamma=0.5), X, Y)
sk("chi2_kernel", lambda x, y: pairwise.chi2_kernel(x, y), positive(4, 3), positive(3, 3))
sk(
    "additive_chi2_kernel",
    lambda x, y: pairwise.additive_chi2_kernel(x, y),
    positive(4, 3),
    positive(3, 3),
)
sk("cosine_similarity", lambda x, y: pairwise.cosine_similarity(x, y), X, Y)
sk("cosine_distances", lambda x, y: pairwise.cosine_distances(x, y), X, Y)
sk("euclidean_distances", lambda x, y: pairwise.euclidean_distances(x, y), X, Y)
sk(
    "euclidean_distances-squared",
    lambda x, y: pairwise.euclidean_distances(x, y, squared=True),
    X,
    Y,
)
sk("manhattan_distances", lambda x, y: pairwise.manhattan_distances(x, y), X, Y)
sk("pairwise_distances", lambda x, y: pairwise.pairwise_distances(x, y), X, Y)
sk(
    "pairwise_kernels-rbf",
    lambda x, y: pairwise.pairwise_kernels(x, y, metric="rbf", gamma=0.4),
    X,
    Y,
)
sk(
    "paired_euclidean_distances",
    lambda x, y: pairwise.paired_euclidean_distances(x, y),
    normal(3, 3),
    Y,
)
# StandardScaler's incremental variance computes (0 / 0 - s)**2 for the empty "last"
# batch, then overwrites it (var[zeros] = new[zeros]).
sk(
    "StandardScaler",
    lambda x: preprocessing.StandardScaler().fit_transform(x),
    normal(5, 2),
)
sk("StandardScaler-mean", lambda x: preprocessing.StandardScaler().fit(x).mean_, normal(5, 2))
sk(
    "StandardScaler-no-std",
    lambda x, z: preprocessing.StandardScaler(with_std=False).fit(x).transform(z),
    normal(5, 2),
    normal(2, 2),
)
sk(
    "StandardScaler-transform",
    lambda x, z: preprocessing.StandardScaler().fit(x).transform(z),
    normal(5, 2),
    normal(2, 2),
)
sk(
    "StandardScaler-inverse",
    lambda x, z: preprocessing.StandardScaler().fit(x).inverse_transform(z),
    normal(5, 2),
    normal(2, 2),
)
sk("MinMaxScaler", lambda x: preprocessing.MinMaxScaler().fit_transform(x), spread(4, 2))
sk(
    "MinMaxScaler-range",
    lambda x, z: preprocessing.MinMaxScaler((-1.0, 2.0)).fit(x).transform(z),
    spread(4, 2),
    normal(2, 2),
)
sk("MaxAbsScaler", lambda x: preprocessing.MaxAbsScaler().fit_transform(x), normal(5, 2))
sk("Normalizer", lambda x: preprocessing.Normalizer().fit_transform(x), normal(3, 3))
sk("Normalizer-l1", lambda x: preprocessing.Normalizer(norm="l1").fit_transform(x), normal(3, 3))
sk("normalize", lambda x: preprocessing.normalize(x), normal(3, 3))
sk("normalize-max", lambda x: preprocessing.normalize(x, norm="max"), normal(3, 3))
# scale() is not array-API generic: it passes NumPy dtypes to xp.isdtype, which strict
# rejects; on NumPy it converts its input.
sk(
    "scale",
    lambda x: preprocessing.scale(x),
    normal(5, 2),
    expect={"numpy": HOST, "strict": Raises(TypeError, ("must be a dtype",))},
)
sk("KernelCenterer", lambda k: preprocessing.KernelCenterer().fit_transform(k), normal(3, 3))
sk(
    "PolynomialFeatures",
    lambda x: preprocessing.PolynomialFeatures(2).fit_transform(x),
    normal(3, 2),
)
sk("extmath.softmax", lambda x: extmath.softmax(x), normal(2, 3))
sk("extmath.row_norms", lambda x: extmath.row_norms(x), normal(3, 2))
sk("extmath.row_norms-squared", lambda x: extmath.row_norms(x, squared=True), normal(3, 2))

T, P = normal(5, 2), normal(5, 2)
raw = {"multioutput": "raw_values"}
sk("mean_squared_error", lambda t, p: metrics.mean_squared_error(t, p, **raw), T, P)
sk("root_mean_squared_error", lambda t, p: metrics.root_mean_squared_error(t, p, **raw), T, P)
sk("mean_absolute_error", lambda t, p: metrics.mean_absolute_error(t, p, **raw), T, P)
sk("r2_score", lambda t, p: metrics.r2_score(t, p, **raw), T, P)
# A single score is returned as float(...): a Python float, by design not differentiable.
sk("r2_score-uniform", lambda t, p: metrics.r2_score(t, p), T, P, expect=FORWARD)
sk("explained_variance_score", lambda t, p: metrics.explained_variance_score(t, p, **raw), T, P)
sk("mean_pinball_loss", lambda t, p: metrics.mean_pinball_loss(t, p, alpha=0.3, **raw), T, P)
sk(
    "d2_pinball_score",
    lambda t, p: metrics.d2_pinball_score(t, p, alpha=0.3, **raw),
    spread(6),
    spread(6),
)
sk(
    "d2_absolute_error_score",
    lambda t, p: metrics.d2_absolute_error_score(t, p, **raw),
    spread(6),
    spread(6),
)
sk(
    "d2_tweedie_score",
    lambda t, p: metrics.d2_tweedie_score(t, p, power=1.5),
    positive(5),
    positive(5),
    expect=FORWARD,
)
sk(
    "mean_tweedie_deviance",
    lambda t, p: metrics.mean_tweedie_deviance(t, p, power=1.5),
    positive(5),
    positive(5),
    expect=FORWARD,
)
sk(
    "mean_poisson_deviance",
    lambda t, p: metrics.mean_poisson_deviance(t, p),
    positive(5),
    positive(5),
    expect=FORWARD,
)
sk(
    "mean_gamma_deviance",
    lambda t, p: metrics.mean_gamma_deviance(t, p),
    positive(5),
    positive(5),
    expect=FORWARD,
)
sk(
    "mean_squared_log_error",
    lambda t, p: metrics.mean_squared_log_error(t, p, **raw),
    positive(5, 2),
    positive(5, 2),
)
sk(
    "mean_absolute_percentage_error",
    lambda t, p: metrics.mean_absolute_percentage_error(t, p, **raw),
    positive(5, 2),
    positive(5, 2),
)
sk("max_error", lambda t, p: metrics.max_error(t, p), spread(5), spread(5), expect=FORWARD)
sk(
    "median_absolute_error",
    lambda t, p: metrics.median_absolute_error(t, p, **raw),
    spread(5),
    spread(5),
    expect=HOST,
)
sk(
    "log_loss",
    lambda y, p: metrics.log_loss(y, p),
    const([0, 1, 1, 0]),
    positive(4, low=0.2, high=0.8),
    expect=FORWARD,
)


def _pca(solver):
    return lambda x: decomposition.PCA(2, svd_solver=solver).fit(x).explained_variance_


sk("PCA-full", _pca("full"), normal(6, 3))
# eigenvals = flip(eigh(C)[0]); eigenvals[eigenvals < 0.0] = 0.0: a write into a view.
sk("PCA-covariance_eigh", _pca("covariance_eigh"), normal(6, 3))
sk(
    "PCA-covariance_eigh-transform-abs",
    lambda x: _ns(x).abs(decomposition.PCA(1, svd_solver="covariance_eigh").fit_transform(x)),
    normal(6, 3),
)
sk(
    "Ridge-svd",
    lambda x, y: linear_model.Ridge(1.0, solver="svd").fit(x, y).coef_,
    normal(5, 2),
    normal(5),
)
sk(
    "Ridge-cholesky-rejected",
    lambda x, y: linear_model.Ridge(1.0, solver="cholesky").fit(x, y).coef_,
    normal(5, 2),
    normal(5),
    expect=Raises(ValueError, ("only supports solver 'svd'",)),
)
# KernelRidge calls the ndarray method .reshape (not in the standard; raw strict arrays
# lack it too).
sk(
    "KernelRidge-linear",
    lambda x, y: kernel_ridge.KernelRidge(alpha=0.5).fit(x, y).dual_coef_,
    normal(4, 2),
    normal(4),
    expect=Raises(AttributeError, ("reshape",)),
)
sk(
    "LinearDiscriminantAnalysis",
    lambda x, y: discriminant_analysis.LinearDiscriminantAnalysis().fit(x, y).transform(x),
    normal(6, 2),
    const([0, 1, 0, 1, 1, 0]),
)
