"""babelzoo convert: Hugging Face <-> babelzoo checkpoint directories.

    babelzoo convert --from-hf HF_DIR --to OUT_DIR            import (BERT, XLM-R, ALBERT, ..., BART, mBART, T5)
    babelzoo convert --to-hf OUT_DIR --from CHECKPOINT_DIR    export [--family bert|xlmr|albert|...|bart|mbart|t5]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from ..._files import same_or_inside
from ...datasets.download import is_url
from ...errors import ArgumentParser, UsageError, command


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="babelzoo convert", description="Import or export Hugging Face "
                            "checkpoints (BERT, XLM-R, ALBERT, ModernBERT, XLNet, with their task heads; BART, "
                            "mBART, T5).",
                            epilog="babelzoo convert --from-hf HF_DIR --to OUT_DIR | "
                                   "babelzoo convert --to-hf OUT_DIR --from CHECKPOINT [--family F]")
    direction = parser.add_mutually_exclusive_group(required=True)
    direction.add_argument("--from-hf", metavar="HF_DIR", help="Hugging Face model directory to import")
    direction.add_argument("--to-hf", metavar="OUT_DIR", help="write a Hugging Face model directory here")
    parser.add_argument("--to", metavar="OUT_DIR", help="with --from-hf: where to write the babelzoo checkpoint")
    parser.add_argument("--from", dest="source", metavar="CHECKPOINT",
                        help="with --to-hf: babelzoo checkpoint directory (or URL) to export")
    parser.add_argument("--family", metavar="FAMILY",
                        help="with --to-hf: bert, xlmr, albert, modernbert, xlnet, bart, mbart or t5 (default: from "
                             "the model's architecture)")
    return parser


@command("convert")
def convert_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``babelzoo convert``; returns the exit status."""

    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.from_hf and (args.to is None or args.source or args.family):
        parser.error("--from-hf needs --to OUT_DIR (and takes neither --from nor --family)")
    if args.to_hf and (args.source is None or args.to):
        parser.error("--to-hf needs --from CHECKPOINT (and does not take --to)")
    source, target = (args.from_hf, args.to) if args.from_hf else (args.source, args.to_hf)
    if not is_url(source) and same_or_inside(source, target):
        raise UsageError(f"{'--to' if args.from_hf else '--to-hf'} {target} and {'--from-hf' if args.from_hf else '--from'} "
                         f"{source} are the same folder or one holds the other: writing the conversion would replace "
                         "the checkpoint it reads; give another output folder")
    if args.from_hf:
        return _import(args.from_hf, args.to)
    return _export(args.source, args.to_hf, args.family)


def _import(source: str, target: str) -> int:
    from . import import_hf

    model = import_hf(source)
    model.save_pretrained(target)
    print(f"imported {source} as {model.config.architecture!r} ({model.num_parameters():,} parameters"
          f"{', with tokenizer' if getattr(model, 'tokenizer', None) is not None else ''}) -> {target}")
    return 0


def _export(source: str, target: str, family: str | None) -> int:
    from ..pretrained import from_pretrained
    from ..seq2seq_config import Seq2SeqConfig
    from . import export_hf, family_for

    model = from_pretrained(source)
    if isinstance(model.config.text, Seq2SeqConfig):
        out = export_hf(model, target, family=family)
        hf_class = json.loads((out / "config.json").read_text(encoding="utf-8"))["architectures"][0]
        print(f"exported {source} as {hf_class} ({model.num_parameters():,} parameters) -> {target}")
        return 0
    fam = family_for(family or model.config.architecture)
    export_hf(model, target, family=fam.name)
    print(f"exported {source} as {fam.hf_class(model.config)} ({model.num_parameters():,} parameters"
          f"{', with tokenizer' if getattr(model, 'tokenizer', None) is not None else ''}) -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(convert_main())
