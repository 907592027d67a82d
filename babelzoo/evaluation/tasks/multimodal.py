"""Image↔text and speech↔text retrieval: the protocol and its parts, shared by the retrieval
tasks (``image_text_retrieval`` on emoji drawn from OpenMoji, ``speech_text_retrieval`` on
their names spoken by espeak-ng, both registered by :mod:`babelzoo.offline`).

Protocol: per language, each tower encodes the held-out items on its own (the model's
L2-normalised projections, ``unimodal=True``); every query ranks all candidates of the other
modality in that language by cosine; R@K with random tie breaking
(:func:`~babelzoo.evaluation.metrics.paired_recall_at_k`), both directions. Chance is K/N.
A model without the tower (any text-only encoder) is skipped."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np
import torch

from ..metrics import paired_recall_at_k
from . import Result, TaskContext, TaskSkipped

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


def model_with(encoder, tower: str, what: str):
    model, tokenizer = getattr(encoder, "model", None), getattr(encoder, "tokenizer", None)
    config = getattr(model, "config", None)
    if config is None or getattr(config, tower, None) is None or getattr(config, "fusion", None) is None:
        raise TaskSkipped(f"needs a model with {what} tower (a fusion model such as "
                          f"{'vl_dual_tiny' if tower == 'vision' else 'speech_dual_tiny'})")
    if tokenizer is None:
        raise TaskSkipped("the model has no tokenizer")
    return model, tokenizer


def languages(context: TaskContext, known: Sequence[str]) -> list[str]:
    langs = [lang for lang in (context.languages or known) if lang in known]
    if not langs:
        raise TaskSkipped(f"none of {list(context.languages or [])} among {', '.join(known)}")
    return langs


def encode_fn(tokenizer):
    return lambda text, lang: tokenizer.encode(text, lang, add_special_tokens=False)


def limited(records, limit: Optional[int]):
    if not limit:
        return records
    keep = sorted({r.group for r in records})[:limit]
    return [r for r in records if r.group in set(keep)]
