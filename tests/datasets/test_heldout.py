"""The test-sentence filter: which files it reads in a data dir and how it compares sentences."""

import gzip

import pytest

from babelzoo.datasets.heldout import HeldOutSentences, NoTestSets, heldout_files, normalise_sentence


def test_normalise_sentence_folds_unicode_form_whitespace_and_case():
    assert normalise_sentence("  What\u00a0time\tis  IT? \n") == "what time is it?"
    assert normalise_sentence("ﬁne") == "fine"  # NFKC: the ligature is two letters
    assert normalise_sentence("Cafe\u0301") == normalise_sentence("Café")  # NFKC composes
    assert normalise_sentence("STRASSE") == normalise_sentence("straße")  # case folding, not lower()


def write_data_dir(root):
    (root / "tatoeba").mkdir(parents=True)
    (root / "tatoeba" / "tatoeba.bre-eng.bre").write_text("Me a zo skuizh.\nDemat!\n", encoding="utf-8")
    (root / "tatoeba" / "tatoeba.bre-eng.eng").write_text("I am tired.\nHello!\n", encoding="utf-8")
    (root / "sib200" / "eng_Latn").mkdir(parents=True)
    (root / "sib200" / "eng_Latn" / "test.tsv").write_text(
        "index_id\tcategory\ttext\n7\tscience\tThe rocket left the pad.\n", encoding="utf-8")
    (root / "sib200" / "eng_Latn" / "train.tsv").write_text(
        "index_id\tcategory\ttext\n8\ttravel\tThe train was late.\n", encoding="utf-8")
    (root / "multi30k").mkdir()
    with gzip.open(root / "multi30k" / "test_2016_flickr.en.gz", "wt", encoding="utf-8") as f:
        f.write("A dog runs on the beach.\n")
    with gzip.open(root / "multi30k" / "train.en.gz", "wt", encoding="utf-8") as f:
        f.write("A cat sleeps.\n")  # training data of Multi30k: not a test sentence
    (root / "sib200" / "README.upstream.md").write_text("not data\n", encoding="utf-8")


def test_every_test_file_of_a_data_dir_is_read_and_nothing_else(tmp_path):
    write_data_dir(tmp_path)
    names = [p.relative_to(tmp_path).as_posix() for p in heldout_files(tmp_path)]
    assert names == ["multi30k/test_2016_flickr.en.gz", "sib200/eng_Latn/test.tsv", "sib200/eng_Latn/train.tsv",
                     "tatoeba/tatoeba.bre-eng.bre", "tatoeba/tatoeba.bre-eng.eng"]
    held = HeldOutSentences.from_data_dir(tmp_path)
    assert held.sentences == {"me a zo skuizh.", "demat!", "i am tired.", "hello!", "the rocket left the pad.",
                              "the train was late.", "a dog runs on the beach."}
    assert "A  DOG runs on the beach." in held and "A cat sleeps." not in held
    assert "index_id" not in held and "science" not in held  # the header and the label column


def test_split_removes_a_pair_when_either_side_is_a_test_sentence(tmp_path):
    write_data_dir(tmp_path)
    held = HeldOutSentences.from_data_dir(tmp_path)
    pairs = [("I am  tired.", "Skuizh on."), ("Open", "Digeriñ"), ("Greeting", "DEMAT!"), ("Close", "Serriñ")]
    assert held.split(pairs) == ([("Open", "Digeriñ"), ("Close", "Serriñ")], 2)


def test_a_data_dir_without_test_files_is_an_error_naming_it(tmp_path):
    with pytest.raises(NoTestSets, match=f"{tmp_path}: no Tatoeba, SIB-200 or Multi30k test files"):
        HeldOutSentences.from_data_dir(tmp_path)
