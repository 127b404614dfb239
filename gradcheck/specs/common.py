"""The toolkit of the specs: Spec, Sample, ``spec()`` and the sample makers.

Sample inputs for every differentiable op of the registry (a small OpInfo).

A :class:`Spec` names one registered op and generates :class:`Sample` s: NumPy
float64 inputs (the differentiable ones) and a call that applies the op to
them on any wrapped namespace. Points where an op has a kink or a tie are kept
out of the samples (``abs`` away from 0, ``maximum`` with distinct values...),
except samples that test the convention chosen at such a point, which are
written by hand in the tests.

To add an op: register it with its rule, then add a ``Spec`` here; the
gradcheck run and the test-suite fail until both exist.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from autodiff import registry

__all__ = ["Spec", "Sample", "SPECS", "specs", "missing_specs"]


@dataclass
class Sample:
    inputs: tuple
    call: Callable  # call(xp, *tensors) -> Tensor or tuple of Tensors
    label: str


@dataclass
class Spec:
    name: str
    make: Callable  # make(rng) -> list[Sample]
    order2: bool | None = None  # default: the op's ``twice`` metadata
    atol: float = 1e-6
    rtol: float = 1e-5

    def samples(self, seed=0):
        return self.make(np.random.default_rng(seed))

    def tolerances(self, defaults):
        """(atol, rtol) for a first-order check: the spec's own, never tighter than the
        dtype's ``defaults`` (the checker's ``TOLERANCES[dtype]``)."""
        d_atol, d_rtol = defaults
        return max(self.atol, d_atol), max(self.rtol, d_rtol)

    @property
    def second_order(self):
        if self.order2 is not None:
            return self.order2
        return registry.get(self.name).twice


SPECS: dict[str, Spec] = {}


def spec(name, make, **kw):
    if name in SPECS:
        raise ValueError(f"spec {name!r} written twice")
    SPECS[name] = Spec(name, make, **kw)


def fn(xp, name):
    """The public function ``name`` ("linalg.inv" included) of namespace ``xp``."""
    obj = xp
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _in(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape)


def _away(rng, shape, gap=0.2, scale=1.0):
    """Values with |x| >= gap (away from a kink at 0)."""
    x = rng.uniform(gap, scale, size=shape)
    return x * rng.choice([-1.0, 1.0], size=shape)


def _distinct(rng, n):
    """n values at least 0.1 apart (no ties), shuffled."""
    return rng.permutation(np.linspace(-1.0, 1.0, n) + rng.uniform(-0.02, 0.02, n))


SHAPES = [(), (4,), (2, 3)]
PAIRS = [((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3)), ((2, 3), ())]


def _domain_values(rng, shape, domain):
    lo, hi = domain or (-math.inf, math.inf)
    if lo == -1 and hi == 1:
        return _in(rng, shape, -0.8, 0.8)
    if lo == 0 and hi == math.inf:
        return _in(rng, shape, 0.5, 2.0)
    if lo == 1:
        return _in(rng, shape, 1.5, 3.0)
    if lo == -1:
        return _in(rng, shape, -0.5, 2.0)
    return _in(rng, shape, -1.5, 1.5)


def _unary(name, values=None, **kw):
    op = registry.get(name)

    def make(rng):
        out = []
        for shape in SHAPES:
            x = values(rng, shape) if values else _domain_values(rng, shape, op.domain)
            out.append(Sample((x,), lambda xp, a: fn(xp, name)(a), f"shape={shape}"))
        return out

    spec(name, make, **kw)


def _binary(name, values=None, scalars=True, **kw):
    def make(rng):
        v = values or (lambda r, s, i: _in(r, s, -1.5, 1.5))
        out = [
            Sample((v(rng, s1, 0), v(rng, s2, 1)), lambda xp, a, b: fn(xp, name)(a, b),
                   f"{s1} with {s2}")
            for s1, s2 in PAIRS
        ]  # fmt: skip
        if scalars:
            c = float(np.asarray(v(rng, (), 1)))
            d = float(np.asarray(v(rng, (), 0)))
            out.append(Sample((v(rng, (3,), 0),), lambda xp, a: fn(xp, name)(a, c), "x, scalar"))
            out.append(Sample((v(rng, (3,), 1),), lambda xp, b: fn(xp, name)(d, b), "scalar, x"))
        return out

    spec(name, make, **kw)


def specs() -> dict[str, Spec]:
    return dict(SPECS)


def missing_specs() -> tuple[list[str], list[str]]:
    """(differentiable ops without a spec, specs without an op)."""
    ops = {n for n, op in registry.ops().items() if op.kind == registry.DIFF}
    return sorted(ops - set(SPECS)), sorted(set(SPECS) - ops)
