"""Labelled data readers: small files written here with exact expected values, one test per kind
of bad input (each naming file:line), and the real SIB-200 and UD mirrors when present."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from babelzoo.datasets.labelled import (SIB200_LABELS, UPOS_TAGS, LabelError, LabelledText, TaggedSentence,
                                        read_bio, read_classification, read_conllu, read_sib200, read_ud,
                                        sib200_languages, ud_treebanks)
from babelzoo.datasets.standard import ensure_standard_set, standard_sets
from babelzoo.datasets.text import CorpusError


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def word(token_id: str, form: str, upos: str = "NOUN", xpos: str = "NN") -> str:
    """A CoNLL-U word line: ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC."""
    return "\t".join([token_id, form, form.lower(), upos, xpos, "_", "0", "root", "_", "_"])


def conllu(*lines: str) -> str:
    return "".join(line + "\n" for line in lines)


# --- classification: TSV and JSON lines -----------------------------------------------------------

def test_tsv_round_trip_with_text_b_and_id(tmp_path):
    path = write(tmp_path / "nli.tsv", "id\tpremise\thypothesis\tlabel\n"
                                       "a1\tA man sleeps.\tSomeone rests.\tentailment\n"
                                       "a2\tIt rains.\tThe sun is out.\tcontradiction\n")
    rows = read_classification(path, text_column="premise", text_b_column="hypothesis", id_column="id")
    assert rows == [LabelledText("A man sleeps.", "entailment", "Someone rests.", "a1", f"{path}:2"),
                    LabelledText("It rains.", "contradiction", "The sun is out.", "a2", f"{path}:3")]


def test_tsv_in_sib200_layout_with_bom_crlf_and_blank_lines_at_the_end(tmp_path):
    path = write(tmp_path / "dev.tsv", "\ufeffindex_id\tcategory\ttext\r\n"
                                       "431\tgeography\tTurkey is encircled by seas.\r\n"
                                       "7\tscience/technology\tA \"quoted\" text, with commas\r\n\r\n\n")
    rows = read_classification(path, label_column="category", id_column="index_id", labels=SIB200_LABELS)
    assert rows == [LabelledText("Turkey is encircled by seas.", "geography", None, "431", f"{path}:2"),
                    LabelledText('A "quoted" text, with commas', "science/technology", None, "7", f"{path}:3")]


def test_gzip_tsv(tmp_path):
    path = tmp_path / "train.tsv.gz"
    path.write_bytes(gzip.compress("text\tlabel\nbonjour\tfr\n".encode("utf-8")))
    assert read_classification(path) == [LabelledText("bonjour", "fr", where=f"{path}:2")]


def test_jsonl_round_trip_and_format_choice(tmp_path):
    records = [{"sentence1": "Er schläft.", "sentence2": "Er ruht.", "label": "entailment", "uid": "x"},
               {"sentence1": "Es regnet.", "sentence2": "Die Sonne scheint.", "label": "contradiction", "uid": "y"}]
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records) + "\n"
    kwargs = dict(text_column="sentence1", text_b_column="sentence2", id_column="uid")
    for name in ("pairs.jsonl", "pairs.json"):
        path = write(tmp_path / name, text)
        assert read_classification(path, **kwargs) == [
            LabelledText("Er schläft.", "entailment", "Er ruht.", "x", f"{path}:1"),
            LabelledText("Es regnet.", "contradiction", "Die Sonne scheint.", "y", f"{path}:2")]
    other = write(tmp_path / "pairs.txt", text)
    assert read_classification(other, format="jsonl", **kwargs)[1].where == f"{other}:2"
    with pytest.raises(LabelError, match=r"pairs.txt: cannot tell the format from the file name"):
        read_classification(other, **kwargs)
    with pytest.raises(ValueError, match="format='csv'"):
        read_classification(other, format="csv")


CLASSIFICATION_ERRORS = [
    ("a.tsv", "text\tcategory\nhi\tx\n", {},
     r"a.tsv:1: no column 'label' \(the label column\) in the header; the header's columns are \['text', 'category'\]"),
    ("a.tsv", "text\ttext\tlabel\n", {}, r"a.tsv:1: header names column\(s\) \['text'\] more than once"),
    ("a.tsv", "text\tlabel\nhi\tpos\nhi\tpos\textra\n", {},
     r"a.tsv:3: expected 2 tab-separated fields as in the header \['text', 'label'\], found 3"),
    ("a.tsv", b"text\tlabel\nna\xefve\tpos\n", {}, r"a.tsv:2: invalid UTF-8"),
    ("a.tsv", "text\tlabel\n\tpos\n", {}, r"a.tsv:2: empty 'text' field \(the text field\)"),
    ("a.tsv", "text\tlabel\nhi\t \n", {}, r"a.tsv:2: empty 'label' field \(the label field\)"),
    ("a.tsv", "text\tlabel\nhi\tpos\nho\tneutral\n", {"labels": ("neg", "pos")},
     r"a.tsv:3: label 'neutral' \(column 'label'\) is not one of the 2 labels: neg, pos"),
    ("a.tsv", "text\tlabel\nhi\tpos\n\nho\tneg\n", {}, r"a.tsv:3: blank line between records"),
    ("a.tsv", "", {}, r"a.tsv: empty file, expected a header line"),
    ("a.tsv", "text\tlabel\n\n", {}, r"a.tsv: no rows after the header"),
    ("a.jsonl", '{"text": "hi", "label": "pos"}\n{"text": "ho", \n', {}, r"a.jsonl:2: invalid JSON"),
    ("a.jsonl", '["hi", "pos"]\n', {}, r"a.jsonl:1: expected a JSON object, found list"),
    ("a.jsonl", '{"text": "hi"}\n', {},
     r"a.jsonl:1: no key 'label' \(the label field\); the object has keys \['text'\]"),
    ("a.jsonl", '{"text": "hi", "label": 3}\n', {},
     r"a.jsonl:1: 'label' \(the label field\) must be a string, found int 3"),
    ("a.jsonl", '{"text": "", "label": "pos"}\n', {}, r"a.jsonl:1: empty 'text' field"),
    ("a.jsonl", b'{"text": "\xff", "label": "pos"}\n', {}, r"a.jsonl:1: invalid UTF-8"),
    ("a.jsonl", "\n\n", {}, r"a.jsonl: no rows"),
]


CLASSIFICATION_ERROR_IDS = ["missing-column", "repeated-column", "field-count", "tsv-utf8", "empty-text",
                            "empty-label", "unknown-label", "blank-line-inside", "empty-file", "header-only",
                            "bad-json", "json-not-object", "missing-key", "non-string", "json-empty-text",
                            "json-utf8", "no-records"]


@pytest.mark.parametrize("name,content,kwargs,message", CLASSIFICATION_ERRORS, ids=CLASSIFICATION_ERROR_IDS)
def test_classification_errors_name_file_and_line(tmp_path, name, content, kwargs, message):
    with pytest.raises(LabelError, match=message):
        read_classification(write(tmp_path / name, content), **kwargs)


def test_label_error_is_a_corpus_error():
    assert issubclass(LabelError, CorpusError)


# --- CoNLL-U --------------------------------------------------------------------------------------

def test_conllu_comments_ranges_empty_nodes_and_a_missing_last_blank_line(tmp_path):
    path = write(tmp_path / "fr.conllu", conllu(
        "# newdoc id = d1", "# sent_id = s1", "# text = du vin",
        word("1-2", "du", "_", "_"), word("1", "de", "ADP", "P"), word("2", "le", "DET", "D"), word("3", "vin"),
        "",
        "# sent_id = s2",
        *(word(str(i), f"w{i}", "VERB", "VB") for i in range(1, 9)),
        word("8.1", "write", "VERB", "VB"), word("9", ".", "PUNCT", ".")).rstrip("\n"))
    sentences = read_conllu(path)
    assert sentences == [
        TaggedSentence(("de", "le", "vin"), ("ADP", "DET", "NOUN"), f"{path}:1", "s1", "du vin", newdoc=True),
        TaggedSentence(tuple(f"w{i}" for i in range(1, 9)) + (".",), ("VERB",) * 8 + ("PUNCT",), f"{path}:9", "s2")]
    assert read_conllu(path, column="xpos", tags=None)[0].tags == ("P", "D", "NN")


def test_conllu_accepts_crlf_bom_and_an_empty_node_before_the_first_word(tmp_path):
    text = "\ufeff" + conllu(word("0.1", "e"), word("1", "Hi", "INTJ")).replace("\n", "\r\n")
    path = write(tmp_path / "x.conllu", text)
    assert read_conllu(path) == [TaggedSentence(("Hi",), ("INTJ",), f"{path}:1")]


CONLLU_ERRORS = [
    (conllu(word("1", "a"), "2\tb\tb\tNOUN\tNN\t_\t1\tdep\t_"),
     r"x.conllu:2: expected 10 tab-separated fields \(ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC\), found 9"),
    (conllu(word("1", "a"), word("x", "b")), r"x.conllu:2: ID 'x' \(field 1\) is not a word number"),
    (conllu(word("1", "a"), word("3", "b")), r"x.conllu:2: ID 3 \(field 1\) out of order: expected 2"),
    (conllu(word("2", "a")), r"x.conllu:1: ID 2 \(field 1\) out of order: expected 1"),
    (conllu(word("1", "a"), "", word("1", "cat", "NOUNS")),
     r"x.conllu:3: UPOS \(field 4\) 'NOUNS' of 'cat' is not a valid tag \(valid: ADJ, ADP,"),
    (conllu(word("1", "a", "_")), r"x.conllu:1: UPOS \(field 4\) of 'a' is '_' \(unspecified\)"),
    (conllu(word("1", "")), r"x.conllu:1: empty FORM field \(field 2\)"),
    (conllu(word("2-1", "du", "_"), word("1", "de")),
     r"x.conllu:1: range 2-1 \(field 1\): the first ID must be smaller"),
    (conllu(word("1", "a"), word("3-4", "du", "_")),
     r"x.conllu:2: range 3-4 \(field 1\) must start at the next word, 2"),
    (conllu(word("1-2", "du", "_"), word("1", "de")),
     r"x.conllu:1: range 1-2 \(field 1\): words 1..2 must follow it, but the sentence ends after word 1"),
    (conllu(word("1-3", "x", "_"), word("1", "a"), word("2-3", "y", "_")),
     r"x.conllu:1: range 1-3 .* but a new range 2-3 starts at line 3"),
    (conllu(word("1", "a"), word("2.1", "e")), r"x.conllu:2: empty node 2.1 \(field 1\) out of order: expected 1.1"),
    (conllu(word("1", "a"), word("1.2", "e")), r"x.conllu:2: empty node 1.2 \(field 1\) out of order: expected 1.1"),
    (conllu("# sent_id = s1", "", word("1", "a")), r"x.conllu:1: sentence with no words"),
    (conllu(word("1", "a"), "", "", word("1", "b")), r"x.conllu:3: blank line with no sentence before it"),
    (conllu(word("1", "a"), " ", word("1", "b")), r"x.conllu:2: line of only whitespace"),
    (conllu(word("1", "a"), "# late", word("2", "b")), r"x.conllu:2: comment line inside a sentence"),
    (conllu("# sent_id = a", "# sent_id = b", word("1", "a")), r"x.conllu:2: second sent_id 'b'"),
    (b"1\tna\xefve\t_\tADJ\t_\t_\t0\troot\t_\t_\n", r"x.conllu:1: invalid UTF-8"),
    ("", r"x.conllu: no sentences"),
]


CONLLU_ERROR_IDS = ["field-count", "id-x", "id-gap", "id-not-from-1", "bad-tag", "unspecified-tag", "empty-field",
                    "range-reversed", "range-not-next", "range-words-missing", "range-overlap", "empty-node-head",
                    "empty-node-minor", "no-words", "double-blank", "whitespace-line", "late-comment",
                    "two-sent-ids", "utf8", "no-sentences"]


@pytest.mark.parametrize("content,message", CONLLU_ERRORS, ids=CONLLU_ERROR_IDS)
def test_conllu_errors_name_file_and_line(tmp_path, content, message):
    with pytest.raises(LabelError, match=message):
        read_conllu(write(tmp_path / "x.conllu", content))


def test_conllu_column_and_tag_set(tmp_path):
    path = write(tmp_path / "x.conllu", conllu(word("1", "Dogs", "NOUN", "NNS")))
    with pytest.raises(ValueError, match="column='lemma'"):
        read_conllu(path, column="lemma")
    with pytest.raises(LabelError, match=r"x.conllu:1: XPOS \(field 5\) 'NNS'"):
        read_conllu(path, column="xpos")  # the default tag set is UPOS
    assert read_conllu(path, column="xpos", tags=("NNS",))[0].tags == ("NNS",)
    assert UPOS_TAGS == ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON",
                         "PROPN", "PUNCT", "SCONJ", "SYM", "VERB", "X")


# --- BIO ------------------------------------------------------------------------------------------

BIO = ("-DOCSTART- -X- -X- O\n\n"
       "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\n\n\n"
       "Peter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n")


def test_bio_sentences_skip_docstart(tmp_path):
    path = write(tmp_path / "train.txt", BIO)
    assert read_bio(path) == [TaggedSentence(("EU", "rejects", "German"), ("B-ORG", "O", "B-MISC"), f"{path}:3"),
                              TaggedSentence(("Peter", "Blackburn"), ("B-PER", "I-PER"), f"{path}:8")]


@pytest.mark.parametrize("content,kwargs,message", [
    (BIO.replace("B-MISC", "B_MISC"), {}, r"x.txt:5: tag 'B_MISC' \(last column\) of 'German' is not O, B-X or I-X"),
    (BIO, {"tags": ("O", "B-PER", "I-PER", "B-ORG")},
     r"x.txt:5: tag 'B-MISC' \(last column\) of 'German' is not one of"),
    (BIO.replace("rejects VBZ B-VP O", "rejects"), {},
     r"x.txt:4: expected a word and a tag, found one column 'rejects'"),
    ("-DOCSTART- -X- -X- O\n\n", {}, r"x.txt: no sentences"),
], ids=["not-bio", "not-in-tags", "one-column", "no-sentences"])
def test_bio_errors(tmp_path, content, kwargs, message):
    with pytest.raises(LabelError, match=message):
        read_bio(write(tmp_path / "x.txt", content), **kwargs)


# --- folder helpers on hand-made folders ----------------------------------------------------------

def test_sib200_folder_helpers(tmp_path):
    lang = tmp_path / "sib200" / "deu_Latn"
    lang.mkdir(parents=True)
    write(lang / "test.tsv", "index_id\tcategory\ttext\n3\ttravel\tEine Reise.\n")
    (tmp_path / "sib200" / "empty_Latn").mkdir()  # no test.tsv: not a language
    assert sib200_languages(tmp_path) == ["deu_Latn"] == sib200_languages(tmp_path / "sib200")
    assert read_sib200(tmp_path, "deu_Latn", "test") == [
        LabelledText("Eine Reise.", "travel", None, "3", f"{lang / 'test.tsv'}:2")]
    with pytest.raises(LabelError, match=r"deu_Latn has no dev.tsv \(it holds: test.tsv\)"):
        read_sib200(tmp_path, "deu_Latn", "dev")
    with pytest.raises(LabelError, match=r"no SIB-200 language 'deu_Latm' .*did you mean deu_Latn"):
        read_sib200(tmp_path, "deu_Latm", "test")
    with pytest.raises(LabelError, match=r"no SIB-200 split 'valid' .*the splits are train, dev, test"):
        read_sib200(tmp_path, "deu_Latn", "valid")
    write(lang / "test.tsv", "index_id\tcategory\ttext\n3\tcooking\tKochen.\n")
    with pytest.raises(LabelError, match=r"test.tsv:2: label 'cooking' \(column 'category'\) is not one of the 7"):
        read_sib200(tmp_path, "deu_Latn", "test")


def test_ud_treebanks_finds_any_treebank_by_file_name(tmp_path):
    bank = tmp_path / "ud" / "UD_Toy-Bank"
    bank.mkdir(parents=True)
    write(bank / "xx_bank-ud-train.conllu", conllu(word("1", "a")))
    write(bank / "LICENSE.txt", "CC")
    (tmp_path / "ud" / "UD_Empty").mkdir()
    assert ud_treebanks(tmp_path) == {"UD_Toy-Bank": {"train": bank / "xx_bank-ud-train.conllu"}}
    assert read_ud(tmp_path, "UD_Toy-Bank", "train") == [
        TaggedSentence(("a",), ("NOUN",), f"{bank}/xx_bank-ud-train.conllu:1")]
    with pytest.raises(LabelError, match=r"UD_Toy-Bank has no \*-ud-test.conllu file \(it holds: LICENSE.txt, "
                                         r"xx_bank-ud-train.conllu\)"):
        read_ud(tmp_path, "UD_Toy-Bank", "test")
    with pytest.raises(LabelError, match=r"no UD treebank 'UD_Toy-Bnk' .*did you mean UD_Toy-Bank"):
        read_ud(tmp_path, "UD_Toy-Bnk", "train")
    assert ud_treebanks(tmp_path / "nowhere") == {}


# --- the real mirrors -----------------------------------------------------------------------------

@pytest.fixture
def sib200_data(shared_data) -> Path:
    if not (shared_data / "sib200").is_dir():
        pytest.skip(f"no sib200/ in {shared_data}")
    return shared_data


@pytest.fixture
def ud_data(shared_data) -> Path:
    if not (shared_data / "ud").is_dir():
        pytest.skip(f"no ud/ in {shared_data}")
    return shared_data


def test_sib200_english_counts(sib200_data):
    counts = {split: len(read_sib200(sib200_data, "eng_Latn", split)) for split in ("train", "dev", "test")}
    assert counts == {"train": 701, "dev": 99, "test": 204}
    first = read_sib200(sib200_data, "eng_Latn", "train")[0]
    assert (first.id, first.label, first.text[:26]) == ("431", "geography", "Turkey is encircled by sea")
    assert len(sib200_languages(sib200_data)) == 30 and "eng_Latn" in sib200_languages(sib200_data)


def test_ewt_dev_counts_words_not_ranges_or_empty_nodes(ud_data):
    sentences = read_ud(ud_data, "UD_English-EWT", "dev")
    assert len(sentences) == 2001
    assert sum(len(s.words) for s in sentences) == 25147  # integer-ID lines
    # The mirror README's 25,510 "tokens" counts every word line: 25,147 words + 359 ranges + 4 empty nodes.
    path = ud_treebanks(ud_data)["UD_English-EWT"]["dev"]
    ids = [line.split("\t", 1)[0] for line in path.read_text(encoding="utf-8").splitlines()
           if line and not line.startswith("#")]
    assert (len(ids), sum("-" in i for i in ids), sum("." in i for i in ids)) == (25510, 359, 4)
    assert sentences[0].words[:3] == ("From", "the", "AP") and sentences[0].tags[:3] == ("ADP", "DET", "PROPN")


def test_every_treebank_test_file_reads(ud_data):
    treebanks = ud_treebanks(ud_data)
    assert {"UD_English-EWT", "UD_German-GSD", "UD_French-GSD", "UD_Spanish-GSD", "UD_Russian-GSD",
            "UD_Chinese-GSD", "UD_Japanese-GSD"} <= set(treebanks)
    for name, splits in treebanks.items():
        sentences = read_conllu(splits["test"])
        assert sentences and all(len(s.words) == len(s.tags) > 0 for s in sentences), name


def test_download_catalog_matches_the_mirror(sib200_data, ud_data, tmp_path):
    sets = standard_sets()
    assert len(sets["sib200"]) == 90 and len(sets["ud"]) == 14
    assert sets["sib200"]["eng_Latn/dev.tsv"]["url"] == ("https://raw.githubusercontent.com/dadelani/sib-200/"
                                                         "593cea88519930f776c1a4a1980b6a35b39dca57/data/annotated/"
                                                         "eng_Latn/dev.tsv")
    assert sets["ud"]["UD_English-EWT/en_ewt-ud-dev.conllu"] == {
        "sha256": "531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6",
        "url": "https://raw.githubusercontent.com/UniversalDependencies/UD_English-EWT/"
               "15d613d8447b3478787d4c278730a1e48a945efb/en_ewt-ud-dev.conllu"}
    for name in ("sib200", "ud"):
        for rel, entry in sets[name].items():
            assert hashlib.sha256((sib200_data / name / rel).read_bytes()).hexdigest() == entry["sha256"], rel
    ensure_standard_set("sib200", tmp_path, mirror=sib200_data.as_uri(),
                        files=["eng_Latn/dev.tsv", "eng_Latn/test.tsv"])
    assert len(read_sib200(tmp_path, "eng_Latn", "dev")) == 99
