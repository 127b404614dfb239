"""Specs of the ``linalg`` extension."""

from __future__ import annotations

import numpy as np

from .common import Sample, _away, _in, spec


# -- linalg -----------------------------------------------------------------------
def _spd(rng, n, batch=()):
    a = _in(rng, batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _well(rng, n, batch=()):
    return _in(rng, batch + (n, n)) + 2.5 * np.eye(n)


def _sym_distinct(rng, n):
    q, _ = np.linalg.qr(_in(rng, (n, n)))
    return (q * np.linspace(-2.0, 2.0, n)) @ q.T


def _sym_call(f):
    """Eigen-decompositions read one triangle: differentiate the symmetrized input."""
    return lambda xp, a: f(xp, (a + xp.matrix_transpose(a)) / 2)


spec("linalg.inv", lambda rng: [Sample((_well(rng, 3),), lambda xp, a: xp.linalg.inv(a), "3x3"),
                                Sample((_well(rng, 2, (2,)),), lambda xp, a: xp.linalg.inv(a), "batched")])  # fmt: skip
spec("linalg.det", lambda rng: [Sample((_well(rng, 3),), lambda xp, a: xp.linalg.det(a), "3x3"),
                                Sample((_well(rng, 2, (2,)),), lambda xp, a: xp.linalg.det(a), "batched")])  # fmt: skip
spec("linalg.slogdet", lambda rng: [Sample((_well(rng, 3) * np.array([1, -1, 1]),),
                                           lambda xp, a: xp.linalg.slogdet(a).logabsdet, "logabsdet")])  # fmt: skip
spec("linalg.solve", lambda rng: [
    Sample((_well(rng, 3), _in(rng, (3, 2))), lambda xp, a, b: xp.linalg.solve(a, b), "matrix rhs"),
    Sample((_well(rng, 3), _in(rng, (3,))), lambda xp, a, b: xp.linalg.solve(a, b), "vector rhs"),
    Sample((_well(rng, 2, (2,)), _in(rng, (2, 2, 1))), lambda xp, a, b: xp.linalg.solve(a, b), "batched"),
])  # fmt: skip
spec("linalg.cholesky", lambda rng: [
    Sample((_spd(rng, 3),), _sym_call(lambda xp, a: xp.linalg.cholesky(a)), "lower"),
    Sample((_spd(rng, 3),), _sym_call(lambda xp, a: xp.linalg.cholesky(a, upper=True)), "upper"),
])  # fmt: skip
spec("linalg.trace", lambda rng: [Sample((_in(rng, (3, 4)),), lambda xp, a: xp.linalg.trace(a, offset=o), f"offset={o}")
                                  for o in (0, 1, -1)])  # fmt: skip
spec("linalg.diagonal", lambda rng: [Sample((_in(rng, (2, 3, 4)),), lambda xp, a, o=o: xp.linalg.diagonal(a, offset=o),
                                            f"offset={o}") for o in (0, 2, -1)])  # fmt: skip
spec(
    "linalg.outer",
    lambda rng: [
        Sample((_in(rng, (3,)), _in(rng, (2,))), lambda xp, a, b: xp.linalg.outer(a, b), "3x2")
    ],
)
spec(
    "linalg.cross",
    lambda rng: [
        Sample(
            (_in(rng, (2, 3)), _in(rng, (3,))), lambda xp, a, b: xp.linalg.cross(a, b), "broadcast"
        )
    ],
)
spec("linalg.vector_norm", lambda rng: [
    Sample((_away(rng, (2, 3)),), lambda xp, a, o=o, ax=ax: xp.linalg.vector_norm(a, axis=ax, ord=o), f"ord={o}, axis={ax}")
    for o in (2, 1, 3, float("inf")) for ax in (None, 1)
])  # fmt: skip
spec(
    "linalg.matrix_norm",
    lambda rng: [Sample((_in(rng, (2, 3, 3)),), lambda xp, a: xp.linalg.matrix_norm(a), "fro")],
)
spec("linalg.matrix_power", lambda rng: [Sample((_well(rng, 3) / 3,), lambda xp, a, n=n: xp.linalg.matrix_power(a, n), f"n={n}")
                                         for n in (0, 1, 3, -2)])  # fmt: skip
spec("linalg.eigh", lambda rng: [
    Sample((_sym_distinct(rng, 3),), _sym_call(lambda xp, a: xp.linalg.eigh(a).eigenvalues), "eigenvalues"),
    Sample((_sym_distinct(rng, 3),), _sym_call(lambda xp, a: xp.abs(xp.linalg.eigh(a).eigenvectors[0, :])),
           "eigenvectors (sign-fixed)"),
])  # fmt: skip
spec(
    "linalg.eigvalsh",
    lambda rng: [
        Sample((_sym_distinct(rng, 3),), _sym_call(lambda xp, a: xp.linalg.eigvalsh(a)), "3x3")
    ],
)
spec(
    "linalg.svdvals",
    lambda rng: [Sample((_in(rng, (3, 2)),), lambda xp, a: xp.linalg.svdvals(a), "3x2")],
)
