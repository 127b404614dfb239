"""GPU benchmark cases and results (``scripts/gpu_check.py`` runs them)."""
