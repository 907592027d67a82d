"""Serving multilingual-e5-small (and distilled students) on the CPU: sentences/s and Tatoeba
accuracy of every deployment path, babelzoo's and the peers', on the same sentences in one run.

babelzoo's paths, each as a user runs it:

* ``babelzoo fp32``: the PyTorch model, ``model.encode``'s path (:class:`BabelEncoder`: sorted by
  length, unpadded);
* ``babelzoo int8``: :func:`babelzoo.compression.quantize` (dynamic int8, SmoothQuant α=0.8 on
  the calibration text), the same path;
* ``babelzoo ONNX fp32`` / ``ONNX int8`` / ``ONNX int8 + SmoothQuant``: ``babelzoo convert
  --to-onnx`` (:func:`babelzoo.deploy.export_onnx`) run by :class:`babelzoo.deploy.OnnxEncoder`.

The peers': the same weights as transformers' ``BertModel`` (written by ``babelzoo convert
--to-hf``), exported by ``torch.onnx.export`` (dynamo, its default opset) and run by ONNX Runtime
with transformers' tokenizer and mean pooling, in fp32 and with ONNX Runtime's default dynamic
int8 (``quantize_dynamic(model, out, weight_type=QInt8)``), each with batches in input order and
sorted by length (the peers' strongest setting; sentence-transformers sorts too). (optimum's
exporter is not measured: installing it pins transformers < 5.)

Every session and PyTorch use the same threads. Speed: the median of interleaved repeats over
the same sentences (Tatoeba, several scripts); vectors are compared with babelzoo fp32's
(cosine). Accuracy: Tatoeba accuracy@1, mean of X→en and en→X, over ``--langs``. Calibration
text (SmoothQuant): SIB-200 train+dev and catalog sentences (never Tatoeba).

    python -m benchmarks run deploy --data-dir ../shared/data \\
        [--student runs/distill_e5_small/checkpoints/step-00002000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import babelzoo  # noqa: E402
from babelzoo.compression import quantize  # noqa: E402
from babelzoo.deploy import OnnxEncoder, export_onnx  # noqa: E402
from babelzoo.evaluation.encoders import BabelEncoder  # noqa: E402
from babelzoo.zoo.sentences import l2_normalised  # noqa: E402
from benchmarks._results import write_results  # noqa: E402
from benchmarks._speed.common import load_average, machine  # noqa: E402
from benchmarks.compression import SMOOTH_ALPHA, calibration_texts, encode_seconds, tatoeba  # noqa: E402

E5 = "multilingual_e5_small"
PREFIX = "query: "
# Tatoeba languages of eight scripts: Latin, Cyrillic, Han, Kana, Arabic, Devanagari, Hangul, Greek
LANGS = ["deu", "fra", "tur", "rus", "cmn", "jpn", "ara", "hin", "kor", "ell"]


class PeerOnnx:
    """transformers' model exported by ``torch.onnx`` and run by ONNX Runtime: transformers'
    tokenizer, padded batches (in input order or sorted by length), mean pooling."""

    def __init__(self, name: str, path: Path, tokenizer, threads: int, batch_size: int, sort: bool):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.name, self.tokenizer, self.batch_size, self.sort = name, tokenizer, batch_size, sort

    @property
    def protocol(self) -> dict[str, Any]:
        return {"pooling": "mean", "prefix": PREFIX, "runtime": "onnxruntime", "sorted": self.sort}

    def encode(self, sentences: Sequence[str], lang: Optional[str] = None) -> np.ndarray:
        texts = [PREFIX + s for s in sentences]
        order = sorted(range(len(texts)), key=lambda i: len(texts[i])) if self.sort else list(range(len(texts)))
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            index = order[start:start + self.batch_size]
            batch = self.tokenizer([texts[i] for i in index], padding=True, truncation=True, max_length=512,
                                   return_tensors="np")
            feed = {k: v.astype(np.int64) for k, v in batch.items() if k in self.inputs}
            hidden = self.session.run(None, feed)[0]
            mask = batch["attention_mask"][..., None].astype(np.float32)
            out[index] = (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1.0)
        return l2_normalised(out)


def peer_exports(model, work: Path) -> tuple[Path, Path, Any]:
    """transformers' model of ``model``'s weights, exported to ONNX (fp32) and quantized with ONNX
    Runtime's defaults (int8); and transformers' tokenizer of the same files."""
    import transformers
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from babelzoo.zoo.convert import export_hf

    tokenizer = model.tokenizer
    model.tokenizer = None  # the weights only: the HF exporter writes WordPiece files for a BERT
    try:
        export_hf(model, work / "hf", family="bert")
    finally:
        model.tokenizer = tokenizer
    tokenizer.save(work / "hf-tokenizer")
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(str(work / "hf-tokenizer"))
    hf = transformers.AutoModel.from_pretrained(str(work / "hf")).eval()
    example = hf_tokenizer([PREFIX + "a short one", PREFIX + "and a somewhat longer sentence"], padding=True,
                           return_tensors="pt")
    inputs = (example["input_ids"], example["attention_mask"])
    batch, length = torch.export.Dim("batch"), torch.export.Dim("length")
    fp32 = work / "peer-fp32.onnx"
    with torch.no_grad():
        program = torch.onnx.export(hf, inputs, dynamo=True, input_names=["input_ids", "attention_mask"],
                                    output_names=["last_hidden_state"],
                                    dynamic_shapes=({0: batch, 1: length}, {0: batch, 1: length}))
    program.save(str(fp32))
    int8 = work / "peer-int8.onnx"
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    return fp32, int8, hf_tokenizer


def arms(name: str, model, args, work: Path, calibration: list[str]) -> dict[str, Callable[[], Any]]:
    """Every deployment of ``model``, built when asked for (name -> encoder)."""
    threads = torch.get_num_threads()
    batch = args.batch_size

    def onnx(folder: str, **options):
        def build():
            export_onnx(model, work / folder, **options)
            return OnnxEncoder(work / folder, prefix=PREFIX, batch_size=batch, threads=threads)
        return build

    peers: dict[str, Any] = {}

    def peer(precision: str, sort: bool):
        def build():
            if not peers:
                peers.update(zip(("fp32", "int8", "tokenizer"), peer_exports(model, work / "peer")))
            order = "sorted by length" if sort else "input order"
            return PeerOnnx(f"{name} transformers ONNX {precision} ({order})", peers[precision], peers["tokenizer"],
                            threads, batch, sort)
        return build

    return {
        f"{name} babelzoo fp32": lambda: BabelEncoder("fp32", model, model.tokenizer, prefix=PREFIX, batch_size=batch,
                                                      max_length=512),
        f"{name} babelzoo int8": lambda: BabelEncoder("int8", quantize(model, "int8", calibration=calibration,
                                                                       alpha=SMOOTH_ALPHA),
                                                      model.tokenizer, prefix=PREFIX, batch_size=batch, max_length=512),
        f"{name} babelzoo ONNX fp32": onnx("onnx-fp32"),
        f"{name} babelzoo ONNX int8": onnx("onnx-int8", quantize="int8"),
        f"{name} babelzoo ONNX int8 + SmoothQuant": onnx("onnx-int8-sq", quantize="int8", calibration=calibration,
                                                         alpha=SMOOTH_ALPHA),
        f"{name} transformers ONNX fp32 (input order)": peer("fp32", False),
        f"{name} transformers ONNX fp32 (sorted)": peer("fp32", True),
        f"{name} transformers ONNX int8 (input order)": peer("int8", False),
        f"{name} transformers ONNX int8 (sorted)": peer("int8", True),
    }


def speed(encoders: dict[str, Any], sentences: list[str], repeats: int) -> dict[str, float]:
    """Sentences/s of each encoder on ``sentences``: the median of interleaved repeats."""
    return {name: len(sentences) / t for name, t in encode_seconds(encoders, sentences, repeats).items()}


def command_speed(model, sentences: list[str], args, work: Path) -> list[float]:
    """The sentences/s ``babelzoo encode`` reports (its own timing of the encoding, the model
    loaded from a ``save_pretrained`` folder), one per repeat."""
    import contextlib
    import io
    import re

    from babelzoo.encode import encode_main

    model.save_pretrained(work / "model")
    (work / "sentences.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    rates = []
    for _ in range(args.repeats):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            encode_main(["--model", str(work / "model"), "--input", str(work / "sentences.txt"), "--output",
                         str(work / "vectors.npy"), "--prefix", PREFIX, "--batch-size", str(args.batch_size),
                         "--max-length", "512", "--overwrite"])
        rates.append(float(re.search(r"([\d,.]+) sentences/s", err.getvalue()).group(1).replace(",", "")))
    return rates


def speed_sentences(args) -> list[str]:
    """``args.speed_sentences`` Tatoeba sentences, as many of each language of ``LANGS``."""
    per = args.speed_sentences // len(LANGS)
    out = []
    for lang in LANGS:
        path = args.data_dir / "tatoeba" / f"tatoeba.{lang}-eng.{lang}"
        out += path.read_text(encoding="utf-8").splitlines()[:per]
    return out


def run_model(name: str, model, args, work: Path, calibration: list[str], log) -> list[dict[str, Any]]:
    built = {}
    for arm, build in arms(name, model, args, work, calibration).items():
        if args.arms and not any(a in arm for a in args.arms):
            continue
        log(f"{arm}: building")
        built[arm] = build()
    sentences = speed_sentences(args)
    log(f"speed: {len(sentences)} sentences, {args.repeats} repeats, {torch.get_num_threads()} threads")
    rates = speed(built, sentences, args.repeats)
    reference = next(iter(built.values())).encode(sentences)
    rows = []
    if f"{name} babelzoo fp32" in built:
        command = command_speed(model, sentences, args, work)
        rows.append({"arm": f"{name} babelzoo encode (command, PyTorch fp32)",
                     "sentences_per_s": float(np.median(command)), "repeats": command})
        log(f"babelzoo encode: {np.median(command):.1f} sentences/s (its own report, median of {len(command)})")
    for arm, encoder in built.items():
        vectors = encoder.encode(sentences)
        cosines = (vectors * reference).sum(1)
        accuracy = tatoeba(encoder, args, LANGS) if not args.no_tatoeba else None
        rows.append({"arm": arm, "sentences_per_s": rates[arm], "cosine_to_fp32_mean": float(cosines.mean()),
                     "cosine_to_fp32_min": float(cosines.min()), "tatoeba": accuracy})
        log(f"{arm}: {rates[arm]:.1f} sentences/s, cosine to fp32 {cosines.mean():.4f} (min {cosines.min():.4f})"
            + (f", Tatoeba {100 * accuracy['mean']:.2f}" if accuracy else ""))
    return rows


def markdown(report: dict[str, Any]) -> str:
    header = ("| path | sentences/s | speed × fp32 (same runtime) | cosine to babelzoo fp32 (mean / min) | "
              "Tatoeba mean | Δ vs babelzoo fp32 |")
    lines = [header, "|---|---:|---:|---:|---:|---:|"]
    rows = {r["arm"]: r for r in report["rows"]}
    for r in report["rows"]:
        model = r["arm"].split(" babelzoo ")[0].split(" transformers ")[0]
        base = rows.get(f"{model} babelzoo fp32")
        runtime_fp32 = _fp32_of(r["arm"], rows)
        speedup = r["sentences_per_s"] / runtime_fp32["sentences_per_s"] if runtime_fp32 else float("nan")
        acc = r["tatoeba"]["mean"] * 100 if r.get("tatoeba") else float("nan")
        delta = acc - base["tatoeba"]["mean"] * 100 if base and base.get("tatoeba") and r.get("tatoeba") else float("nan")
        cosine = (f"{r['cosine_to_fp32_mean']:.4f} / {r['cosine_to_fp32_min']:.4f}" if "cosine_to_fp32_mean" in r
                  else "(the same model)")
        accuracy = f"{acc:.2f} | {delta:+.2f}" if r.get("tatoeba") else "– | –"
        lines.append(f"| {r['arm']} | {r['sentences_per_s']:.1f} | {speedup:.2f}× | {cosine} | {accuracy} |")
    lines += ["", *targets(rows)]
    machine_line = (f"Machine: {report['machine'].get('cpu')}, {report['machine']['threads']} threads; load average "
                    f"before/after {report['load_average_before']} / {report['load_average_after']}.")
    protocol = (f"Tatoeba: {', '.join(LANGS)}, {report['limit']} pairs each. Speed: {report['speed_sentences']} "
                f"sentences, median of {report['repeats']} interleaved repeats, batch {report['batch_size']}.")
    lines += ["", machine_line, protocol, f"Command: `{report['command']}`"]
    return "\n".join(lines) + "\n"


def targets(rows: dict[str, dict[str, Any]], model: str = "e5-small") -> list[str]:
    """#39's targets, side by side, for ``model``."""
    def row(arm):
        return rows.get(f"{model} {arm}")

    def tatoeba(r):
        return 100 * r["tatoeba"]["mean"] if r and r.get("tatoeba") else float("nan")

    out = ["| target | measured | met |", "|---|---|---|"]
    fp32 = row("babelzoo ONNX fp32")
    for int8 in (row("babelzoo ONNX int8"), row("babelzoo ONNX int8 + SmoothQuant")):
        if fp32 and int8:
            loss, ratio = tatoeba(fp32) - tatoeba(int8), int8["sentences_per_s"] / fp32["sentences_per_s"]
            out.append(f"| {int8['arm']}: ≤ 1 Tatoeba point lost | {loss:+.2f} points lost | {_met(loss <= 1)} |")
            out.append(f"| {int8['arm']}: ≥ 1.5× ONNX fp32 sentences/s | {ratio:.2f}× | {_met(ratio >= 1.5)} |")
    for precision in ("fp32", "int8"):
        ours = row(f"babelzoo ONNX {precision}")
        for order in ("input order", "sorted"):
            peer = row(f"transformers ONNX {precision} ({order})")
            if ours and peer:
                ratio = ours["sentences_per_s"] / peer["sentences_per_s"]
                out.append(f"| babelzoo ONNX {precision} ≥ transformers ONNX {precision} ({order}) | {ratio:.2f}× | "
                           f"{_met(ratio >= 1)} |")
    command, library = row("babelzoo encode (command, PyTorch fp32)"), row("babelzoo fp32")
    if command and library:
        ratio = command["sentences_per_s"] / library["sentences_per_s"]
        out.append(f"| babelzoo encode within 5 % of BabelEncoder | {ratio:.3f}× | {_met(ratio >= 0.95)} |")
    return out


