"""``babelzoo encode``: sentence vectors from a model, one file in, one file out::

    babelzoo encode --model multilingual_e5_small --input sentences.txt --output vectors.npy --prefix "query: "

``--model`` is a registered model (its published weights when it has them, else fresh weights
drawn with seed 0, read with the tokenizer its config implies, built for the purpose), a folder ``save_pretrained``
wrote (or a folder or Hub id ``babelzoo.from_pretrained`` reads), or a folder holding an ONNX
export (``model.onnx``, ``babelzoo_onnx.json`` and the tokenizer's files), which ONNX Runtime
runs (``--backend onnx``, the default for such a folder). Vectors come from the path
``model.encode`` and the leaderboard share (:func:`babelzoo.zoo.sentences.encode_sentences`):
sorted by length, batched, one layer pooled, L2-normalised unless ``--no-normalize``.

The input is UTF-8 text, one sentence a line, or JSON Lines (a ``.jsonl`` name, or ``--field``),
one object a line whose ``--field`` (default ``text``) holds the sentence. Every line must hold
one: an empty line, bytes that are not UTF-8, a line that is not JSON, lacks the field or holds
no string there is an error naming file:line, as dropping the line would shift every vector
after it. The output is ``.npy``, a float32 array [N, D] in input order, or ``.jsonl``, one
``{"index": i, "vector": [...]}`` a line, with ``"id"`` copied from the input object when it
has one. It is written atomically; a file that is there already is replaced only when
``babelzoo encode`` wrote it (recorded beside it in ``.NAME.babelzoo.json``) or with
``--overwrite``. A progress bar (with sentences/s) and a last summary line go to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ._files import owned_file, read_utf8, write_owned_file
from .errors import ArgumentParser, BabelzooError, UsageError, command

logger = logging.getLogger(__name__)

WHAT = "babelzoo encode output"  # what the record beside an output file says it is
ONNX_INFO = "babelzoo_onnx.json"  # in a folder holding an ONNX export (babelzoo.deploy.onnx)


class SentenceFileError(BabelzooError, ValueError):
    """A line of the input file that holds no sentence; the message names file:line."""


@dataclass
class Sentences:
    """The sentences of an input file in order, and the ``"id"`` of each JSON Lines object
    that has one (by index)."""

    texts: list[str]
    ids: dict[int, Any] = field(default_factory=dict)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="babelzoo encode", description="Sentence vectors from a model: a file of "
                            "sentences in, one vector a sentence out, in input order.")
    parser.add_argument("--model", required=True, help="a registered model (its pretrained weights when it has "
                        "them), a folder save_pretrained wrote, or a folder holding an ONNX export")
    parser.add_argument("--input", required=True, type=Path, help="UTF-8 text, one sentence a line, or JSON Lines "
                        "(a .jsonl name, or --field)")
    parser.add_argument("--output", required=True, type=Path, help="FILE.npy (float32 [N, D]) or FILE.jsonl "
                        '(one {"index", "vector"} a line)')
    parser.add_argument("--field", help="the JSON Lines field holding the sentence (default text); reads the input "
                        "as JSON Lines")
    parser.add_argument("--prefix", default="", help='text put before every sentence (e5: "query: ")')
    parser.add_argument("--layer", type=int, help="the layer to pool (default -1, the last; 0: the embeddings)")
    parser.add_argument("--pooling", help="mean, cls, max or final (default: mean, or the one the model fixes)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences a batch (default 32)")
    parser.add_argument("--max-length", type=int, help="tokens a sentence at most (default 512, at most the "
                        "model's positions)")
    parser.add_argument("--no-normalize", action="store_true", help="the pooled vectors as they are, not L2-normalised")
    parser.add_argument("--backend", choices=("torch", "onnx"), help="default: onnx for a folder holding an ONNX "
                        "export, torch otherwise")
    parser.add_argument("--overwrite", action="store_true", help="replace an output file babelzoo encode did not write")
    return parser


@command("encode")
def encode_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``babelzoo encode``; returns the exit status."""
    args = build_parser().parse_args(argv)
    check_options(args)
    sentences = read_sentences(args.input, args.field)
    encode = load_encoder(args)
    start = time.perf_counter()
    vectors = encode(sentences.texts)
    seconds = time.perf_counter() - start
    write_vectors(args.output, vectors, sentences.ids)
    logger.info(f"babelzoo encode: {len(vectors):,} sentences, {vectors.shape[1]} dims, "
                f"{len(vectors) / max(seconds, 1e-9):,.1f} sentences/s; wrote {args.output}")
    return 0


