"""Corpus readers: real standard sets, and one test per kind of bad input."""

from __future__ import annotations

import gzip

import pytest

from babelzoo.datasets.text import (CorpusError, count_lines, iter_lines, multi30k_pairs, multi30k_splits,
                                    read_monolingual, read_parallel, read_parallel_tsv, tatoeba_languages,
                                    tatoeba_pairs)


def write(path, text: str | bytes, gz: bool = False):
    data = text.encode("utf-8") if isinstance(text, str) else text
    if gz:
        with gzip.open(path, "wb") as handle:
            handle.write(data)
    else:
        path.write_bytes(data)
    return path


# --- real data ---------------------------------------------------------------------------------

@pytest.mark.parametrize("split,count", [("test_2016_flickr", 1000), ("val", 1014), ("train", 29000)])
def test_multi30k_counts(shared_data, split, count):
    corpus = multi30k_pairs(shared_data, split, "en", "de")
    assert (corpus.src_lang, corpus.tgt_lang) == ("en", "de")
    assert len(corpus) == count
    assert corpus.report.lines == count and corpus.report.kept == count and corpus.report.skipped == 0


def test_multi30k_content_and_layout(shared_data):
    corpus = multi30k_pairs(shared_data / "multi30k", "test_2016_flickr", "en", "de")  # folder itself works too
    assert corpus.pairs[0] == ("A man in an orange hat starring at something.",
                               "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.")
    assert multi30k_pairs(shared_data, "val", "cs", "fr").pairs[-1][1] == (
        "Deux femmes portant du rouge et un homme sortant de toilettes portables.")
    splits = multi30k_splits(shared_data)
    assert splits["test_2016_flickr"] == ["cs", "de", "en", "fr"]
    swapped = corpus.swapped()
    assert swapped.src_lang == "de" and swapped.pairs[0] == corpus.pairs[0][::-1]


def test_multi30k_unknown_split_and_language(shared_data):
    with pytest.raises(CorpusError, match=r"no Multi30k split 'tset_2016_flickr'.*did you mean test_2016_flickr"):
        multi30k_pairs(shared_data, "tset_2016_flickr", "en", "de")
    with pytest.raises(CorpusError, match=r"no Multi30k val language 'ja'.*available: cs, de, en, fr"):
        multi30k_pairs(shared_data, "val", "en", "ja")


def test_tatoeba(shared_data):
    langs = tatoeba_languages(shared_data)
    assert len(langs) == 106 and "deu" in langs and "eng" not in langs
    corpus = tatoeba_pairs(shared_data, "deu")
    assert (corpus.src_lang, corpus.tgt_lang, len(corpus)) == ("deu", "eng", 1000)
    assert corpus.pairs[0] == ("Maria sagte, sie wisse nicht, wo Tom sei.", "Mary said she didn't know where Tom was.")
    assert corpus.pairs[-1][0] == "Kann ich mit Kreditkarte bezahlen?"
    assert len(tatoeba_pairs(shared_data, "tzl")) == 104  # not every set has 1000 lines
    with pytest.raises(CorpusError, match=r"no Tatoeba language 'deutsch'"):
        tatoeba_pairs(shared_data, "deutsch")


# --- well-formed files -------------------------------------------------------------------------

def test_monolingual_plain_and_gzip_agree(tmp_path):
    text = "\ufeffErste Zeile\r\n  zweite Zeile  \ndritte ohne Zeilenende"
    plain = read_monolingual(write(tmp_path / "a.de", text), "de")
    zipped = read_monolingual(write(tmp_path / "a.de.txt", text, gz=True), "de")  # gzip found by magic
    assert plain.sentences == zipped.sentences == ["Erste Zeile", "zweite Zeile", "dritte ohne Zeilenende"]
    assert count_lines(tmp_path / "a.de") == count_lines(tmp_path / "a.de.txt") == 3
    both = read_monolingual([tmp_path / "a.de", tmp_path / "a.de.txt"], "de")
    assert len(both) == 6 and both.report.lines == 6 and both.lang == "de"


