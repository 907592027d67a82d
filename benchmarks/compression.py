"""multilingual-e5-small and its compressed variants side by side: size, CPU speed, retrieval
and zero-shot classification, each variant built by the public API (:mod:`babelzoo.compression`).

Variants: e5-small as shipped (fp32); its vocabulary trimmed to the benchmark languages
(``trim_vocabulary`` on their SIB-200 train+dev sentences and the embedded catalog messages, with
e5's ``"query: "`` prefix; never the evaluation text); 25 % and 50 % of the attention heads pruned
by importance (``head_importance``, Michel et al. 2019, from an InfoNCE translation-ranking loss
on catalog training pairs, then ``lowest_heads`` + ``prune_heads``); dynamic int8 (``quantize``:
every encoder linear, with the feed-forward output layers kept in fp32, and with SmoothQuant
calibrated on the trimming text); combinations; and a distilled student for each checkpoint
``--student`` names (``babelzoo pretrain --config distill_e5_small``), fp32 and with SmoothQuant
int8 (the α chosen for e5). ``--variants`` runs only the named variants; ``--heldout-langs`` adds
Tatoeba languages that no variant was distilled or trimmed on, reported beside the benchmark
languages and kept out of their mean.

Each variant, in one run: parameters (the weights it stores, quantized ones counted as
parameters), checkpoint MB (``model.safetensors`` written by ``save_pretrained``), CPU inference
sentences/s and real tokens/s (``BabelEncoder`` over Tatoeba sentences of the benchmark
languages, batches sorted by length, the median of interleaved repeats; the speed-up is the
ratio of sentences/s, the same work for every variant, since a trimmed vocabulary cuts the same
sentences into more pieces), Tatoeba accuracy@1 (mean of en→X and X→en over the
benchmark languages, and the share of Tatoeba sentences whose pieces a trimmed vocabulary kept),
and SIB-200 zero-shot accuracy of a logistic-regression probe on frozen vectors (trained and
selected on English only). A PNG plots Tatoeba accuracy against speed.

    python -m benchmarks run compression --data-dir ../shared/data
    python -m benchmarks run compression_students --data-dir ../shared/data \
        --student runs/distill_e5_small/checkpoints/step-00002000 runs/d6_ffn1024

(``runs/d6_ffn1024``: ``prune_ffn`` of the 6-layer student to 1,024 neurons a layer, saved with
``save_pretrained``; ``compression_students/epyc-avx2`` also holds a 4-layer student,
``distill_e5_small`` with ``--set "init.layers=[0, 1, 10, 11]"``.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

import babelzoo  # noqa: E402
from babelzoo._files import atomic_write  # noqa: E402
from babelzoo.compression import head_importance, lowest_heads, prune_heads, quantize, trim_vocabulary  # noqa: E402
from babelzoo.datasets.labelled import read_sib200  # noqa: E402
from babelzoo.datasets.text import tatoeba_pairs  # noqa: E402
from babelzoo.evaluation.encoders import BabelEncoder  # noqa: E402
from babelzoo.evaluation.tasks import TaskContext, load_tasks  # noqa: E402
from babelzoo.offline.embedded import aligned, embedded_corpus, split_rows  # noqa: E402
from babelzoo.zoo.checkpoint_io import WEIGHTS_NAME  # noqa: E402
from benchmarks._results import write_results  # noqa: E402
from benchmarks._speed.common import machine  # noqa: E402

E5 = "multilingual_e5_small"
PREFIX = "query: "
# SmoothQuant's migration strength, chosen on SIB-200 dev sentences (en, de, fr, es, ru) by the
# cosine of int8 vectors to fp32 ones: α 0.3 / 0.5 / 0.7 / 0.8 gave mean 0.890 / 0.973 / 0.9975 / 0.9983
SMOOTH_ALPHA = 0.8
STUDENTS = "distilled student"  # the --variants name of every --student checkpoint
# benchmark language: (catalog code, Tatoeba code, SIB-200 code)
LANGS = {"de": ("deu", "deu_Latn"), "fr": ("fra", "fra_Latn"), "es": ("spa", "spa_Latn"),
         "ru": ("rus", "rus_Cyrl")}


def trimming_texts(data_dir: Path) -> dict[str, list[str]]:
    """What the trimmed vocabulary must cover: SIB-200 train+dev and the catalog training
    messages of English and every benchmark language (never Tatoeba, never SIB-200 test)."""
    rows = split_rows(embedded_corpus(), heldout=False)
    texts = {}
    for lang, sib in [("en", "eng_Latn"), *((k, v[1]) for k, v in LANGS.items())]:
        sib_text = [r.text for split in ("train", "dev") for r in read_sib200(data_dir, sib, split)]
        texts[lang] = [PREFIX + t for t in sib_text + [row[lang] for row in rows if lang in row]]
    return texts


def calibration_texts(args, per_language: int = 200) -> list[str]:
    """SmoothQuant's calibration text: the first SIB-200 train+dev and catalog sentences of the
    trimming text, ``per_language`` of each language (never Tatoeba, never SIB-200 test)."""
    return [t for texts in trimming_texts(args.data_dir).values() for t in texts[:per_language]]


def importance_batches(model, n: int = 4, size: int = 32) -> list[dict[str, torch.Tensor]]:
    """Batches of catalog training pairs English↔X (tokenised by e5's tokenizer)."""
    rows = split_rows(embedded_corpus(), heldout=False)
    pairs = [p for lang in LANGS for p in aligned(rows, "en", lang)]
    order = np.random.default_rng(0).permutation(len(pairs))[: n * size]
    out = []
    for start in range(0, len(order), size):
        chunk = [pairs[i] for i in order[start:start + size]]
        src = model.tokenizer.batch_encode([PREFIX + a for a, _ in chunk], max_length=64)
        tgt = model.tokenizer.batch_encode([PREFIX + b for _, b in chunk], max_length=64)
        out.append({"src": src, "tgt": tgt})
    return out


def ranking_loss(model, batch) -> torch.Tensor:
    """Symmetric InfoNCE over mean-pooled, normalised vectors (temperature 0.05)."""
    def vectors(enc):
        out = model(enc["input_ids"], attention_mask=enc["attention_mask"])
        v = model.sentence_embedding(out.last_hidden, enc["attention_mask"], default="mean")
        return torch.nn.functional.normalize(v, dim=-1)
    scores = vectors(batch["src"]) @ vectors(batch["tgt"]).T / 0.05
    labels = torch.arange(scores.shape[0])
    return (torch.nn.functional.cross_entropy(scores, labels) + torch.nn.functional.cross_entropy(scores.T, labels)) / 2


def stored_parameters(model) -> int:
    quantized = sum(b.numel() * (2 if b.dtype == torch.uint8 else 1) for n, b in model.named_buffers()
                    if n.endswith((".weight_int8", ".weight_packed")))
    return model.num_parameters() + quantized


def checkpoint_mb(model) -> float:
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(Path(folder) / "m")
        return (Path(folder) / "m" / WEIGHTS_NAME).stat().st_size / 2 ** 20


def tatoeba(encoder, args, codes: Sequence[str]) -> dict[str, Any]:
    """Accuracy@1 per Tatoeba language ``codes`` (mean of X→en and en→X) and their mean."""
    context = TaskContext(data_dir=args.data_dir, languages=list(codes), limit=args.limit, log=lambda _: None)
    table: dict[str, list[float]] = {}
    for row in load_tasks().get("tatoeba")(encoder, context):
        src, tgt = row.protocol["direction"].split("->")
        table.setdefault(tgt if src == "eng" else src, []).append(row.value)
    both = {lang: float(np.mean(v)) for lang, v in table.items()}
    return {"by_language": both, "mean": float(np.mean(list(both.values())))}


def sib200(encoder, args) -> dict[str, Any]:
    context = TaskContext(data_dir=args.data_dir, languages=[v[1] for v in LANGS.values()], log=lambda _: None)
    rows = load_tasks().get("sib200_probe")(encoder, context)
    test = {r.protocol["lang"]: r.value for r in rows}
    zero = [v for lang, v in test.items() if lang != "eng_Latn"]
    return {"test": test, "english": test.get("eng_Latn"), "mean_zero_shot": float(np.mean(zero))}


def encode_seconds(encoders: dict[str, Any], sentences: list[str], repeats: int) -> dict[str, float]:
    """Seconds each encoder takes to encode ``sentences``: one warm-up, then the median of
    ``repeats`` interleaved runs (the order reversed every other repeat, so drift in the machine's
    speed falls on every encoder alike)."""
    times: dict[str, list[float]] = {name: [] for name in encoders}
    for encoder in encoders.values():  # warm-up
        encoder.encode(sentences[:64])
    for r in range(repeats):
        for name in (list(encoders) if r % 2 == 0 else list(encoders)[::-1]):
            start = time.perf_counter()
            with torch.inference_mode():
                encoders[name].encode(sentences)
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t)) for name, t in times.items()}


