"""Run a leaderboard config: ``python -m benchmarks.leaderboard --config benchmarks/configs/default.yaml``.

The tasks, encoders and writers live in :mod:`babelzoo.evaluation`, so ``babelzoo eval`` runs the
same thing from an installed package."""

import sys

from babelzoo.evaluation.cli import eval_main

if __name__ == "__main__":
    sys.exit(eval_main())
