"""``babelzoo eval`` / ``python -m benchmarks.leaderboard``: run a leaderboard config.

    python -m benchmarks.leaderboard --config benchmarks/configs/default.yaml \\
        [--data-dir DIR] [--models A B] [--tasks T U] [--out DIR] [--limit N]
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Optional, Sequence

from .._files import expand_path
from ..config_files import load_config as load_typed
from ..errors import ArgumentParser, UsageError, command
from ..options import option
from ..typed import Range, Section, Seed, Where, check_fields
from ..zoo.config import ConfigError
from .leaderboard import ModelSpec, run_matrix, write_outputs
from .tasks import TaskContext

logger = logging.getLogger(__name__)

COUNT = Annotated[int, Range(1)]  # items per language: at least one
STANDARD_SET_OF_TASK = {"tatoeba": "tatoeba", "multi30k": "multi30k", "codex_link_prediction": "codex-s",
                        "sib200_probe": "sib200", "flores_retrieval": "sib200", "sib200": "sib200", "udpos": "ud"}


def read_models(value: list, where: Where) -> list[ModelSpec]:
    """A leaderboard's ``models``, each a :class:`~babelzoo.evaluation.leaderboard.ModelSpec`."""
    return [ModelSpec.from_dict(model, where.key(i)) for i, model in enumerate(value)]


@dataclass
class LeaderboardConfig:
    """A leaderboard YAML (``benchmarks/configs/*.yaml``): the ``tasks`` run on every one of
    ``models`` (:class:`~babelzoo.evaluation.leaderboard.ModelSpec` mappings)."""

    tasks: list[str]
    models: Annotated[list[dict], Section(read_models)]
    title: str = "babelzoo leaderboard"
    data_dir: Optional[str] = None
    languages: Optional[list[str]] = None
    limit: Optional[COUNT] = None
    seed: Seed = 0
    out: Optional[str] = None
    task_options: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("tasks", "models"):
            if not getattr(self, name):
                raise ConfigError(f"LeaderboardConfig.{name}=[] must list at least one entry")


def load_config(path: Path) -> LeaderboardConfig:
    """Read a leaderboard YAML (:func:`~babelzoo.config_files.load_config`); mistakes, in its models too,
    are errors naming the file, line and key."""
    return load_typed(LeaderboardConfig, path, what="leaderboard config", kind="leaderboard config").config


def build_parser(prog: str = "babelzoo eval") -> argparse.ArgumentParser:
    """The options of ``babelzoo eval``; ``prog``: how the user invoked it, for usage lines."""
    parser = ArgumentParser(prog=prog, description="Run a leaderboard config (every task on every model) "
                                                   "and write its tables and plots.")
    parser.add_argument("--config", type=Path, required=True, help="leaderboard YAML (benchmarks/configs/*.yaml)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="standard benchmark data (tatoeba/, multi30k/, codex-s/, sib200/, ud/); "
                             "default: $BABELZOO_DATA_DIR")
    parser.add_argument("--models", nargs="+", default=None, help="only these model names from the config")
    parser.add_argument("--tasks", nargs="+", default=None, help="only these tasks")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: the config's `out`)")
    parser.add_argument("--limit", type=option(COUNT), default=None, help="at most N items per language (quick runs)")
    parser.add_argument("--fetch", action="store_true",
                        help="download the standard sets the tasks need into --data-dir (verified by sha256)")
    parser.add_argument("--mirror", default=None, help="with --fetch: a mirror URL (file:// or http) in place of "
                                                        "the official locations")
    return parser


def check_out(out: Path, named: str) -> None:
    """Refuse, before anything is evaluated, an output folder that cannot be one: an existing
    file, a path through a file, or a folder that cannot be written."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"{named}={out} is a file; the tables and plots need a folder: name a folder (it is created "
                         "if missing)")
    existing = next(p for p in [out, *out.absolute().parents] if p.exists())
    if not existing.is_dir():
        raise UsageError(f"{named}={out} lies inside {existing}, which is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{named}={out}: {existing} cannot be written")


@command("eval")
def eval_main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.command = shlex.join(["babelzoo", "eval", *(sys.argv[1:] if argv is None else argv)])  # recorded with the results
    return run_eval(args)


def run_eval(args: argparse.Namespace) -> int:
    """``babelzoo eval`` with parsed arguments."""
    config = load_config(args.config)
    specs = [ModelSpec.from_dict(m) for m in config.models]
    if args.models:
        known = {s.name for s in specs}
        missing = sorted(set(args.models) - known)
        if missing:
            raise UsageError(f"--models: {missing} not in {args.config}; known: {', '.join(sorted(known))}")
        specs = [s for s in specs if s.name in args.models]
    tasks = args.tasks or list(config.tasks)
    data_dir = args.data_dir or (config.data_dir and expand_path(config.data_dir, f"{args.config}: data_dir")) \
        or os.environ.get("BABELZOO_DATA_DIR")
    if args.fetch:
        if not data_dir:
            raise UsageError("--fetch needs --data-dir (where to put the standard sets)")
        from ..datasets.standard import ensure_standard_set

        for task, name in STANDARD_SET_OF_TASK.items():
            if task in tasks:
                ensure_standard_set(name, data_dir, mirror=args.mirror, log=logger.info)
    context = TaskContext(data_dir=Path(data_dir) if data_dir else None, languages=config.languages,
                          seed=config.seed, limit=args.limit if args.limit is not None else config.limit,
                          options=dict(config.task_options))
    out = args.out or Path(expand_path(config.out, f"{args.config}: out") if config.out else "leaderboard_out")
    check_out(out, "--out" if args.out else f"{args.config}: out" if config.out else "the default output folder")
    results, cells = run_matrix(specs, tasks, context)
    paths = write_outputs(results, cells, out, {"command": getattr(args, "command", None), "config": str(args.config), "tasks": tasks,
                                               "data_dir": str(context.data_dir) if context.data_dir else None,
                                               "limit": context.limit, "seed": context.seed},
                          title=config.title)
    print(paths["leaderboard"].read_text(encoding="utf-8"))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 1 if any(c.status == "failed" for c in cells) else 0