def speed(encoders: dict[str, BabelEncoder], sentences: list[str], repeats: int) -> dict[str, dict[str, float]]:
    """Sentences/s and real tokens/s (each encoder's own pieces: a trimmed vocabulary cuts a word
    it lost into more of them) of each encoder on ``sentences``, interleaved repeats, median."""
    seconds = encode_seconds(encoders, sentences, repeats)
    out = {}
    for name, enc in encoders.items():
        real = sum(len(r) for r in enc.tokenizer.batch_encode([PREFIX + s for s in sentences], padding=False,
                                                              return_tensors=None, max_length=128)["input_ids"])
        out[name] = {"tokens_per_s": real / seconds[name], "sentences_per_s": len(sentences) / seconds[name]}
    return out


def kept_share(model, full_tokenizer, args) -> Optional[float]:
    """Share of the Tatoeba sentences (both sides) whose e5 pieces the model's vocabulary holds."""
    if model.tokenizer.vocab_size == full_tokenizer.vocab_size:
        return None
    kept = set(model.tokenizer.vocab)
    sentences = [s for code, _ in LANGS.values() for pair in tatoeba_pairs(args.data_dir, code).pairs[:args.limit]
                 for s in pair]
    rows = full_tokenizer.batch_encode([PREFIX + s for s in sentences], padding=False, return_tensors=None,
                                       add_special_tokens=False)["input_ids"]
    return float(np.mean([all(full_tokenizer.id_to_token(i) in kept for i in r) for r in rows]))


