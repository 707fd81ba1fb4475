"""Benchmarks: ``python -m bench <suite> [--quick]``. Results go to ``bench/results/``."""