def test_lines_split_only_on_newline(tmp_path):
    # U+2028 and form feeds are text inside a line, as for `wc -l`; str.splitlines would split them
    path = write(tmp_path / "x.txt", "a\u2028b\x0cc\nd\n")
    assert [t for _, t in iter_lines(path)] == ["a\u2028b\x0cc", "d"]
    assert count_lines(path) == 2


def test_parallel_gzip_pair(tmp_path):
    src = write(tmp_path / "train.en.gz", "a dog\na cat\n", gz=True)
    tgt = write(tmp_path / "train.de.gz", "ein Hund\neine Katze\n", gz=True)
    corpus = read_parallel(src, tgt, "en", "de")
    assert corpus.pairs == [("a dog", "ein Hund"), ("a cat", "eine Katze")]
    assert corpus.sources == ["a dog", "a cat"] and corpus.targets == ["ein Hund", "eine Katze"]


def test_tsv_positional_and_named(tmp_path):
    path = write(tmp_path / "pairs.tsv", "id\ten\tfr\n1\tHello\tBonjour\n2\tThank you\tMerci\n")
    named = read_parallel_tsv(path, src_column="en", tgt_column="fr")
    assert (named.src_lang, named.tgt_lang) == ("en", "fr")
    assert named.pairs == [("Hello", "Bonjour"), ("Thank you", "Merci")]
    assert named.report.header == 1 and named.report.lines == 3 and named.report.kept == 2
    positional = read_parallel_tsv(path, "fr", "en", src_column=2, tgt_column=1, header=True)
    assert positional.pairs == [("Bonjour", "Hello"), ("Merci", "Thank you")]
    no_header = read_parallel_tsv(write(tmp_path / "b.tsv", "x\ty\n"), "a", "b")
    assert no_header.pairs == [("x", "y")]


def test_tsv_unknown_column(tmp_path):
    path = write(tmp_path / "pairs.tsv", "eng\tfra\nHello\tBonjour\n")
    with pytest.raises(CorpusError, match=r"pairs.tsv:1: no column named 'fr'.*did you mean 'fra'"):
        read_parallel_tsv(path, src_column="eng", tgt_column="fr")


# --- bad input: one test per case --------------------------------------------------------------

def test_parallel_line_count_mismatch_names_both_files_and_counts(tmp_path):
    src = write(tmp_path / "val.en", "one\ntwo\nthree\n")
    tgt = write(tmp_path / "val.de.gz", "eins\nzwei\n", gz=True)
    with pytest.raises(CorpusError) as err:
        read_parallel(src, tgt, "en", "de")
    message = str(err.value)
    assert f"{src} has 3 lines" in message and f"{tgt} has 2 lines" in message


@pytest.mark.parametrize("gz", [False, True])
def test_invalid_utf8_names_file_and_line(tmp_path, gz):
    path = write(tmp_path / "bad.fr", b"bonjour\nmerci\nd\xe9j\xe0 vu\n", gz=gz)  # latin-1 bytes on line 3
    with pytest.raises(CorpusError, match=rf"{path}:3: invalid UTF-8"):
        read_monolingual(path, "fr")


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("encoding, said", [
    ("utf-16", "UTF-16 text (byte-order mark 0xff 0xfe)"),
    ("utf-16-le", "UTF-16 text (little-endian, no byte-order mark)"),  # decodes as UTF-8, NULs and all
    ("utf-32-be", "UTF-32 text (big-endian, no byte-order mark)"),
])
def test_a_utf16_or_utf32_corpus_is_named_as_such(tmp_path, gz, encoding, said):
    path = write(tmp_path / "notepad.fr", "bonjour\nmerci\ndéjà vu\n".encode(encoding), gz=gz)
    with pytest.raises(CorpusError) as err:
        read_monolingual(path, "fr")
    assert str(err.value) == f"{path}: {said}; save it as UTF-8"


