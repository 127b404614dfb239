"""Speed and memory against hand-written NumPy and PyTorch: ``python -m benchmarks CASE``."""

import os

# PyTorch's OpenMP threads spin after each call and slow whatever runs next on a
# 2-core machine (NumPy's BLAS calls of the interleaved implementations, above all);
# passive waiting keeps the interleaved comparison fair.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
