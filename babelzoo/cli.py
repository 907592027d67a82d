"""The ``babelzoo`` command.

    babelzoo list [WHAT] [PATTERN]   models, objectives, sources, tasks, kbs or recipes
    babelzoo info NAME               a model's card, config and parameter count
    babelzoo demo                    the end-to-end main job on embedded data
    babelzoo pretrain --config R     pre-train from a YAML recipe
    babelzoo finetune --config R     fine-tune, select on the source dev set, test every language
    babelzoo convert ...             Hugging Face checkpoint import/export, ONNX export
    babelzoo eval ...                leaderboard tasks on a model
    babelzoo encode ...              sentence vectors of a file's sentences (.npy or .jsonl)
    babelzoo kb info|link|train-kge  knowledge bases: counts, entity linking, KG embeddings

Each subcommand's implementation is imported only when it runs. Library modules report through
``logging.getLogger(__name__)``; the command shows those records on stderr as plain lines (INFO and
up, with the training progress bar and summary; ``-q`` only warnings and errors, ``-v`` debug
records too), and writes its own result to stdout whatever the level.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import re
import sys
from typing import Callable, Sequence

from .errors import ArgumentParser, cli_logging

# name -> (module, function taking the remaining argv, one-line help)
DELEGATED: dict[str, tuple[str, str, str]] = {
    "demo": ("babelzoo.demo", "main", "build corpora and a tokenizer, pre-train, evaluate, print a leaderboard"),
    "pretrain": ("babelzoo.knowledge.pretrain_cli", "pretrain_main", "pre-train from a YAML recipe"),
    "finetune": ("babelzoo.finetune.cli", "finetune_main", "fine-tune from a YAML recipe; zero-shot test on every language"),
    "convert": ("babelzoo.deploy.convert_cli", "convert_main", "import/export Hugging Face checkpoints; export to ONNX"),
    "eval": ("babelzoo.evaluation.cli", "eval_main", "run a leaderboard config (task × model matrix)"),
    "encode": ("babelzoo.encode", "encode_main", "sentence vectors of a file's sentences, one a line (.npy or .jsonl)"),
    "kb": ("babelzoo.knowledge.cli", "kb_main", "knowledge bases: info, entity linking, KG embedding training"),
}


def plain(text: str) -> str:
    """reST markup out of a docstring for the terminal: ``x`` → x, :class:`~a.b.C` → C."""
    text = re.sub(r":[a-z]+:`~?([^`]*)`", lambda m: m[1].rsplit(".", 1)[-1] if "~" in m[0] else m[1], text)
    return re.sub(r"``([^`]*)``", r"\1", text)


def _first_line(doc: str | None) -> str:
    card = plain(" ".join((doc or "").strip().split("\n\n")[0].split()))
    return f"{card[:100]}{'...' if len(card) > 100 else ''}"


def _models() -> list[tuple[str, str]]:
    from .zoo.factory import list_models, model_entry

    return [(name, model_entry(name).doc) for name in list_models()]


def _objectives() -> list[tuple[str, str]]:
    from .objectives.base import OBJECTIVES
    from .objectives.mixture import all_objectives

    return [(name, f"[{OBJECTIVES.get(name).consumes}] {_first_line(OBJECTIVES.get(name).__doc__)}")
            for name in all_objectives()]


def _sources() -> list[tuple[str, str]]:
    from .datasets.sources import SOURCES, source_kinds

    return [(kind, f"[{SOURCES.get(kind).provides}] {_first_line(SOURCES.get(kind).__doc__)}")
            for kind in source_kinds()]


def _tasks() -> list[tuple[str, str]]:
    from .evaluation.tasks import load_tasks

    tasks = load_tasks()
    return [(name, tasks.get(name).__doc__) for name in tasks.list()]


def _kbs() -> list[tuple[str, str]]:
    from .knowledge.base import KNOWLEDGE_BASES

    return [(name, factory.__doc__) for name, factory in KNOWLEDGE_BASES.items()]


def _recipes() -> list[tuple[str, str]]:
    from pathlib import Path

    shipped = Path(__file__).resolve().parent / "recipes"
    out = []
    for path in sorted(shipped.glob("*.yaml")):
        comment = [line[1:].strip() for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("#")]
        out.append((path.stem, " ".join(comment).split(":   ")[0]))
    return out


LISTS = {"models": _models, "objectives": _objectives, "sources": _sources, "tasks": _tasks, "kbs": _kbs,
         "recipes": _recipes}


def _list(args: argparse.Namespace) -> int:
    import fnmatch

    kind, pattern = args.kind, args.pattern
    if kind not in LISTS:  # `babelzoo list xlm*`: a pattern over models
        kind, pattern = "models", kind
    for name, doc in LISTS[kind]():
        if pattern is None or fnmatch.fnmatchcase(name, pattern):
            print(f"{name:26s} {_first_line(doc)}")
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
    parser = ArgumentParser(prog="babelzoo", description="Multilingual, multimodal and knowledge-enhanced "
                            "encoders: the zoo, pre-training, fine-tuning, conversion, leaderboards.",
                            epilog="Each command's options: babelzoo COMMAND --help")
    loudness = parser.add_mutually_exclusive_group()
    loudness.add_argument("-q", "--quiet", action="store_true",
                          help="show only warnings and errors on stderr (no progress bar or training summary); "
                               "the command's result still goes to stdout")
    loudness.add_argument("-v", "--verbose", action="store_true", help="show debug messages on stderr too")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("list", help="list models, objectives, data sources, tasks, knowledge bases or recipes")
    p.add_argument("kind", nargs="?", default="models", metavar="WHAT",
                   help=f"one of {', '.join(LISTS)} (default models), or a wildcard over models")
    p.add_argument("pattern", nargs="?", default=None, help="wildcard, e.g. 'xlm*'")
    p.set_defaults(func=_list)
    p = sub.add_parser("info", help="show a model's card, config and size")
    p.add_argument("name", help="a registered model (babelzoo list)")
    p.set_defaults(func=_info)
    for name, (_, _, help_text) in DELEGATED.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _delegate(name: str) -> Callable[[Sequence[str]], int]:
    module, func, _ = DELEGATED[name]
    return getattr(importlib.import_module(module), func)


LEVELS = {"-q": logging.WARNING, "--quiet": logging.WARNING, "-v": logging.DEBUG, "--verbose": logging.DEBUG}


def main(argv: Sequence[str] | None = None) -> int:
    """``babelzoo [-q|-v] COMMAND ...``: a user error is one line on stderr and exit status 2
    (:mod:`babelzoo.errors`); a traceback means a bug. ``-q``/``-v`` may also follow the command
    (``babelzoo pretrain --config demo -q``), anywhere before a ``--``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    end = argv.index("--") if "--" in argv else len(argv)
    loudness = [a for a in argv[:end] if a in LEVELS]
    argv = [a for a in argv[:end] if a not in LEVELS] + argv[end:]
    if len({LEVELS[a] for a in loudness}) > 1:
        print("babelzoo: -q/--quiet and -v/--verbose exclude each other; give one", file=sys.stderr)
        return 2
    with cli_logging(LEVELS[loudness[0]] if loudness else logging.INFO):
        return _run(argv)


def _run(argv: list[str]) -> int:
    from .errors import USER_ERROR, UsageError, run_command

    if argv and argv[0] in DELEGATED:
        return run_command(argv[0], _delegate(argv[0]), argv[1:])
    try:
        args = build_parser().parse_args(argv)
    except UsageError as err:
        print(f"babelzoo: {err}", file=sys.stderr)
        return USER_ERROR
    return run_command(args.command, lambda _: args.func(args), argv)


if __name__ == "__main__":
    sys.exit(main())
