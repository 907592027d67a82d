"""Benchmark scripts (leaderboard, speed, per-area benchmarks) and their committed results."""
