"""Run a leaderboard config: ``python -m benchmarks.leaderboard --config benchmarks/configs/default.yaml``.

The tasks, encoders and writers live in :mod:`babelzoo.evaluation`, so ``babelzoo eval`` runs the
same thing from an installed package; here its usage lines and error lines name this invocation,
and the command it records is the suite's (``python -m benchmarks run leaderboard_default ...``)
where the config is a suite's."""

import shlex
import sys
from pathlib import Path

from babelzoo.errors import cli_logging, run_command
from babelzoo.evaluation.cli import build_parser, run_eval

from ._results import command_line
from ._suites import SUITES

PROG = "python -m benchmarks.leaderboard"


def main(argv=None) -> int:
    """``babelzoo eval`` under this name: a user error is one line and exit 2, and progress is shown
    on stderr, as there."""
    def run(args) -> int:
        parsed = build_parser(PROG).parse_args(args)
        suite = f"leaderboard_{Path(parsed.config).stem}"
        parsed.command = command_line(suite, ["leaderboard.py", *args]) if suite in SUITES \
            else shlex.join([*PROG.split(), *args])  # recorded with the results
        return run_eval(parsed)

    with cli_logging():
        return run_command("eval", run, sys.argv[1:] if argv is None else argv, prog=PROG)


if __name__ == "__main__":
    sys.exit(main())
