"""Run the BLAS of NumPy and PyTorch on the same number of threads."""

from __future__ import annotations


def limit_threads(n: int) -> None:
    try:
        import torch

        torch.set_num_threads(n)
    except ImportError:
        pass
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)
    except ImportError:  # without threadpoolctl, set OPENBLAS_NUM_THREADS before starting
        pass
