"""Text KGs in the KG-BERT / StAR / SimKGC layout: WN18RR as shipped, a small real folder, its
malformed rows named by file and line, and the pinned download with checksums."""

from __future__ import annotations

import shutil

import pytest

from babelzoo.knowledge import KBError, load_kb
from babelzoo.knowledge.text_kg import WN18RR_FILES, download_wn18rr, load_wn18rr, read_text_kg


def _folder(tmp_path, **overrides):
    files = {
        "entity2text.txt": "01\tdog, a domesticated canid\n02\tcanine, a mammal with non-retractile claws\n"
                           "03\tcat, a small feline\n",
        "relation2text.txt": "_hypernym\thypernym\n_also_see\talso see\n",
        "train.tsv": "01\t_hypernym\t02\n03\t_also_see\t01\n",
        "dev.tsv": "03\t_hypernym\t02\n",
        "test.tsv": "02\t_also_see\t03\n",
    }
    files.update(overrides)
    folder = tmp_path / "kg"
    folder.mkdir()
    for name, text in files.items():
        if text is not None:
            (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_a_small_folder_reads_with_texts_splits_and_relation_words(tmp_path):
    kb = load_kb(_folder(tmp_path, **{"entity2textlong.txt": "03\ta cat is kept as a pet\n"}))
    assert kb.name == "kg" and sorted(kb.entities()) == ["01", "02", "03"]
    assert [tuple(t) for t in kb.splits["valid"]] == [("03", "_hypernym", "02")]
    assert len(kb.splits["train"]) == 2 and len(kb.triples()) == 4
    assert kb.entity_text("01") == "dog, a domesticated canid" == kb.label("01")
    assert kb.entity_text("03") == "cat, a small feline, a cat is kept as a pet"
    assert kb.relation_label("_also_see") == "also see"
    again = type(kb).from_dict(kb.to_dict())  # the text survives the KB's JSON round trip
    assert again.entity_text("03") == kb.entity_text("03")


def test_a_name_before_its_description_is_an_alias_and_the_entity_name(tmp_path):
    kb = load_kb(_folder(tmp_path))
    assert kb.labels("01", "en") == ["dog, a domesticated canid", "dog"]  # the text stays the label
    assert kb.entity_name("01") == "dog" and kb.entity_name("02") == "canine"
    assert type(kb).from_dict(kb.to_dict()).entity_name("03") == "cat"
    from babelzoo.knowledge.linker import EntityLinker

    mentions = EntityLinker.from_kb(kb, ["en"]).link_text("A cat chased the dog.", lang="en")
    assert [(m.text, m.entity) for m in mentions] == [("cat", "03"), ("dog", "01")]


def test_texts_that_are_names_whole_give_no_alias(tmp_path):
    # FB15k-237's entity2text.txt holds names, one of them with a comma: every text is a name whole
    kb = load_kb(_folder(tmp_path, **{"entity2text.txt": "01\tWashington, D.C.\n02\tParis\n03\tLyon\n"}))
    assert kb.labels("01", "en") == ["Washington, D.C."] and kb.entity_name("01") == "Washington, D.C."
    assert kb.entity_name("02") == "Paris" == kb.label("02")


@pytest.mark.parametrize("file, text, message", [
    ("train.tsv", "01\t_hypernym\t09\n", r"train.tsv:1: unknown entity '09': it has no line in entity2text.txt"),
    ("test.tsv", "\n02\t_causes\t03\n", r"test.tsv:2: unknown relation '_causes': it has no line in relation2text.txt"),
    ("dev.tsv", "03\t_hypernym\n", r"dev.tsv:1: expected 3 fields"),
    ("entity2text.txt", "01\tdog\n02\n", r"entity2text.txt:2: expected 'id<TAB>text'"),
    ("entity2text.txt", "01\tdog\n01\thound\n", r"entity2text.txt:2: '01' already has a text \(line 1\)"),
    ("relation2text.txt", "_hypernym\t\n", r"relation2text.txt:1: expected 'id<TAB>text'"),
    ("entities.txt", "01\n02\n04\n", r"entities.txt:3: '04' has no text in entity2text.txt"),
])
def test_malformed_rows_are_named_by_file_and_line(tmp_path, file, text, message):
    with pytest.raises(KBError, match=message):
        read_text_kg(_folder(tmp_path, **{file: text}))


def test_a_folder_missing_a_file_says_which(tmp_path):
    folder = _folder(tmp_path, **{"relation2text.txt": None})
    with pytest.raises(KBError, match=r"kg: missing relation2text.txt"):
        read_text_kg(folder)


def test_wn18rr_as_shipped(shared_data):
    kb = load_kb(shared_data / "wn18rr")
    assert len(kb) == 40943 and len(kb.relations()) == 11
    assert {k: len(v) for k, v in kb.splits.items()} == {"train": 86835, "valid": 3034, "test": 3134}
    assert kb.entity_text("06845599") == "trade name, a name given to a product or service"
    assert kb.entity_name("06845599") == "trade name"
    assert kb.relation_label("_derivationally_related_form") == "derivationally related form"


def test_wn18rr_download_verifies_checksums(shared_data, tmp_path, monkeypatch):
    from babelzoo.datasets.download import DownloadError

    upstream = tmp_path / "upstream"  # KG-BERT's data/WN18RR, served by file:// URLs
    upstream.mkdir()
    for name in WN18RR_FILES:
        shutil.copy(shared_data / "wn18rr" / name, upstream / name)
    monkeypatch.delenv("BABELZOO_DATA_DIR", raising=False)
    monkeypatch.setenv("BABELZOO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("babelzoo.knowledge.text_kg.WN18RR_UPSTREAM", upstream.as_uri())
    kb = load_wn18rr()
    assert (tmp_path / "cache" / "knowledge" / "wn18rr" / "entity2text.txt").is_file()
    assert len(kb.splits["test"]) == 3134
    with open(upstream / "test.tsv", "a", encoding="utf-8") as handle:
        handle.write("06845599\t_hypernym\t03754979\n")
    with pytest.raises(DownloadError, match="sha256 mismatch"):
        download_wn18rr(upstream.as_uri(), tmp_path / "again")
