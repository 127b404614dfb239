"""Set functions: the unique values carry the gradient of the entries equal to them
(split evenly where a value occurs more than once, as ``max``'s ties); the indices,
inverse indices and counts are integers."""

from ..engine.registry import defop


def _values(xp, gv, x):
    """``x``'s gradient from its unique values' ``gv``: each entry gets its value's
    gradient divided by the value's count."""
    # unique_inverse and unique_counts: array_api_compat's torch has no unique_all
    inverse = xp.reshape(xp.unique_inverse(x)[1], (-1,))
    counts = xp.unique_counts(x)[1]
    share = xp.take(gv, inverse) / xp.astype(xp.take(counts, inverse), gv.dtype)
    return xp.reshape(share, x.shape)


defop("unique_values", lambda xp, g, ans, x: _values(xp, g, x), chapter="set",
      data_dependent=True)  # fmt: skip
for _name in ("unique_all", "unique_counts", "unique_inverse"):  # the values come first
    defop(_name, lambda xp, g, ans, x: _values(xp, g[0], x), chapter="set",
          data_dependent=True)  # fmt: skip
