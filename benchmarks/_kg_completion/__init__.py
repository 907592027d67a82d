"""The parts of benchmarks/kg_completion.py."""
