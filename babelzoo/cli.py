"""The ``babelzoo`` command.

    babelzoo list [PATTERN]          registered models (and objectives, knowledge bases)
    babelzoo info NAME               a model's card, config and parameter count
    babelzoo demo                    the end-to-end main job on embedded data
    babelzoo pretrain --config R     pre-train from a YAML recipe
    babelzoo finetune --config R     fine-tune, select on the source dev set, test every language
    babelzoo convert ...             Hugging Face checkpoint import/export
    babelzoo eval ...                leaderboard tasks on a model
    babelzoo kb info|link|train-kge  knowledge bases: counts, entity linking, KG embeddings

Each subcommand's implementation is imported only when it runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Callable, Sequence

# name -> (module, function taking the remaining argv, one-line help)
DELEGATED: dict[str, tuple[str, str, str]] = {
    "demo": ("babelzoo.demo", "main", "build corpora and a tokenizer, pre-train, evaluate, print a leaderboard"),
    "pretrain": ("babelzoo.train.cli", "pretrain_main", "pre-train from a YAML recipe"),
    "finetune": ("babelzoo.finetune.cli", "finetune_main", "fine-tune from a YAML recipe; zero-shot test on every language"),
    "convert": ("babelzoo.zoo.convert.cli", "convert_main", "import/export Hugging Face checkpoints"),
    "eval": ("babelzoo.evaluation.cli", "eval_main", "run a leaderboard config (task × model matrix)"),
    "kb": ("babelzoo.knowledge.cli", "kb_main", "knowledge bases: info, entity linking, KG embedding training"),
}


def _list(args: argparse.Namespace) -> int:
    from .zoo.factory import list_models, model_entry

    for name in list_models(args.pattern):
        card = model_entry(name).doc.split("\n\n")[0].replace("\n", " ")
        print(f"{name:24s} {card[:100]}{'...' if len(card) > 100 else ''}")
    return 0


def _info(args: argparse.Namespace) -> int:
    from .zoo.factory import create_model, model_entry

    entry = model_entry(args.name)
    print(entry.name)
    print(entry.doc, end="\n\n")
    print(entry.config().to_json(), end="")
    if entry.pretrained is not None:
        print(f"pretrained weights: {entry.pretrained.source}")
        if entry.pretrained.hf_hub_id is not None:
            print(f"hf_hub_id: {entry.pretrained.hf_hub_id}")
    print(f"parameters: {create_model(args.name).num_parameters():,}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="babelzoo", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("list", help="list registered models")
    p.add_argument("pattern", nargs="?", default=None, help="wildcard, e.g. 'xlm*'")
    p.set_defaults(func=_list)
    p = sub.add_parser("info", help="show a model's card, config and size")
    p.add_argument("name")
    p.set_defaults(func=_info)
    for name, (_, _, help_text) in DELEGATED.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _delegate(name: str) -> Callable[[Sequence[str]], int]:
    module, func, _ = DELEGATED[name]
    return getattr(importlib.import_module(module), func)


def main(argv: Sequence[str] | None = None) -> int:
    """``babelzoo COMMAND ...``: a user error is one line on stderr and exit status 2
    (:mod:`babelzoo.errors`); a traceback means a bug."""
    from .errors import run_command

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DELEGATED:
        return run_command(argv[0], _delegate(argv[0]), argv[1:])
    args = build_parser().parse_args(argv)
    return run_command(args.command, lambda _: args.func(args), argv)


if __name__ == "__main__":
    sys.exit(main())
