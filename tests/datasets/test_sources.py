"""Data sources: typed options with errors that name the recipe line, documents from blank-line
text and CoNLL-U ``# newdoc`` boundaries, and tokenised documents over one flat corpus."""

from __future__ import annotations

import pytest

from babelzoo.datasets.sources import BuildContext, chunk_documents, parse_source
from babelzoo.datasets.wordpiece import WordPieceTokenizer
from babelzoo.errors import ConfigError
from babelzoo.typed import Where
from babelzoo.yaml_files import key_lines

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "d", "e", "f"]


def test_chunk_documents_joins_a_short_tail_and_drops_one_sentence_documents():
    assert chunk_documents([list("abcdefg"), ["x"], list("pq")], 3, 2) == [list("abc"), list("defg"), list("pq")]


def test_blank_line_documents_tokenise_into_document_examples(tmp_path):
    path = tmp_path / "docs.txt"
    path.write_text("a b\nc\n\nd\ne f\nf\n\n\nb\n", encoding="utf-8")
    source = parse_source({"kind": "documents", "path": str(path), "lang": "en"}, Where("data.sop[0]"))
    assert source.read_documents() == {"en": [["a b", "c"], ["d", "e f", "f"], ["b"]]}
    tokenizer = WordPieceTokenizer(WORDS)
    data = source.dataset(BuildContext(tokenizer, "t", tmp_path / "cache"))
    assert len(data) == 2  # the one-sentence document cannot make a sentence pair
    assert [[list(s.ids) for s in doc] for doc in (data[0], data[1])] == [[[5, 6], [7]], [[8], [9, 10], [10]]]
    assert {s.lang for s in data[1]} == {"en"}


def test_conllu_documents_start_at_newdoc(tmp_path):
    def sentence(text, newdoc=False):
        head = ["# newdoc id = d"] if newdoc else []
        words = [f"{i}\t{w}\t_\tX\t_\t_\t0\tdep\t_\t_" for i, w in enumerate(text.split(), 1)]
        return "\n".join([*head, f"# text = {text}", *words]) + "\n\n"

    path = tmp_path / "t.conllu"
    path.write_text(sentence("a b", True) + sentence("c") + sentence("d", True) + sentence("e f"), encoding="utf-8")
    source = parse_source({"kind": "documents", "path": str(path), "lang": "en", "format": "conllu"}, Where("x"))
    assert source.read_documents() == {"en": [["a b", "c"], ["d", "e f"]]}


def test_a_prefix_goes_before_every_sentence_of_both_sides_and_is_tokenised_with_it(tmp_path):
    (tmp_path / "src.txt").write_text("a b\nc\n", encoding="utf-8")
    (tmp_path / "tgt.txt").write_text("d\ne f\n", encoding="utf-8")
    spec = {"kind": "parallel", "src": str(tmp_path / "src.txt"), "tgt": str(tmp_path / "tgt.txt"),
            "src_lang": "en", "tgt_lang": "de"}
    plain = parse_source(spec, Where("data.x[0]"))
    framed = parse_source({**spec, "prefix": "f "}, Where("data.x[0]"))
    assert framed.texts(None) == {"en": ["f a b", "f c"], "de": ["f d", "f e f"]}
    context = BuildContext(WordPieceTokenizer(WORDS), "t", tmp_path / "cache")
    a, b = plain.dataset(context), framed.dataset(context)  # one cache: the prefixed text is its own entry
    assert [list(a[0].src), list(a[0].tgt)] == [[5, 6], [8]]
    assert [list(b[0].src), list(b[0].tgt), list(b[1].tgt)] == [[10, 5, 6], [10, 8], [10, 9, 10]]
    text = parse_source({"kind": "text", "path": str(tmp_path / "src.txt"), "lang": "en", "prefix": "e "}, Where("y"))
    assert text.texts(None) == {"en": ["e a b", "e c"]}


def test_source_errors_name_the_file_line_and_key(tmp_path):
    text = "data:\n  sop:\n    - kind: documents\n      path: d.txt\n      lang: en\n      format: html\n"
    where = Where("data.sop[0]", "r.yaml", key_lines(text))
    with pytest.raises(ConfigError, match=r"r.yaml:6 data.sop\[0\].format='html' must be one of 'blank_line', "
                                          r"'conllu'"):
        parse_source({"kind": "documents", "path": "d.txt", "lang": "en", "format": "html"}, where)
    with pytest.raises(ConfigError, match=r"data.sop\[0\]: source kind 'documents' needs lang"):
        parse_source({"kind": "documents", "path": "d.txt"}, Where("data.sop[0]"))
    with pytest.raises(ConfigError, match=r"data.sop\[0\].max_sentence: unknown source kind 'documents' key "
                                          r"'max_sentence'; did you mean 'max_sentences'"):
        parse_source({"kind": "documents", "path": "d.txt", "lang": "en", "max_sentence": 3}, Where("data.sop[0]"))


PLUG_IN = '''
from dataclasses import dataclass
from typing import ClassVar

from babelzoo.datasets.sources import CorpusSource, register_source
from babelzoo.datasets.text import MonolingualCorpus, ReadReport


@register_source
@dataclass
class Shouting(CorpusSource):
    """{kind: shouting, words: [a, b]}: each word upper-cased, a sentence each."""

    kind: ClassVar[str] = "shouting"
    provides: ClassVar[str] = "sentence"
    words: list

    def read(self):
        return [MonolingualCorpus("en", [w.upper() for w in self.words], ReadReport(("words",), 2, 2))]
'''


def test_an_installed_plug_in_source_is_found_through_its_entry_point(tmp_path, monkeypatch):
    import importlib

    from babelzoo.datasets.sources import SOURCES

    (tmp_path / "shouting_source.py").write_text(PLUG_IN, encoding="utf-8")
    info = tmp_path / "shouting-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shouting\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[babelzoo.data_sources]\nshouting = shouting_source\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    try:
        source = parse_source({"kind": "shouting", "words": ["hi", "yo"]}, Where("data.mlm[0]"))
        assert source.provides == "sentence" and source.texts(None) == {"en": ["HI", "YO"]}
    finally:
        SOURCES._entries.pop("shouting", None)
