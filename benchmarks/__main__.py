"""``python -m benchmarks``: list the suites, run one, or render the committed results.

    python -m benchmarks list
    python -m benchmarks run compression --data-dir ../shared/data   # options go to the suite's script
    python -m benchmarks run compression --help                      # the script's own options
    python -m benchmarks render compression        # its Markdown (and charts) from its JSON, nothing rerun
    python -m benchmarks render --all              # every suite's, and the index results/README.md
"""

from __future__ import annotations

import importlib
import sys
from typing import Optional, Sequence

from babelzoo._files import write_text_atomic
from babelzoo.errors import ArgumentParser, run_command

from . import _results
from ._results import INDEX, RESULTS, archive_index, current_machine, index, render_file, runs, suite_file
from ._suites import SUITES

PROG = "python -m benchmarks"


def list_suites() -> str:
    width = max(map(len, SUITES.list()))
    return "\n".join(f"{name:<{width}}  {SUITES.get(name).description}" for name in SUITES.list())


def run_argv(name: str, options: Sequence[str]) -> list[str]:
    """The suite's script's argv: its configuration's options, then the user's; without the
    user's own ``--out`` (relative to the current directory, as the user's options are), the
    results go to ``benchmarks/results/NAME/<machine-tag>.json``, a leaderboard's to
    ``benchmarks/results/NAME/``, in the repository wherever the command runs."""
    entry = SUITES.get(name)
    argv = [*entry.arguments(), *options]
    if not any(o == "--out" or o.startswith("--out=") for o in options):
        out = suite_file(name, current_machine(gpu=entry.gpu)["tag"]) if entry.writes_out else RESULTS / name
        argv += ["--out", str(out)]
    return argv


def run_suite(name: str, options: Sequence[str]) -> int:
    """The script's exit status: what its ``main`` returns, or its ``exit_code(report)`` where
    ``main`` returns the report (gpu_check: 1 when a check failed)."""
    module = importlib.import_module(SUITES.get(name).module)
    result = module.main(run_argv(name, options))
    if hasattr(module, "exit_code"):
        return module.exit_code(result)
    return result if isinstance(result, int) else 0


def render(names: Sequence[str], plots: bool = True) -> list[str]:
    """Rewrite each suite's pages from its JSON, then the index and the archive's; return the files
    written."""
    written = [str(path) for name in names if SUITES.get(name).writes_out for json_file in runs(name)
               for path in render_file(json_file, plots)]
    text = index([SUITES.get(name) for name in SUITES.list()])
    archive = _results.RESULTS / "archive"
    shelved = [str(write_text_atomic(archive / "README.md", archive_index()))] if archive.is_dir() else []
    return written + [str(write_text_atomic(INDEX, text))] + shelved


def parser() -> ArgumentParser:
    p = ArgumentParser(prog=PROG, description="Benchmark suites: list, run, render.")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="every suite and what it measures")
    run = sub.add_parser("run", help="run one suite; the options after NAME go to its script", add_help=False)
    run.add_argument("name", metavar="NAME")
    shown = sub.add_parser("render", help="Markdown and charts from the committed JSON, and the index")
    shown.add_argument("names", nargs="*", metavar="NAME")
    shown.add_argument("--all", action="store_true", help="every suite")
    shown.add_argument("--no-plots", dest="plots", action="store_false", help="Markdown only")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """A user error (an unknown suite or option) is one line on stderr and exit 2."""
    return run_command("benchmarks", command, list(sys.argv[1:] if argv is None else argv), prog=PROG)


def command(argv: list[str]) -> int:
    p = parser()
    args, rest = p.parse_known_args(argv)
    if args.command != "run" and rest:
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "list":
        print(list_suites())
        return 0
    if args.command == "run":
        return run_suite(args.name, rest)
    if not args.all and not args.names:
        p.error("name the suites to render, or --all")
    print("\n".join(render(SUITES.list() if args.all else args.names, args.plots)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
