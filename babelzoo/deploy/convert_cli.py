"""babelzoo convert: Hugging Face <-> babelzoo checkpoint directories, and ONNX export.

    babelzoo convert --from-hf HF_DIR --to OUT_DIR            import (BERT, XLM-R, ALBERT, ..., BART, mBART, T5)
    babelzoo convert --to-hf OUT_DIR --from MODEL             export [--family bert|xlmr|albert|...|bart|mbart|t5]
    babelzoo convert --to-onnx OUT_DIR --from MODEL           ONNX [--quantize int8 [--calibration FILE]
                                                              [--keep-fp32 ffn_out]] [--head]

MODEL is a checkpoint folder (or URL, Hub id) or a registered model name (its published weights).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from .._files import same_or_inside
from ..datasets.download import is_url
from ..errors import ArgumentParser, UsageError, command


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="babelzoo convert", description="Import or export Hugging Face "
                            "checkpoints (BERT, XLM-R, ALBERT, ModernBERT, XLNet, with their task heads; BART, "
                            "mBART, T5).",
                            epilog="babelzoo convert --from-hf HF_DIR --to OUT_DIR | "
                                   "babelzoo convert --to-hf OUT_DIR --from CHECKPOINT [--family F]")
    direction = parser.add_mutually_exclusive_group(required=True)
    direction.add_argument("--from-hf", metavar="HF_DIR", help="Hugging Face model directory to import")
    direction.add_argument("--to-hf", metavar="OUT_DIR", help="write a Hugging Face model directory here")
    direction.add_argument("--to-onnx", metavar="OUT_DIR", help="write an ONNX export (model.onnx, tokenizer) here")
    parser.add_argument("--to", metavar="OUT_DIR", help="with --from-hf: where to write the babelzoo checkpoint")
    parser.add_argument("--from", dest="source", metavar="MODEL",
                        help="with --to-hf/--to-onnx: a checkpoint folder (or URL, Hub id) or a registered model name")
    parser.add_argument("--family", metavar="FAMILY",
                        help="with --to-hf: bert, xlmr, albert, modernbert, xlnet, bart, mbart or t5 (default: from "
                             "the model's architecture)")
    onnx = parser.add_argument_group("ONNX export (--to-onnx)")
    onnx.add_argument("--quantize", choices=["int8"], help="int8 weights and activations (ONNX Runtime's kernels)")
    onnx.add_argument("--calibration", metavar="FILE",
                      help="with --quantize int8: texts, one a line, for SmoothQuant's activation scales")
    onnx.add_argument("--alpha", type=float, default=0.5, help="SmoothQuant's migration strength (default 0.5)")
    onnx.add_argument("--keep-fp32", action="append", default=[], choices=["ffn_out"], metavar="PRODUCTS",
                      help="with --quantize int8: products left in float (ffn_out: the feed-forward output "
                           "projections, whose post-GELU inputs lose the most to int8)")
    onnx.add_argument("--head", action="store_true", help="add the task head's logits as an output")
    onnx.add_argument("--layer", type=int, default=-1, help="the hidden states exported (default -1, the last)")
    onnx.add_argument("--pooling", help="the sentence vector's pooling (default: the model's, else mean)")
    onnx.add_argument("--opset", type=int, default=None,
                      help="ONNX opset (default 23, whose Attention operator ONNX Runtime runs fused; 18 for older "
                           "runtimes)")
    return parser


@command("convert")
def convert_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``babelzoo convert``; returns the exit status."""

    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.from_hf and (args.to is None or args.source or args.family):
        parser.error("--from-hf needs --to OUT_DIR (and takes neither --from nor --family)")
    if args.to_hf and (args.source is None or args.to):
        parser.error("--to-hf needs --from MODEL (and does not take --to)")
    if args.to_onnx and (args.source is None or args.to or args.family):
        parser.error("--to-onnx needs --from MODEL (and takes neither --to nor --family)")
    onnx_options = [f"--{name}" for name in ("quantize", "calibration", "head", "pooling", "opset")
                    if getattr(args, name) not in (None, False)] + (["--layer"] if args.layer != -1 else []) \
        + (["--keep-fp32"] if args.keep_fp32 else [])
    if onnx_options and not args.to_onnx:
        parser.error(f"{', '.join(onnx_options)}: ONNX export options; they go with --to-onnx")
    if args.calibration and not args.quantize:
        parser.error("--calibration sets int8 activation scales: it goes with --quantize int8")
    if args.keep_fp32 and not args.quantize:
        parser.error("--keep-fp32 leaves products of an int8 export in float: it goes with --quantize int8")
    source, target = (args.from_hf, args.to) if args.from_hf else (args.source, args.to_hf or args.to_onnx)
    if not is_url(source) and same_or_inside(source, target):
        raise UsageError(f"{'--to' if args.from_hf else '--to-hf'} {target} and {'--from-hf' if args.from_hf else '--from'} "
                         f"{source} are the same folder or one holds the other: writing the conversion would replace "
                         "the checkpoint it reads; give another output folder")
    if args.from_hf:
        return _import(args.from_hf, args.to)
    if args.to_onnx:
        return _export_onnx(args)
    return _export(args.source, args.to_hf, args.family)


