"""SIB-200 transfer tasks on a hand-made three-language folder with a letter-count encoder, so that
every accuracy is known by hand; and flores_retrieval on the real mirror when present."""

from __future__ import annotations

import string
import time
from pathlib import Path

import numpy as np
import pytest

from babelzoo.datasets.text import CorpusError
from babelzoo.evaluation.metrics import l2_normalise
from babelzoo.evaluation.tasks import TaskContext, TaskSkipped, load_tasks, transfer_probe
from babelzoo.evaluation.tasks.transfer_probe import flores_retrieval, select_c, sib200_probe

# index_id, split, label, text. Each topic writes with its own letters (sports a-e, health f-j,
# travel k-o), so letter-count vectors of different topics are orthogonal, and no two texts share
# their letters, so a text retrieves exactly its copy.
ENGLISH = [("1", "train", "sports", "abc"), ("2", "train", "sports", "bcd"), ("3", "train", "health", "fgh"),
           ("4", "train", "health", "ghi"), ("5", "train", "travel", "klm"), ("6", "train", "travel", "lmn"),
           ("7", "dev", "sports", "ace"), ("8", "dev", "health", "fhj"), ("9", "dev", "travel", "kmo"),
           ("10", "test", "sports", "bde"), ("11", "test", "health", "gij"), ("12", "test", "travel", "lno")]
ROTATED = {"sports": "health", "health": "travel", "travel": "sports"}


def swap_texts(rows, a: str, b: str):
    text = {index: t for index, _, _, t in rows}
    swapped = {a: text[b], b: text[a]}
    return [(index, split, label, swapped.get(index, t)) for index, split, label, t in rows]


def with_labels(rows, mapping):
    return [(index, split, mapping[label], text) for index, split, label, text in rows]


GERMAN = ENGLISH[::-1]  # the same texts, in another row order: rows align by index_id, not position
FRENCH = swap_texts(ENGLISH, "11", "12")  # two test rows translated wrongly


def write_sib200(root: Path, languages: dict[str, list[tuple[str, str, str, str]]]) -> Path:
    for lang, rows in languages.items():
        folder = root / "sib200" / lang
        folder.mkdir(parents=True)
        for split in ("train", "dev", "test"):
            lines = [f"{i}\t{label}\t{text}\n" for i, s, label, text in rows if s == split]
            (folder / f"{split}.tsv").write_text("index_id\tcategory\ttext\n" + "".join(lines), encoding="utf-8")
    return root


class LetterCounts:
    """A sentence encoder for tests: the L2-normalised counts of the letters a-z."""

    name = "letters"
    protocol = {"pooling": "letter counts", "layer": 0}

    def __init__(self):
        self.calls: list[tuple[str, int]] = []

    def encode(self, sentences, lang=None) -> np.ndarray:
        self.calls.append((lang, len(sentences)))
        counts = [[s.lower().count(c) for c in string.ascii_lowercase] for s in sentences]
        return l2_normalise(np.array(counts, dtype=np.float32))


@pytest.fixture
def data(tmp_path) -> Path:
    return write_sib200(tmp_path, {"eng_Latn": ENGLISH, "deu_Latn": GERMAN, "fra_Latn": FRENCH})


def values(results) -> dict[str, float]:
    return {r.metric: r.value for r in results}


def test_tasks_are_registered_with_their_standard_set():
    from babelzoo.evaluation.cli import STANDARD_SET_OF_TASK

    assert "flores_retrieval" in load_tasks() and "sib200_probe" in load_tasks()
    assert STANDARD_SET_OF_TASK["flores_retrieval"] == STANDARD_SET_OF_TASK["sib200_probe"] == "sib200"


# --- flores_retrieval -----------------------------------------------------------------------------

def test_flores_retrieval_accuracies(data):
    from babelzoo.evaluation.encoders import CachedEncoder

    inner, lines = LetterCounts(), []
    encoder = CachedEncoder(inner)  # as the leaderboard wraps every model
    results = flores_retrieval(encoder, TaskContext(data_dir=data, log=lines.append))
    assert values(results) == pytest.approx({"acc@1 eng_Latn->deu_Latn": 1.0, "acc@1 deu_Latn->eng_Latn": 1.0,
                                             "acc@1 eng_Latn->fra_Latn": 10 / 12, "acc@1 fra_Latn->eng_Latn": 10 / 12})
    assert {r.family for r in results} == {"acc@1 en→X", "acc@1 X→en"}
    assert all(r.protocol["split"] == "train+dev+test" and r.protocol["n"] == 12 for r in results)
    assert results[0].protocol["pooling"] == "letter counts"
    assert [lang for lang, _ in inner.calls].count("eng_Latn") == 1  # English encoded once for both
    assert lines == ["  flores_retrieval deu_Latn (1/2): 1.000 / 1.000",
                     "  flores_retrieval fra_Latn (2/2): 0.833 / 0.833"]