def variants(e5, args) -> dict[str, Callable[[], Any]]:
    linears = [n for n, m in e5.named_modules() if isinstance(m, torch.nn.Linear) and n.startswith("encoder.")]
    keep_down = [n for n in linears if not n.endswith("ffn.down")]
    cache: dict[str, Any] = {}

    def trimmed():
        if "trimmed" not in cache:
            cache["trimmed"] = trim_vocabulary(e5, trimming_texts(args.data_dir))
        return cache["trimmed"]

    def pruned(fraction: float, base=None):
        base = base if base is not None else e5
        if "scores" not in cache:
            cache["scores"] = head_importance(e5, importance_batches(e5), ranking_loss)
        return prune_heads(base, lowest_heads(cache["scores"], fraction))

    out = {
        "e5-small fp32": lambda: e5,
        "trimmed": trimmed,
        "pruned 25% heads": lambda: pruned(0.25),
        "pruned 50% heads": lambda: pruned(0.5),
        "int8": lambda: quantize(e5, "int8"),
        "int8 (ffn.down fp32)": lambda: quantize(e5, "int8", keep_down),
        f"int8 SmoothQuant α={SMOOTH_ALPHA}": lambda: quantize(e5, "int8", calibration=calibration_texts(args),
                                                               alpha=SMOOTH_ALPHA),
        "trimmed + int8": lambda: quantize(trimmed(), "int8"),
        "trimmed + pruned 25% + int8": lambda: quantize(pruned(0.25, trimmed()), "int8"),
    }
    def student(path: Path):
        if path not in cache:
            cache[path] = babelzoo.from_pretrained(path)
        return cache[path]

    for path in args.student:
        name = student_name(path)
        out[name] = lambda path=path: student(path)
        out[f"{name} + int8 SmoothQuant α={SMOOTH_ALPHA}"] = lambda path=path: quantize(
            student(path), "int8", calibration=calibration_texts(args), alpha=SMOOTH_ALPHA)
    return out


