"""The parts of ``benchmarks/gpu_check.py``: the checks, one file per concept, and the report."""