def test_flores_retrieval_languages_and_limit(data):
    context = TaskContext(data_dir=data, languages=["fra_Latn", "xho_Latn"], limit=6, log=lambda s: None)
    results = flores_retrieval(LetterCounts(), context)
    assert values(results) == {"acc@1 eng_Latn->fra_Latn": 1.0, "acc@1 fra_Latn->eng_Latn": 1.0}  # ids 1-6 agree
    assert results[0].protocol["n"] == 6


def test_flores_retrieval_rejects_languages_that_are_not_parallel(tmp_path):
    renumbered = [("13" if i == "12" else i, s, label, t) for i, s, label, t in ENGLISH]
    data = write_sib200(tmp_path, {"eng_Latn": ENGLISH, "ita_Latn": renumbered})
    with pytest.raises(CorpusError, match=r"SIB-200 eng_Latn and ita_Latn are not parallel: index_id\(s\) only in "
                                          r"eng_Latn: \['12'\]; only in ita_Latn: \['13'\]"):
        flores_retrieval(LetterCounts(), TaskContext(data_dir=data, log=lambda s: None))


def test_flores_retrieval_rejects_a_repeated_id(tmp_path):
    repeated = [("11" if i == "12" else i, s, label, t) for i, s, label, t in ENGLISH]
    data = write_sib200(tmp_path, {"eng_Latn": repeated, "ita_Latn": ENGLISH})
    with pytest.raises(CorpusError, match=r"eng_Latn/test.tsv:4: index_id '11' repeats \(first at .*test.tsv:3\)"):
        flores_retrieval(LetterCounts(), TaskContext(data_dir=data, log=lambda s: None))


@pytest.mark.parametrize("task", [flores_retrieval, sib200_probe])
def test_tasks_skip_without_data_or_languages(task, data, tmp_path):
    with pytest.raises(TaskSkipped, match="needs --data-dir with a sib200/ folder"):
        task(LetterCounts(), TaskContext(data_dir=None))
    with pytest.raises(TaskSkipped, match="needs --data-dir with a sib200/ folder"):
        task(LetterCounts(), TaskContext(data_dir=tmp_path / "elsewhere"))
    with pytest.raises(TaskSkipped, match=r"none of \['deu', 'fra'\] is in .*present: deu_Latn, fra_Latn"):
        task(LetterCounts(), TaskContext(data_dir=data, languages=["deu", "fra"]))


# --- sib200_probe ---------------------------------------------------------------------------------

def test_select_c_prefers_dev_accuracy_then_the_smaller_c():
    assert select_c({0.01: 0.5, 0.1: 0.9, 1.0: 0.9, 10.0: 0.8, 100.0: 0.9}) == 0.1
    assert select_c({100.0: 0.7, 10.0: 0.7, 1.0: 0.7}) == 1.0
    assert select_c({0.01: 0.2, 100.0: 0.3}) == 100.0


def test_probe_accuracies_and_protocol(data):
    pytest.importorskip("sklearn")
    lines = []
    results = sib200_probe(LetterCounts(), TaskContext(data_dir=data, seed=3, log=lines.append))
    # English and its German copy are classified correctly; French test rows 11 and 12 carry each
    # other's text, so only row 10 keeps a text of its own topic.
    assert values(results) == pytest.approx({"acc eng_Latn": 1.0, "acc deu_Latn": 1.0, "acc fra_Latn": 1 / 3})
    assert [r.family for r in results] == ["acc en", "acc zero-shot", "acc zero-shot"]
    protocol = results[1].protocol
    assert protocol["dev_accuracy"] == {"0.01": 1.0, "0.1": 1.0, "1.0": 1.0, "10.0": 1.0, "100.0": 1.0}
    assert protocol["C"] == 0.01  # every C is perfect on dev: the tie goes to the smallest
    assert {k: protocol[k] for k in ("source_language", "selection_split", "classifier", "seed", "pooling", "layer",
                                     "lang", "split", "n", "n_train", "n_dev")} == {
        "source_language": "eng_Latn", "selection_split": "eng_Latn/dev",
        "classifier": "sklearn LogisticRegression(max_iter=2000)", "seed": 3, "pooling": "letter counts",
        "layer": 0, "lang": "deu_Latn", "split": "deu_Latn/test", "n": 3, "n_train": 6, "n_dev": 3}
    assert lines[0] == "  sib200_probe: C=0.01 (dev accuracy 1.000)"


