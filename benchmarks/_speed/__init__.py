"""The parts of ``benchmarks/speed.py``, one file per section of its report."""
