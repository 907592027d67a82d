"""Every registered benchmark task, run through the registry on small data written here (or the
embedded data it ships with) with a table encoder whose answers are known: one that maps each
text to the one-hot vector of its translation scores exactly 1.0, one that maps it to the next
sentence's scores exactly 0.0. A task whose data or model is not given here is run without it
and must skip, saying what it needs (the test file named in its case runs it on its data).

A task registered without a case here fails ``test_every_registered_task_has_a_case`` and its
own parametrised case (the parameters are the registry's names, not this file's)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import pytest
import torch

from babelzoo.evaluation.tasks import Result, TaskContext, TaskSkipped, load_tasks

TASKS = load_tasks()


class Table:
    """A sentence encoder that looks each text up: ``index[text]``'s one-hot vector."""

    name, protocol = "table", {}

    def __init__(self, index: dict[str, int]):
        self.index = index

    def encode(self, texts, lang=None, **kwargs) -> torch.Tensor:
        width = max(self.index.values()) + 1
        return torch.nn.functional.one_hot(torch.tensor([self.index[t] for t in texts]), width).float()


def tables(pairs: list[tuple[str, str]]) -> tuple[Table, Table]:
    """(aligned, shifted): source i and its translation share vector i; or translation i gets
    vector i + 1, so that no source finds its own."""
    n = len(pairs)
    aligned = {**{s: i for i, (s, _) in enumerate(pairs)}, **{t: i for i, (_, t) in enumerate(pairs)}}
    shifted = {**{s: i for i, (s, _) in enumerate(pairs)}, **{t: (i + 1) % n for i, (_, t) in enumerate(pairs)}}
    return Table(aligned), Table(shifted)


PAIRS = [("the cat sleeps", "die Katze schläft"), ("a red house", "ein rotes Haus"), ("we eat bread", "wir essen Brot")]


@dataclass
class Case:
    """The task's context and, for a run, the encoders with the value every row must take
    (``aligned`` scoring 1.0, ``shifted`` 0.0) and the rows expected, or an encoder and a check
    of its rows; for a skip, the message."""

    context: TaskContext
    encoders: Optional[tuple[Table, Table]] = None
    rows: int = 0
    skip: str = ""
    encoder: object = None  # a run whose values are checked by ``check`` (range and protocol)
    check: Optional[Callable[[list[Result]], None]] = None


def quiet(**options) -> TaskContext:
    return TaskContext(log=lambda _: None, **options)


def write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def tatoeba_data(tmp: Path) -> Path:
    write(tmp / "tatoeba" / "tatoeba.deu-eng.deu", [t for _, t in PAIRS])
    write(tmp / "tatoeba" / "tatoeba.deu-eng.eng", [s for s, _ in PAIRS])
    return tmp


def tatoeba_case(tmp: Path) -> Case:
    return Case(quiet(data_dir=tatoeba_data(tmp)), tables(PAIRS), rows=2)  # acc@1 eng->deu, deu->eng


def tatoeba_mteb_case(tmp: Path) -> Case:
    return Case(quiet(data_dir=tatoeba_data(tmp)), tables(PAIRS), rows=2)  # F1 and accuracy, deu->eng


def multi30k_case(tmp: Path) -> Case:
    write(tmp / "multi30k" / "test_2016_flickr.en", [s for s, _ in PAIRS])
    for lang in ("de", "fr", "cs"):  # one translation serves the three: the table keys on the text
        write(tmp / "multi30k" / f"test_2016_flickr.{lang}", [t for _, t in PAIRS])
    return Case(quiet(data_dir=tmp), tables(PAIRS), rows=6)


def gettext_retrieval_case(tmp: Path) -> Case:
    pytest.importorskip("gramps")
    from babelzoo.offline.embedded import EMBEDDED_PACKAGES, aligned, embedded_corpus, split_rows

    pairs = aligned(split_rows(embedded_corpus(EMBEDDED_PACKAGES), heldout=True), "en", "de")[:4]
    assert len({s for s, _ in pairs} | {t for _, t in pairs}) == 8  # distinct texts, so the table is a bijection
    return Case(quiet(languages=["de"], limit=4), tables(pairs), rows=2)


def bli_cldr_case(tmp: Path) -> Case:
    def check(rows: list[Result]) -> None:
        assert {(r.protocol["direction"], r.protocol["retrieval"]) for r in rows} == {("en->de", "nn"), ("en->de", "csls")}
        assert all(r.protocol["n"] == 3 and 0.0 <= r.value <= 1.0 for r in rows)

    class Letters:  # bag of letters: a name and its translation share some
        name, protocol = "letters", {}

        def encode(self, texts, lang=None, **kwargs):
            return torch.tensor([[t.lower().count(c) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts],
                                dtype=torch.float32)

    return Case(quiet(languages=["de"], limit=3), encoder=Letters(), check=check)


def skipped(message: str, **options) -> Callable[[Path], Case]:
    return lambda tmp: Case(quiet(**options), skip=message)


CASES: dict[str, Callable[[Path], Case]] = {
    "tatoeba": tatoeba_case, "tatoeba_mteb": tatoeba_mteb_case, "multi30k": multi30k_case,
    "gettext_retrieval": gettext_retrieval_case, "bli_cldr": bli_cldr_case,
    # run on their data in tests/evaluation/test_knowledge_tasks.py, test_transfer_probe.py,
    # test_transfer_tasks.py, test_multimodal_tasks.py and tests/knowledge/test_text_kge.py
    "cldr_linking": skipped(r"no CLDR locale for \['xx'\]; known: de, fr", languages=["xx"]),
    "codex_link_prediction": skipped(r"CoDEx-S needs --data-dir with a codex-s/ folder"),
    "wn18rr_link_prediction": skipped(r"WN18RR needs --data-dir with a wn18rr/ folder"),
    "flores_retrieval": skipped(r"needs --data-dir with a sib200/ folder"),
    "sib200_probe": skipped(r"SIB-200 needs --data-dir with a sib200/ folder"),
    "sib200": skipped(r"table is not a babelzoo model, so it cannot be fine-tuned here"),
    "udpos": skipped(r"table is not a babelzoo model, so it cannot be fine-tuned here"),
    "image_text_retrieval": skipped(r"needs a model with an image tower"),
    "speech_text_retrieval": skipped(r"needs a model with a speech tower"),
}


def test_every_registered_task_has_a_case(every_part_tested):
    every_part_tested(TASKS, CASES)


@pytest.mark.parametrize("name", TASKS.list())
def test_a_task_scores_what_its_data_says(name, tmp_path):
    assert name in CASES, f"task {name!r} has no case: add one to CASES"
    case = CASES[name](tmp_path)
    task = TASKS.get(name)
    if case.skip:
        with pytest.raises(TaskSkipped, match=case.skip):
            task(Table({"": 0}), case.context)
        return
    if case.encoder is not None:
        rows = task(case.encoder, case.context)
        assert rows and all(r.task == name for r in rows)
        case.check(rows)
        return
    aligned, shifted = case.encoders
    for encoder, value in ((aligned, 1.0), (shifted, 0.0)):
        rows = task(encoder, case.context)
        assert len(rows) == case.rows and all(isinstance(r, Result) and r.task == name for r in rows)
        assert {r.metric: r.value for r in rows} == {r.metric: value for r in rows}, encoder
        assert all(r.model == "table" for r in rows)