def test_probe_never_reads_a_target_label(data, tmp_path, monkeypatch):
    pytest.importorskip("sklearn")
    relabelled = write_sib200(tmp_path / "relabelled", {
        "eng_Latn": ENGLISH, "deu_Latn": with_labels(GERMAN, ROTATED), "fra_Latn": with_labels(FRENCH, ROTATED)})
    probes, fit = [], transfer_probe.fit_probe

    def recording_fit(train_x, train_y, dev_x, dev_y, seed, **kwargs):
        assert list(train_y) == [label for _, s, label, _ in ENGLISH if s == "train"]
        assert list(dev_y) == [label for _, s, label, _ in ENGLISH if s == "dev"]
        probes.append(fit(train_x, train_y, dev_x, dev_y, seed, **kwargs))
        return probes[-1]

    monkeypatch.setattr(transfer_probe, "fit_probe", recording_fit)
    original = sib200_probe(LetterCounts(), TaskContext(data_dir=data, log=lambda s: None))
    changed = sib200_probe(LetterCounts(), TaskContext(data_dir=relabelled, log=lambda s: None))
    first, second = probes
    assert first.C == second.C and first.dev_accuracy == second.dev_accuracy
    assert np.array_equal(first.classifier.coef_, second.classifier.coef_)
    assert np.array_equal(first.classifier.intercept_, second.classifier.intercept_)
    assert values(original)["acc eng_Latn"] == values(changed)["acc eng_Latn"] == 1.0
    assert (values(original)["acc deu_Latn"], values(changed)["acc deu_Latn"]) == (1.0, 0.0)  # only the score moves
    assert [r.protocol["C"] for r in original] == [r.protocol["C"] for r in changed]


def test_probe_limit_caps_test_sets_only(data):
    pytest.importorskip("sklearn")
    results = sib200_probe(LetterCounts(), TaskContext(data_dir=data, languages=["fra_Latn"], limit=1,
                                                       log=lambda s: None))
    assert values(results) == {"acc eng_Latn": 1.0, "acc fra_Latn": 1.0}  # row 10 only
    assert [(r.protocol["n"], r.protocol["n_train"]) for r in results] == [(1, 6), (1, 6)]


# --- the real mirror ------------------------------------------------------------------------------

def test_flores_retrieval_on_the_mirror(shared_data):
    if not (shared_data / "sib200").is_dir():
        pytest.skip(f"no sib200/ in {shared_data}")
    start = time.perf_counter()
    context = TaskContext(data_dir=shared_data, languages=["deu_Latn", "fra_Latn"], limit=100, log=lambda s: None)
    results = flores_retrieval(LetterCounts(), context)
    assert time.perf_counter() - start < 5
    assert [r.metric for r in results] == ["acc@1 eng_Latn->deu_Latn", "acc@1 deu_Latn->eng_Latn",
                                           "acc@1 eng_Latn->fra_Latn", "acc@1 fra_Latn->eng_Latn"]
    assert all(r.protocol["n"] == 100 for r in results)
    # Letter counts find 7-16 of 100 translations (chance: 1), on names and numbers; a row
    # misaligned by index_id would leave about 1.
    assert [r.value for r in results] == pytest.approx([0.16, 0.07, 0.10, 0.11])


def test_cached_encoder_embeds_each_sentence_once_per_language():
    from babelzoo.evaluation.encoders import CachedEncoder

    class Counting:
        name, protocol, calls = "counting", {}, []

        def encode(self, sentences, lang=None):
            self.calls.append((tuple(sentences), lang))
            return np.array([[float(len(s)), 1.0] for s in sentences], dtype=np.float32)

    inner = Counting()
    cached = CachedEncoder(inner)
    first = cached.encode(["ab", "c", "ab"], lang="en")
    again = cached.encode(["c", "dddd"], lang="en")
    other = cached.encode(["c"], lang="de")
    assert first[:, 0].tolist() == [2.0, 1.0, 2.0] and again[:, 0].tolist() == [1.0, 4.0] and other[0, 0] == 1.0
    assert inner.calls == [(("ab", "c"), "en"), (("dddd",), "en"), (("c",), "de")]
    assert cached.name == "counting"
