"""Speed and memory against hand-written NumPy and PyTorch: ``python -m benchmarks CASE``."""