def check_options(args: argparse.Namespace) -> None:
    """Refuse options that cannot work before anything is read or loaded."""
    for name in ("batch_size", "max_length"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be a positive integer, got {value}")
    if args.pooling is not None:
        from .zoo.layers import POOLINGS

        if args.pooling not in POOLINGS:
            raise UsageError(f"--pooling {args.pooling}: choose one of {', '.join(POOLINGS)}")
    check_output(args.output, args.input, args.overwrite)


def check_output(output: Path, source: Path, overwrite: bool) -> None:
    """The output's suffix says its format; a file there already must be one this command wrote
    (or ``overwrite``), and never the input."""
    if output.suffix.lower() not in (".npy", ".jsonl"):
        raise UsageError(f"--output {output}: name a .npy file (a float32 array) or a .jsonl file (one vector a "
                         f"line), not {output.suffix or 'a name without a suffix'}")
    if output.is_dir():
        raise UsageError(f"--output {output}: is a folder; name a .npy or .jsonl file")
    if output.exists() and source.exists() and output.resolve() == source.resolve():
        raise UsageError(f"--output {output}: is the --input file; name another file")
    if output.exists() and not overwrite and not owned_file(output, WHAT):
        raise UsageError(f"--output {output}: exists and babelzoo encode did not write it; nothing was changed: "
                         "pass --overwrite to replace it, or name another file")


# --- input ----------------------------------------------------------------------------------------
def read_sentences(path: Path, field_name: Optional[str]) -> Sentences:
    """The sentences of a text file, or of a JSON Lines file (``.jsonl``, or ``field_name``
    given) from each object's ``field_name`` (default ``text``)."""
    lines = input_lines(path)
    if field_name is None and path.suffix.lower() != ".jsonl":
        return Sentences([text_sentence(path, number, line) for number, line in lines])
    sentences = Sentences([])
    for number, line in lines:
        value = json_object(path, number, line, field_name or "text")
        if "id" in value:
            sentences.ids[len(sentences.texts)] = value["id"]
        sentences.texts.append(value[field_name or "text"])
    return sentences


def input_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, line) of a UTF-8 file, without line ends (``\\n`` or ``\\r\\n``) or a BOM."""
    text = read_utf8(path, SentenceFileError).removeprefix("\ufeff")
    if not text:
        raise SentenceFileError(f"{path}: the file is empty: no sentences to encode")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    return [(number, line.removesuffix("\r")) for number, line in enumerate(lines, 1)]


def text_sentence(path: Path, number: int, line: str) -> str:
    if not line.strip():
        raise SentenceFileError(f"{path}:{number}: empty line; each line is one sentence, and dropping it would "
                                "shift the vectors after it: remove the line or write a sentence there")
    return line


def json_object(path: Path, number: int, line: str, name: str) -> dict:
    """The object on a JSON Lines line, whose field ``name`` holds a sentence."""
    text_sentence(path, number, line)
    try:
        value = json.loads(line)
    except json.JSONDecodeError as err:
        raise SentenceFileError(f"{path}:{number}: not JSON ({err.msg} at column {err.colno})") from None
    if not isinstance(value, dict):
        raise SentenceFileError(f"{path}:{number}: expected a JSON object with a string field {name!r}, found "
                                f"{json_kind(value)}")
    if name not in value:
        fields = ", ".join(map(repr, value)) or "none"
        raise SentenceFileError(f"{path}:{number}: no field {name!r} (its fields: {fields}); name the field that "
                                "holds the sentence with --field")
    if not isinstance(value[name], str):
        raise SentenceFileError(f"{path}:{number}: field {name!r} holds {json_kind(value[name])}, not a string")
    if not value[name].strip():
        raise SentenceFileError(f"{path}:{number}: field {name!r} is empty; every line needs a sentence")
    return value


def json_kind(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    kinds = {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number"}
    return kinds[type(value)]


# --- the model ------------------------------------------------------------------------------------
def load_encoder(args: argparse.Namespace) -> Callable[[list[str]], np.ndarray]:
    """sentences -> [N, D] vectors, by the backend ``args`` ask for (see the module)."""
    folder = Path(args.model)
    exported = folder.is_dir() and (folder / ONNX_INFO).is_file()
    if (args.backend or ("onnx" if exported else "torch")) == "onnx":
        if not exported:
            raise UsageError(f"--backend onnx: {args.model} is not a folder holding an ONNX export (model.onnx and "
                             f"{ONNX_INFO}); make one with babelzoo convert --to-onnx")
        return onnx_encoder(folder, args)
    model = load_model(args.model)
    options = dict(batch_size=args.batch_size, prompt=args.prefix, pooling=args.pooling,
                   normalize_embeddings=not args.no_normalize, layer=-1 if args.layer is None else args.layer,
                   max_length=args.max_length, show_progress_bar=True)
    return lambda texts: model.encode(texts, **options)


def load_model(source: str):
    """:func:`babelzoo.zoo.factory.load_model`; a registered entry without published weights
    encodes with fresh weights from seed 0, said in a warning."""
    import torch

    from .zoo.factory import list_models, model_entry
    from .zoo.factory import load_model as load

    if source in list_models() and not Path(source).exists() and model_entry(source).pretrained is None:
        logger.warning("babelzoo encode: %s has no pretrained weights; encoding with fresh weights (seed 0) and "
                       "the tokenizer its config implies (trained on the embedded catalogs once a machine, then "
                       "cached)", source)
        torch.manual_seed(0)
        model = load(source)
        if getattr(model, "default_tokenizer", None) is not None:
            model.use_default_tokenizer()
        return model
    return load(source)


def onnx_encoder(folder: Path, args: argparse.Namespace) -> Callable[[list[str]], np.ndarray]:
    """An ONNX export run by :class:`babelzoo.deploy.onnx.OnnxEncoder`, with a progress bar."""
    from .deploy.onnx import OnnxEncoder

    encoder = OnnxEncoder(folder, prefix=args.prefix, batch_size=args.batch_size, max_length=args.max_length,
                          pooling=args.pooling, layer=args.layer, normalize=not args.no_normalize)
    return lambda texts: encoder.encode(texts, progress=True)


# --- output ---------------------------------------------------------------------------------------
def write_vectors(path: Path, vectors: np.ndarray, ids: dict[int, Any]) -> Path:
    """``vectors`` into ``path`` as ``.npy`` or ``.jsonl`` (see the module), atomically, with the
    record that this command wrote it."""
    vectors = np.asarray(vectors, dtype=np.float32)

    def write(tmp: str) -> None:
        if path.suffix.lower() == ".npy":
            with open(tmp, "wb") as handle:
                np.save(handle, vectors)
            return
        with open(tmp, "w", encoding="utf-8") as handle:
            for i, row in enumerate(vectors):
                record = {"index": i, **({"id": ids[i]} if i in ids else {}), "vector": row.tolist()}
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")

    return write_owned_file(path, write, WHAT)


if __name__ == "__main__":
    from .errors import cli_logging
    from .encode import encode_main  # this module under its package name, whose logger cli_logging shows

    with cli_logging():
        sys.exit(encode_main())
