"""``babelzoo finetune --config RECIPE [--set key=value ...] [--data-dir DIR]``: fine-tune from a
recipe, select on the source language's dev set, and print accuracy on every test file.

Examples::

    babelzoo finetune --config sib200_e5_small --data-dir ../shared/data
    babelzoo finetune --config udpos_e5_small --data-dir ../shared/data --set task.epochs=2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Sequence

from ..errors import ArgumentParser, command


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="babelzoo finetune", description="Fine-tune from a recipe, select on the "
                                     "source language's dev set, test on every language's test file.")
    parser.add_argument("--config", required=True, help="recipe file, or the name of a shipped recipe")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a recipe key (YAML value; dotted keys reach into mappings); repeatable")
    parser.add_argument("--data-dir", default=None, help="fills ${BABELZOO_DATA_DIR} in the recipe's paths")
    parser.add_argument("--print-config", action="store_true", help="print the resolved recipe and exit")
    return parser


@command("finetune")
def finetune_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``babelzoo finetune``; returns the exit status."""
    from ..train.config import read_recipe_config, recipe_path
    from .recipe import TaskSpec, gives_max_steps

    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    path = recipe_path(args.config)
    cfg, where = read_recipe_config(path, args.overrides)
    spec = TaskSpec.from_dict(cfg.task, dataclasses.replace(where, label="")).resolve(args.data_dir)  # recipe mistakes with their line
    if args.print_config:
        print(json.dumps({**cfg.to_dict(), "task": spec.to_dict()}, indent=2))
        return 0
    from .run import run_finetune

    result = run_finetune(cfg, data_dir=args.data_dir, max_steps_given=gives_max_steps(where, args.overrides))
    for line in report(result):
        print(line)
    print(f"results in {cfg.output_dir}/results.json")
    return 0


def report(result: dict) -> list[str]:
    """The lines a person reads: one accuracy per test language, the means, the dev score the
    model was selected on, and whether the zero-shot mean is certified (all to 4 places)."""
    lines, tests, protocol = [], result.get("test", {}), result.get("protocol", {})
    if tests:
        lines.append(f"\n{'language':24s} accuracy      n")
        lines += [f"{lang:24s} {row['accuracy']:8.4f} {row['n']:6d}" for lang, row in tests.items()]
        lines.append(f"{'mean':24s} {result['mean']:8.4f}")
        if result.get("mean_zero_shot") is not None:
            lines.append(f"{'mean without the source':24s} {result['mean_zero_shot']:8.4f}")
        elif not protocol.get("zero_shot"):
            lines.append(f"no zero-shot mean: {protocol.get('zero_shot_note')}")
    if result.get("dev") is not None:
        lines.append(f"{protocol.get('selection_metric') or 'dev score'} (selection) {result['dev']:.4f} at step "
                     f"{protocol.get('best_step')}")
    return lines


if __name__ == "__main__":
    from ..errors import cli_logging
    from .cli import finetune_main  # this module under its package name, whose logger cli_logging shows

    with cli_logging():
        sys.exit(finetune_main())
