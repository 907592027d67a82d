"""Evaluation: retrieval metrics, sentence encoders (babelzoo models and peers), registered
benchmark tasks, and the leaderboard writer.

It lives inside the package (not only in ``benchmarks/``) so that ``babelzoo demo`` works from
an installed package; ``benchmarks/`` holds the scripts, configs and committed results."""