def test_invalid_utf8_in_parallel_target(tmp_path):
    src = write(tmp_path / "a.en", "yes\nno\n")
    tgt = write(tmp_path / "a.fr", b"oui\nn\xffon\n")
    with pytest.raises(CorpusError, match=rf"{tgt}:2: invalid UTF-8"):
        read_parallel(src, tgt, "en", "fr")


def test_monolingual_empty_lines_policies(tmp_path):
    path = write(tmp_path / "m.en", "a\n\nb\n   \nc\n")
    skipped = read_monolingual(path, "en")  # default: skip and count
    assert skipped.sentences == ["a", "b", "c"]
    report = skipped.report
    assert (report.lines, report.kept, report.skipped, report.empty[str(path)]) == (5, 3, 2, 2)
    assert "skipped 2" in str(report)
    kept = read_monolingual(path, "en", empty="keep")
    assert kept.sentences == ["a", "", "b", "", "c"] and kept.report.empty[str(path)] == 2
    with pytest.raises(CorpusError, match=rf"{path}:2: empty line"):
        read_monolingual(path, "en", empty="error")
    with pytest.raises(ValueError, match="empty='drop'"):
        read_monolingual(path, "en", empty="drop")


def test_parallel_empty_side_skips_the_pair(tmp_path):
    src = write(tmp_path / "p.en", "a\n\nc\nd\n")
    tgt = write(tmp_path / "p.de", "A\nB\n\nD\n")
    corpus = read_parallel(src, tgt, "en", "de")
    assert corpus.pairs == [("a", "A"), ("d", "D")]  # alignment of the rest is kept
    report = corpus.report
    assert (report.lines, report.kept, report.skipped) == (4, 2, 2)
    assert report.empty == {str(src): 1, str(tgt): 1}
    with pytest.raises(CorpusError, match=rf"{src}:2: empty line"):
        read_parallel(src, tgt, "en", "de", empty="error")
    assert len(read_parallel(src, tgt, "en", "de", empty="keep")) == 4


def test_tsv_wrong_field_count_names_file_and_line(tmp_path):
    path = write(tmp_path / "p.tsv", "hello\tbonjour\nyes\toui\textra\n")
    with pytest.raises(CorpusError, match=rf"{path}:2: expected 2 tab-separated fields, found 3"):
        read_parallel_tsv(path, "en", "fr")
    header = write(tmp_path / "h.tsv", "en\tfr\nhello\tbonjour\nno tab here\n")
    with pytest.raises(CorpusError, match=rf"{header}:3: expected 2 tab-separated fields, found 1"):
        read_parallel_tsv(header, src_column="en", tgt_column="fr")


def test_tsv_empty_field_and_blank_line_follow_policy(tmp_path):
    # a trailing tab is an empty last field (not a missing one), a blank line an empty record
    path = write(tmp_path / "p.tsv", "hello\tbonjour\nthanks\t\n\nyes\toui\n")
    corpus = read_parallel_tsv(path, "en", "fr")
    assert corpus.pairs == [("hello", "bonjour"), ("yes", "oui")]
    assert (corpus.report.lines, corpus.report.skipped, corpus.report.empty[str(path)]) == (4, 2, 2)
    with pytest.raises(CorpusError, match=rf"{path}:2: empty line or field"):
        read_parallel_tsv(path, "en", "fr", empty="error")


@pytest.mark.parametrize("damage", ["truncated", "corrupted"])
def test_damaged_gzip_is_a_clear_error(tmp_path, damage):
    good = bytearray(gzip.compress(b"".join(b"sentence %d\n" % i for i in range(20000))))
    if damage == "truncated":
        good = good[: len(good) // 2]
    else:
        good[200:260] = bytes(60)
    path = write(tmp_path / "bad.en.gz", bytes(good))
    with pytest.raises(CorpusError, match=rf"{path}: cannot read"):
        read_monolingual(path, "en")
    with pytest.raises(CorpusError, match=rf"{path}: cannot read"):
        count_lines(path)


def test_missing_file(tmp_path):
    with pytest.raises(CorpusError, match="no such file"):
        read_monolingual(tmp_path / "nope.txt", "en")
