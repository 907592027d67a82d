"""Benchmark suites and their committed results.

``python -m benchmarks list`` names every suite (:mod:`benchmarks._suites`), ``python -m benchmarks
run NAME [options]`` runs one into ``benchmarks/results/NAME/<machine-tag>.json`` with its page
beside it, and ``python -m benchmarks render --all`` remakes every page and the index
``benchmarks/results/README.md`` from the committed JSON (:mod:`benchmarks._results`). Each script
also runs on its own: ``python benchmarks/gpu_check.py``."""
