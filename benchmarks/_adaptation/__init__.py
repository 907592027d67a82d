"""The parts of ``benchmarks/adaptation.py``, one file per concept: the arms, a run, training, evaluation and
the report."""