def student_name(path: Path) -> str:
    """``distilled student (4 layers, FFN 1024)``, from the checkpoint's config."""
    text = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))["text"]
    return f"{STUDENTS} ({text['num_layers']} layers, FFN {text['intermediate_size']})"


def selected(name: str, wanted: Optional[Sequence[str]]) -> bool:
    """Is variant ``name`` among ``wanted`` (None: all)? ``distilled student`` names every student
    and its quantized variants."""
    return not wanted or any(name == w or (w == STUDENTS and name.startswith(w + " (")) for w in wanted)


def speed_up(row: dict[str, Any], base: dict[str, Any]) -> float:
    """Sentences/s over the base's; a run from before sentences/s was measured: real tokens/s."""
    key = "sentences_per_s" if "sentences_per_s" in base else "tokens_per_s"
    return row[key] / base[key]


def markdown(report: dict[str, Any]) -> str:
    base = report["variants"][0]
    heldout = base.get("tatoeba_heldout")
    head = ["variant", "parameters", "checkpoint MB", "sentences/s", "real tok/s", "speed ×", "Tatoeba mean", "Tatoeba Δ",
            "kept sentences", "SIB-200 en", "SIB-200 zero-shot"]
    if heldout:
        head[8:8] = [f"Tatoeba % of {base['variant']}", f"Tatoeba held-out ({', '.join(heldout['by_language'])})"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for row in report["variants"]:
        kept = "–" if row["kept_share"] is None else f"{100 * row['kept_share']:.1f}%"
        cells = [row["variant"], f"{row['parameters'] / 1e6:.1f} M", f"{row['checkpoint_mb']:.0f}",
                 f"{row['sentences_per_s']:.0f}" if "sentences_per_s" in row else "–", f"{row['tokens_per_s']:.0f}",
                 f"{speed_up(row, base):.2f}×",
                 f"{100 * row['tatoeba']['mean']:.1f}",
                 f"{100 * (row['tatoeba']['mean'] - base['tatoeba']['mean']):+.1f}", kept,
                 f"{100 * row['sib200']['english']:.1f}", f"{100 * row['sib200']['mean_zero_shot']:.1f}"]
        if heldout:
            cells[8:8] = [f"{100 * row['tatoeba']['mean'] / base['tatoeba']['mean']:.1f}%",
                          f"{100 * row['tatoeba_heldout']['mean']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    if heldout:  # accuracy@1 per language: the benchmark languages, then the held-out ones
        codes = [*base["tatoeba"]["by_language"], *heldout["by_language"]]
        lines += ["", "| Tatoeba accuracy@1 | " + " | ".join(codes) + " |", "|---|" + "---:|" * len(codes)]
        for row in report["variants"]:
            scores = {**row["tatoeba"]["by_language"], **row["tatoeba_heldout"]["by_language"]}
            lines.append(f"| {row['variant']} | " + " | ".join(f"{100 * scores[c]:.1f}" for c in codes) + " |")
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rate = "sentences_per_s" if "sentences_per_s" in report["variants"][0] else "tokens_per_s"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for row in report["variants"]:
        ax.scatter(row[rate], 100 * row["tatoeba"]["mean"])
        ax.annotate(row["variant"], (row[rate], 100 * row["tatoeba"]["mean"]), fontsize=7,
                    xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("CPU inference, " + ("sentences/s" if rate == "sentences_per_s" else "real tokens/s"))
    ax.set_ylabel("Tatoeba accuracy@1 (mean, %)")
    ax.set_title("multilingual-e5-small compressed: accuracy against speed")
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("BABELZOO_DATA_DIR",
                                                                               REPO.parent / "shared" / "data")))
    parser.add_argument("--out", type=Path, help="write JSON here (the table beside it as .md, the plot as .png)")
    parser.add_argument("--limit", type=int, default=1000, help="Tatoeba pairs per language")
    parser.add_argument("--speed-sentences", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--student", type=Path, nargs="*", default=[], help="checkpoints of distilled students")
    parser.add_argument("--variants", nargs="*", default=None, help="run only these (default: all)")
    parser.add_argument("--heldout-langs", nargs="*", default=[], metavar="CODE",
                        help="Tatoeba codes reported apart from the benchmark languages (e.g. ara cmn jpn tur)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    e5 = babelzoo.create_model(E5, pretrained=True).eval()
    rng = np.random.default_rng(0)
    pool_sentences = [s for code, _ in LANGS.values() for pair in tatoeba_pairs(args.data_dir, code).pairs for s in pair]
    sentences = [pool_sentences[i] for i in rng.permutation(len(pool_sentences))[:args.speed_sentences]]
    models, rows = {}, []
    for name, build in variants(e5, args).items():
        if not selected(name, args.variants):
            continue
        t = time.perf_counter()
        model = build().eval()
        models[name] = model
        encoder = BabelEncoder(name, model, model.tokenizer, prefix=PREFIX, max_length=128)
        row = {"variant": name, "parameters": stored_parameters(model), "checkpoint_mb": checkpoint_mb(model),
               "kept_share": kept_share(model, e5.tokenizer, args),
               "tatoeba": tatoeba(encoder, args, [v[0] for v in LANGS.values()]),
               "tatoeba_heldout": tatoeba(encoder, args, args.heldout_langs) if args.heldout_langs else None,
               "sib200": sib200(encoder, args), "build_and_eval_s": round(time.perf_counter() - t, 1)}
        rows.append(row)
        heldout = f" (held-out {row['tatoeba_heldout']['mean']:.3f})" if row["tatoeba_heldout"] else ""
        print(f"{name}: {row['parameters'] / 1e6:.1f} M, {row['checkpoint_mb']:.0f} MB, Tatoeba "
              f"{row['tatoeba']['mean']:.3f}{heldout}, SIB-200 zero-shot {row['sib200']['mean_zero_shot']:.3f}",
              flush=True)
    encoders = {name: BabelEncoder(name, m, m.tokenizer, prefix=PREFIX, max_length=128) for name, m in models.items()}
    rates = speed(encoders, sentences, args.repeats)
    for row in rows:
        row.update(rates[row["variant"]])
    report = {"model": E5, "languages": {k: list(v) for k, v in LANGS.items()},
              "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "threads": torch.get_num_threads(), "machine": machine(torch.device("cpu")), "variants": rows,
              "protocol": {"speed": f"BabelEncoder, {len(sentences)} Tatoeba sentences, batch 64 sorted by length, "
                                    f"median of {args.repeats} interleaved repeats",
                           "tatoeba": f"accuracy@1, mean of en→X and X→en, {args.limit} pairs per language",
                           "tatoeba_heldout": f"the same on {args.heldout_langs}, outside the mean",
                           "sib200": "logistic-regression probe on frozen vectors, English train/dev only",
                           "trimming_text": "SIB-200 train+dev and catalog training messages (en + languages)"},
              "wall_s": round(time.perf_counter() - start, 1)}
    table = markdown(report)
    print()
    print(table)
    if args.out:
        write_results(args.out, report, markdown, "compression")
        plot(report, args.out.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
