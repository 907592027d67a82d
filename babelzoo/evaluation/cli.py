"""``babelzoo eval`` / ``python -m benchmarks.leaderboard``: run a leaderboard config.

    python -m benchmarks.leaderboard --config benchmarks/configs/default.yaml \\
        [--data-dir DIR] [--models A B] [--tasks T U] [--out DIR] [--limit N]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Sequence

import yaml

from ..errors import UsageError, command
from ..zoo.config import ConfigError
from .leaderboard import ModelSpec, run_matrix, write_outputs
from .tasks import TaskContext

STANDARD_SET_OF_TASK = {"tatoeba": "tatoeba", "multi30k": "multi30k", "codex_link_prediction": "codex-s",
                        "sib200_probe": "sib200", "flores_retrieval": "sib200", "sib200": "sib200", "udpos": "ud"}
CONFIG_KEYS = ("title", "data_dir", "languages", "limit", "seed", "tasks", "models", "out", "task_options")


def load_config(path: Path) -> dict[str, Any]:
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: invalid YAML ({err})") from None
    unknown = sorted(set(config) - set(CONFIG_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {unknown}; valid keys: {', '.join(CONFIG_KEYS)}")
    for key in ("tasks", "models"):
        if not config.get(key):
            raise ConfigError(f"{path}: `{key}` must list at least one entry")
    return config


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="babelzoo eval", description="Run a leaderboard config (every task on "
                                                                       "every model) and write its tables and plots.")
    parser.add_argument("--config", type=Path, required=True, help="leaderboard YAML (benchmarks/configs/*.yaml)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="standard benchmark data (tatoeba/, multi30k/, codex-s/, sib200/, ud/); "
                             "default: $BABELZOO_DATA_DIR")
    parser.add_argument("--models", nargs="+", default=None, help="only these model names from the config")
    parser.add_argument("--tasks", nargs="+", default=None, help="only these tasks")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: the config's `out`)")
    parser.add_argument("--limit", type=int, default=None, help="at most N items per language (quick runs)")
    parser.add_argument("--fetch", action="store_true",
                        help="download the standard sets the tasks need into --data-dir (verified by sha256)")
    parser.add_argument("--mirror", default=None, help="with --fetch: a mirror URL (file:// or http) in place of "
                                                        "the official locations")
    return parser


@command("eval")
def eval_main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    config = load_config(args.config)
    specs = [ModelSpec.from_dict(m) for m in config["models"]]
    if args.models:
        known = {s.name for s in specs}
        missing = sorted(set(args.models) - known)
        if missing:
            raise UsageError(f"--models: {missing} not in {args.config}; known: {', '.join(sorted(known))}")
        specs = [s for s in specs if s.name in args.models]
    tasks = args.tasks or list(config["tasks"])
    data_dir = args.data_dir or config.get("data_dir") or os.environ.get("BABELZOO_DATA_DIR")
    if args.fetch:
        if not data_dir:
            raise UsageError("--fetch needs --data-dir (where to put the standard sets)")
        from ..datasets.standard import ensure_standard_set

        for task, name in STANDARD_SET_OF_TASK.items():
            if task in tasks:
                ensure_standard_set(name, data_dir, mirror=args.mirror, log=print)
    context = TaskContext(data_dir=Path(data_dir) if data_dir else None, languages=config.get("languages"),
                          seed=config.get("seed", 0), limit=args.limit if args.limit is not None else config.get("limit"),
                          options=dict(config.get("task_options") or {}))
    results, cells = run_matrix(specs, tasks, context)
    out = args.out or Path(config.get("out") or "leaderboard_out")
    paths = write_outputs(results, cells, out, {"config": str(args.config), "tasks": tasks,
                                               "data_dir": str(context.data_dir) if context.data_dir else None,
                                               "limit": context.limit, "seed": context.seed},
                          title=config.get("title", "babelzoo leaderboard"))
    print(paths["leaderboard"].read_text(encoding="utf-8"))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 1 if any(c.status == "failed" for c in cells) else 0