def _import(source: str, target: str) -> int:
    from ..zoo.convert import import_hf

    model = import_hf(source)
    model.save_pretrained(target)
    print(f"imported {source} as {model.config.architecture!r} ({model.num_parameters():,} parameters"
          f"{', with tokenizer' if getattr(model, 'tokenizer', None) is not None else ''}) -> {target}")
    return 0


def _export(source: str, target: str, family: str | None) -> int:
    from ..zoo.convert import export_hf
    from ..zoo.factory import load_model

    model = load_model(source)
    out = export_hf(model, target, family=family)
    hf_class = json.loads((out / "config.json").read_text(encoding="utf-8"))["architectures"][0]
    print(f"exported {source} as {hf_class} ({model.num_parameters():,} parameters"
          f"{', with tokenizer' if getattr(model, 'tokenizer', None) is not None else ''}) -> {target}")
    return 0


def _export_onnx(args: argparse.Namespace) -> int:
    from .._files import read_utf8
    from ..zoo.factory import load_model
    from .onnx import check_opset, export_onnx, read_export_info, require_onnx

    if args.opset is not None:
        check_opset(args.opset, "--opset ")
    require_onnx()  # before the model loads, which can take minutes
    calibration = None
    if args.calibration:
        calibration = [line for line in read_utf8(args.calibration).splitlines() if line.strip()]
        if not calibration:
            raise UsageError(f"--calibration {args.calibration}: the file holds no text")
    model = load_model(args.source)
    out = export_onnx(model, args.to_onnx, layer=args.layer, pooling=args.pooling, head=args.head,
                      quantize=args.quantize, calibration=calibration, alpha=args.alpha,
                      keep_fp32=tuple(dict.fromkeys(args.keep_fp32)), **({"opset": args.opset} if args.opset is not None else {}))
    info = read_export_info(out)
    precision = ("int8" + (f", SmoothQuant on {len(calibration)} texts" if calibration else "")
                 + (f", {' and '.join(args.keep_fp32)} in fp32" if args.keep_fp32 else "")) if args.quantize else "fp32"
    print(f"exported {args.source} ({model.num_parameters():,} parameters) as ONNX opset {info['opset']}, "
          f"{precision}, outputs {', '.join(info['outputs'])} -> {out}")
    print(check_line(info))
    return 0


def check_line(info: dict) -> str:
    """The export's check against PyTorch (``babelzoo_onnx.json``'s parity), saying what each
    number is: int8 rounding moves single values far more than it turns the sentence vectors."""
    precision = "int8" if info.get("parity_int8") else "fp32"
    parity, cosine = info[f"parity_{precision}"], info[f"sentence_cosine_{precision}"]
    return ("  checked against PyTorch (fp32) on a padded batch: largest |difference| of any output value "
            + ", ".join(f"{name} {value:.1e}" for name, value in parity.items())
            + f" ({precision} rounding); smallest cosine of a sentence vector to PyTorch's {cosine:.4f}")


if __name__ == "__main__":
    from ..errors import cli_logging
    from .convert_cli import convert_main  # this module under its package name, whose logger cli_logging shows

    with cli_logging():
        sys.exit(convert_main())
