"""Zero-shot cross-lingual transfer on SIB-200 (Adelani et al. 2024), whose sentences are
Flores-200's: rows with the same ``index_id`` translate each other in every language.

``flores_retrieval``: English↔X sentence retrieval over the parallel rows of train+dev+test
(cosine nearest neighbour, accuracy@1, as for Tatoeba).

``sib200_probe``: a logistic-regression topic probe on frozen sentence vectors, trained on
English only and scored on every language's test set (the XTREME zero-shot protocol): fit on
``eng_Latn/train``, choose C on ``eng_Latn/dev``, report test accuracy. No target-language label
is read until the probe is fixed: target files are opened only after :func:`fit_probe` returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from ...datasets.labelled import SIB200_SPLITS, LabelledText, read_sib200, sib200_languages
from ...datasets.text import CorpusError
from . import TASKS, Result, TaskContext, TaskSkipped, per_language
from .retrieval import bitext_results

SOURCE = "eng_Latn"
C_GRID = (0.01, 0.1, 1.0, 10.0, 100.0)
MAX_ITER = 2000


def sib200_folder(context: TaskContext) -> Path:
    """``context.data_dir/sib200``, or :class:`TaskSkipped` saying what is missing."""
    if context.data_dir is None or not (context.data_dir / "sib200").is_dir():
        raise TaskSkipped("SIB-200 needs --data-dir with a sib200/ folder")
    folder = context.data_dir / "sib200"
    if SOURCE not in sib200_languages(folder):
        raise TaskSkipped(f"{folder} has no {SOURCE}/test.tsv (English is the source language)")
    return folder


def target_languages(folder: Path, languages: Optional[Sequence[str]]) -> list[str]:
    """The languages other than English present in ``folder`` (only ``languages`` when given,
    in their order); :class:`TaskSkipped` when that leaves none."""
    present = [lang for lang in sib200_languages(folder) if lang != SOURCE]
    chosen = present if languages is None else [lang for lang in languages if lang in present]
    if not chosen:
        asked = f"none of {list(languages)} is" if languages is not None else "no language besides English is"
        raise TaskSkipped(f"{asked} in {folder} (present: {', '.join(present) or 'none'})")
    return chosen


# --- retrieval ------------------------------------------------------------------------------------

def _rows_by_id(folder: Path, lang: str) -> dict[str, LabelledText]:
    """Every row of ``lang`` over train, dev and test, keyed by index_id, in file order."""
    rows: dict[str, LabelledText] = {}
    for split in SIB200_SPLITS:
        for row in read_sib200(folder, lang, split):
            assert row.id is not None  # read_sib200 reads the index_id column
            if row.id in rows:
                raise CorpusError(f"{row.where}: index_id {row.id!r} repeats (first at {rows[row.id].where})")
            rows[row.id] = row
    return rows


def parallel_pairs(source: Mapping[str, LabelledText], target: Mapping[str, LabelledText],
                   src: str, tgt: str) -> list[tuple[str, str]]:
    """(source text, target text) for each index_id, in the source's order; the two languages
    must hold the same ids."""
    if source.keys() != target.keys():
        only_src, only_tgt = sorted(source.keys() - target.keys()), sorted(target.keys() - source.keys())
        raise CorpusError(f"SIB-200 {src} and {tgt} are not parallel: index_id(s) only in {src}: "
                          f"{only_src[:5]}{' ...' if len(only_src) > 5 else ''}; only in {tgt}: "
                          f"{only_tgt[:5]}{' ...' if len(only_tgt) > 5 else ''}")
    return [(row.text, target[index].text) for index, row in source.items()]


@TASKS.register
def flores_retrieval(encoder, context: TaskContext) -> list[Result]:
    """Flores-200 sentences of SIB-200: English↔X accuracy@1 (cosine nearest neighbour) over the
    rows of train+dev+test aligned by index_id (1,004 per language), for every language present."""
    folder = sib200_folder(context)
    langs = target_languages(folder, context.languages)
    english = _rows_by_id(folder, SOURCE)

    def run(lang: str) -> list[Result]:
        pairs = parallel_pairs(english, _rows_by_id(folder, lang), SOURCE, lang)
        return bitext_results("flores_retrieval", encoder, pairs, SOURCE, lang,
                              {"split": "train+dev+test", "source": "SIB-200 (Flores-200 sentences)"}, context.limit)

    return per_language(langs, run, lambda lang, at, rows: context.log(
        f"  flores_retrieval {lang} ({at}): {rows[0].value:.3f} / {rows[1].value:.3f}"))


# --- probe ----------------------------------------------------------------------------------------

@dataclass
class Probe:
    """A classifier fitted on source-language train vectors, with C chosen on source dev."""

    classifier: Any  # sklearn.linear_model.LogisticRegression
    C: float
    dev_accuracy: dict[float, float]


def select_c(dev_accuracy: Mapping[float, float]) -> float:
    """The C of the highest dev accuracy; a tie goes to the smaller C (stronger regularisation)."""
    return min(dev_accuracy, key=lambda c: (-dev_accuracy[c], c))


def fit_probe(train_x: np.ndarray, train_y: Sequence[str], dev_x: np.ndarray, dev_y: Sequence[str],
              seed: int, grid: Sequence[float] = C_GRID) -> Probe:
    """Fit ``LogisticRegression(C, max_iter=2000)`` on train for each C of ``grid``; keep the one
    :func:`select_c` picks by dev accuracy (no refit on train+dev)."""
    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError as err:
        raise ImportError("the sib200_probe task needs `pip install scikit-learn`") from err

    fitted = {c: LogisticRegression(C=c, max_iter=MAX_ITER, random_state=seed).fit(train_x, list(train_y))
              for c in grid}
    dev = {c: float(model.score(dev_x, list(dev_y))) for c, model in fitted.items()}
    best = select_c(dev)
    return Probe(fitted[best], best, dev)


def _test_result(encoder, probe: Probe, lang: str, limit: Optional[int], folder: Path,
                 protocol: dict[str, Any]) -> Result:
    rows = read_sib200(folder, lang, "test")[:limit or None]
    vectors = encoder.encode([row.text for row in rows], lang=lang)
    accuracy = float(probe.classifier.score(vectors, [row.label for row in rows]))
    family = "acc en" if lang == SOURCE else "acc zero-shot"
    return Result("sib200_probe", encoder.name, f"acc {lang}", accuracy,
                  {**protocol, "lang": lang, "split": f"{lang}/test", "n": len(rows)}, family=family)


@TASKS.register
def sib200_probe(encoder, context: TaskContext) -> list[Result]:
    """SIB-200 topic classification (7 topics) by a logistic-regression probe on frozen vectors:
    trained on English train, C chosen on English dev only, accuracy on every language's test.
    ``context.limit`` caps each test set; the probe always sees all of English train and dev."""
    folder = sib200_folder(context)
    langs = target_languages(folder, context.languages)
    train, dev = read_sib200(folder, SOURCE, "train"), read_sib200(folder, SOURCE, "dev")
    train_x = encoder.encode([row.text for row in train], lang=SOURCE)
    dev_x = encoder.encode([row.text for row in dev], lang=SOURCE)
    probe = fit_probe(train_x, [row.label for row in train], dev_x, [row.label for row in dev], context.seed)
    protocol = {**encoder.protocol, "pooling": encoder.protocol.get("pooling"),
                "layer": encoder.protocol.get("layer"), "source_language": SOURCE,
                "train_split": f"{SOURCE}/train", "n_train": len(train), "selection_split": f"{SOURCE}/dev",
                "n_dev": len(dev), "C": probe.C, "C_grid": list(C_GRID),
                "dev_accuracy": {str(c): acc for c, acc in probe.dev_accuracy.items()},
                "classifier": f"sklearn LogisticRegression(max_iter={MAX_ITER})", "seed": context.seed}
    context.log(f"  sib200_probe: C={probe.C} (dev accuracy {probe.dev_accuracy[probe.C]:.3f})")
    # target labels are read from here on, after the probe is fixed
    return per_language((SOURCE, *langs), lambda lang: [_test_result(encoder, probe, lang, context.limit, folder,
                                                                      protocol)],
                        lambda lang, at, rows: context.log(f"  sib200_probe {lang}: {rows[0].value:.3f}"))