def _met(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _fp32_of(arm: str, rows: dict[str, dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The fp32 row of ``arm``'s own runtime (its speed-up is over that)."""
    if " encode (command" in arm:
        return rows.get(arm.split(" babelzoo ")[0] + " babelzoo fp32")
    if " int8" not in arm:
        return rows.get(arm)
    candidate = arm.replace(" + SmoothQuant", "").replace(" int8", " fp32")
    return rows.get(candidate)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("BABELZOO_DATA_DIR", "../shared/data")))
    parser.add_argument("--out", type=Path, help="write JSON here (the table beside it as .md)")
    parser.add_argument("--student", type=Path, nargs="*", default=[], help="checkpoints of distilled students")
    parser.add_argument("--limit", type=int, default=1000, help="Tatoeba pairs per language")
    parser.add_argument("--speed-sentences", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--arms", nargs="*", help="run only the paths whose names hold one of these strings")
    parser.add_argument("--no-tatoeba", action="store_true", help="speed and vectors only")
    parser.add_argument("--work", type=Path, help="keep the exports here (default: a temporary folder)")
    args = parser.parse_args(argv)
    log = lambda message: print(message, flush=True)  # noqa: E731
    before = load_average()
    calibration = calibration_texts(args)
    models = {"e5-small": babelzoo.create_model(E5, pretrained=True)}
    for path in args.student:
        models[f"student {path.name}"] = babelzoo.from_pretrained(path)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, model in models.items():
            work = (args.work or Path(tmp)) / name.replace(" ", "_")
            rows += run_model(name, model.eval(), args, work, calibration, log)
    report = {"command": " ".join(["python benchmarks/deploy.py", *(argv if argv is not None else sys.argv[1:])]),
              "machine": machine(torch.device("cpu")), "load_average_before": before,
              "load_average_after": load_average(), "limit": args.limit, "speed_sentences": args.speed_sentences,
              "repeats": args.repeats, "batch_size": args.batch_size, "languages": LANGS,
              "calibration_texts": len(calibration), "smoothquant_alpha": SMOOTH_ALPHA, "rows": rows}
    table = markdown(report)
    print(table)
    if args.out:
        write_results(args.out, report, markdown, "deploy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
