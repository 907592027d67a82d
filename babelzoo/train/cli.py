"""``babelzoo pretrain --config RECIPE.yaml [--set key=value ...]``: build a run from a recipe
(:func:`babelzoo.train.run.build_run`, whose module describes a recipe's fields) and train it::

    babelzoo pretrain --config mlm_tiny --set max_steps=50 --set output_dir=runs/try
    babelzoo pretrain --config my.yaml --set "data.mlm=[{kind: text, path: de.txt, lang: de}]"
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Sequence

from ..errors import ArgumentParser, command
from ..zoo.config import ConfigError
from .config import read_recipe_config, recipe_path
from .run import build_run

logger = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="babelzoo pretrain", description="Pre-train from a YAML recipe.",
                            epilog="Launch on several GPUs/processes with torchrun: "
                                   "torchrun --nproc-per-node N -m babelzoo.cli pretrain --config R")
    parser.add_argument("--config", required=True, help="recipe file, or the name of a shipped recipe")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a recipe key (YAML value; dotted keys reach into mappings); repeatable")
    parser.add_argument("--print-config", action="store_true", help="print the resolved recipe and exit")
    return parser


@command("pretrain")
def pretrain_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``babelzoo pretrain``; returns the exit status."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    path = recipe_path(args.config)
    cfg, where = read_recipe_config(path, args.overrides)
    if args.print_config:
        print(json.dumps(cfg.to_dict(), indent=2))
        return 0
    from . import distributed as D

    # Under torchrun, rank 0 trains/saves the tokenizer and fills the token cache first; the
    # other ranks then load both instead of racing to write them. What rank 0 runs alone makes
    # no collective: the other ranks wait in the broadcast below, which a collective of rank 0's
    # own would pair with (CheckpointManager.latest_here, not latest).
    info = D.init_distributed(cfg.device)
    logger.debug("recipe %s, resolved: %s", path, json.dumps(cfg.to_dict()))
    logger.debug("rank %d of %d, device %s", info.rank, info.world_size, info.device)

    def attempt():
        try:
            return build_run(cfg, where)
        except (ConfigError, ValueError, OSError) as err:
            print(f"babelzoo pretrain: {err}", file=sys.stderr)
            return None

    try:
        run = attempt() if info.is_main else None
        if not D.broadcast_object(run is not None):
            return 2  # rank 0 failed: every rank stops
        if not info.is_main:
            run = attempt()
        if D.any_rank(run is None):
            return 2
        summary = run.trainer().fit()
        if not info.is_main:
            return 0
        if summary.get("checkpoint"):
            print(f"checkpoint in {summary['checkpoint']}")
        if cfg.model_dir:
            from .model_card import write_trained_model

            print(f"trained model in {write_trained_model(run.model, run.tokenizer, cfg, summary, run.sources)}")
        return 0
    finally:
        D.shutdown(info)


if __name__ == "__main__":
    from ..errors import cli_logging
    from .cli import pretrain_main  # this module under its package name, whose logger cli_logging shows

    with cli_logging():
        sys.exit(pretrain_main())
