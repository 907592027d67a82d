"""Every registered knowledge base loads through ``load_kb(name, ...)`` from a tiny folder in its
own layout written here (CLDR from the installed babel data), with its entities, relations and
triples counted, a fact and a name checked, and a malformed row named by file and line.

A knowledge base registered without a case here fails ``test_every_registered_kb_has_a_case``
and its own parametrised case (the parameters are the registry's names, not this file's)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from babelzoo.knowledge import KBError, load_kb
from babelzoo.knowledge.base import KNOWLEDGE_BASES, list_kbs


@dataclass
class Case:
    """Options for the backend, the counts and one fact it must give, and options that read a
    malformed file with the message naming its line (or why the backend reads no file of ours)."""

    options: dict
    entities: int
    relations: int
    triples: int
    fact: tuple[str, str, str]
    label: tuple[str, str, str]  # (entity, lang, its first name)
    malformed: tuple[dict, str] | str


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def codex_case(size: str) -> Callable[[Path], Case]:
    def case(tmp: Path) -> Case:
        files = {"train.txt": "Q1\tP17\tQ2\nQ3\tP17\tQ2\n", "valid.txt": "Q4\tP17\tQ2\n", "test.txt": "Q1\tP36\tQ3\n",
                 "entities/en.json": json.dumps({"Q1": {"label": "Paris"}, "Q2": {"label": "France"}}),
                 "relations/en.json": json.dumps({"P17": {"label": "country"}, "P36": {"label": "capital"}})}
        good = write(tmp / "codex", files)
        bad = write(tmp / "bad", {**files, "valid.txt": "Q4\tP17\tQ2\nQ1\tP17\n"})
        return Case({"root": good}, 4, 2, 4, ("Q1", "P17", "Q2"), ("Q1", "en", "Paris"),
                    ({"root": bad}, r"valid.txt:2: expected 3 fields"))

    return case


def wn18rr_case(tmp: Path) -> Case:
    files = {"entity2text.txt": "01\tdog, a canid\n02\tcanine, a mammal\n03\tcat, a feline\n",
             "relation2text.txt": "_hypernym\thypernym\n_also_see\talso see\n",
             "train.tsv": "01\t_hypernym\t02\n03\t_also_see\t01\n", "dev.tsv": "03\t_hypernym\t02\n",
             "test.tsv": "02\t_also_see\t03\n"}
    good = write(tmp / "wn18rr", files)
    bad = write(tmp / "bad", {**files, "dev.tsv": "03\t_hypernym\t02\n03\t_hypernym\t09\n"})
    return Case({"root": good}, 3, 2, 4, ("03", "_also_see", "01"), ("01", "en", "dog, a canid"),
                ({"root": bad}, r"dev.tsv:2: unknown entity '09'"))


def dbp5l_case(lang: str) -> Callable[[Path], Case]:
    def case(tmp: Path) -> Case:
        uris = [f"http://{lang}.dbpedia.org/resource/{name}" for name in ("Paris", "France", "Lyon")]
        files = {f"entity/{lang}.tsv": "\n".join(uris) + "\n",
                 "relations.txt": "http://dbpedia.org/ontology/country\nhttp://dbpedia.org/ontology/capital\n",
                 f"kg/{lang}-train.tsv": "0\t0\t1\n2\t0\t1\n", f"kg/{lang}-val.tsv": "1\t1\t0\n",
                 f"kg/{lang}-test.tsv": "2\t1\t0\n"}
        good = write(tmp / "dbp5l", files)
        bad = write(tmp / "bad", {**files, f"kg/{lang}-train.tsv": "0\t0\t1\n2\t0\t3\n"})
        return Case({"root": good}, 3, 2, 4, ("0", "http://dbpedia.org/ontology/country", "1"), ("2", lang, "Lyon"),
                    ({"root": bad}, rf"kg/{lang}-train.tsv:2: tail '3' is not an index of the 3 lines"))

    return case


def cldr_case(tmp: Path) -> Case:
    pytest.importorskip("babel")
    # at least CLDR 44's 249 territories, 250 currencies, ...: the exact counts move with babel's CLDR
    return Case({}, -6000, -8, -8000, ("territory:JP", "uses_currency", "currency:JPY"), ("territory:JP", "de", "Japan"),
                "built from the installed babel and pycountry data, no file of the user's")


CASES: dict[str, Callable[[Path], Case]] = {
    "cldr": cldr_case, "wn18rr": wn18rr_case,
    **{f"codex-{size}": codex_case(size) for size in ("s", "m", "l")},
    **{f"dbp5l-{lang}": dbp5l_case(lang) for lang in ("el", "en", "es", "fr", "ja")},
}


def at_least_or_exactly(found: int, expected: int) -> bool:
    """``expected`` exactly, or at least ``-expected`` when it is negative (data that grows)."""
    return found == expected if expected >= 0 else found >= -expected


def test_every_registered_kb_has_a_case(every_part_tested):
    list_kbs()  # installed plug-ins registered too
    every_part_tested(KNOWLEDGE_BASES, CASES)


@pytest.mark.parametrize("name", list_kbs())
def test_a_kb_loads_from_its_folder_with_its_facts_and_names(name, tmp_path):
    assert name in CASES, f"knowledge base {name!r} has no case: add one to CASES"
    case = CASES[name](tmp_path)
    kb = load_kb(name, **case.options)
    counts = len(kb.entities()), len(kb.relations()), len(kb.triples())
    assert all(at_least_or_exactly(n, e) for n, e in zip(counts, (case.entities, case.relations, case.triples))), \
        f"entities, relations, triples: {counts}; expected {case.entities, case.relations, case.triples}"
    head, relation, tail = case.fact
    assert tuple(kb.triples(head=head, relation=relation)[0]) == case.fact
    assert tail in kb.neighbors(head)
    entity, lang, label = case.label
    assert kb.labels(entity, lang)[0] == label
    if getattr(kb, "splits", None):  # a graph with splits holds each of its triples in one split
        assert sum(len(rows) for rows in kb.splits.values()) == len(kb.triples())


@pytest.mark.parametrize("name", list_kbs())
def test_a_malformed_row_is_named_by_file_and_line(name, tmp_path):
    case = CASES[name](tmp_path)
    if isinstance(case.malformed, str):
        pytest.skip(f"{name}: {case.malformed}")
    options, message = case.malformed
    with pytest.raises(KBError, match=message):
        load_kb(name, **options)
