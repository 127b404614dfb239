"""Set functions: integer, boolean or piecewise constant results only."""

from ._util import nondiff

nondiff("set", "unique_all", "unique_counts", "unique_inverse", "unique_values")
