"""Sentencepiece tokenizers trained on real multilingual text (Tatoeba), the shared Tokenizer
behaviour (framing, batching, truncation, padding, decoding, saving), and XLM-R import with
exact parity against Hugging Face's XLMRobertaTokenizer."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch

from babelzoo.datasets.specials import language_tag
from babelzoo.datasets.sampling import sampling_probabilities
from babelzoo.datasets.spm import SentencePieceTokenizer
from babelzoo.datasets.tokenizer import Tokenizer, TokenizerError, load_tokenizer

# Tatoeba code -> the code the tokenizer uses; Swahili has 390 lines, the others 1000
CORPUS = {"de": "deu", "fr": "fra", "ru": "rus", "el": "ell", "sw": "swh"}


def tatoeba(shared_data: Path, code: str) -> Path:
    return shared_data / "tatoeba" / f"tatoeba.{code}-eng.{code}"


@pytest.fixture(scope="module")
def corpus(shared_data) -> dict:
    files = {lang: tatoeba(shared_data, code) for lang, code in CORPUS.items()}
    files["en"] = shared_data / "tatoeba" / "tatoeba.deu-eng.eng"
    return files


@pytest.fixture(scope="module")
def unigram(corpus) -> SentencePieceTokenizer:
    return SentencePieceTokenizer.train(corpus, vocab_size=1000, model_type="unigram", alpha=0.3, seed=0)


@pytest.fixture(scope="module")
def held_out(shared_data) -> list[str]:
    """Real sentences in the training languages (English sides of other Tatoeba files)."""
    out = []
    for code in ("fra", "spa", "rus"):
        out += (shared_data / "tatoeba" / f"tatoeba.{code}-eng.eng").read_text(encoding="utf-8").splitlines()[:40]
    return out


def lines(path: Path, n: int) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()[:n]


# ---- training ---------------------------------------------------------------------------------

def test_specials_and_language_tags_at_fixed_ids(unigram):
    langs = sorted(["de", "fr", "ru", "el", "sw", "en"])
    assert unigram.languages == tuple(langs)
    assert unigram.convert_ids_to_tokens(range(5)) == ["<pad>", "<s>", "</s>", "<unk>", "<mask>"]
    assert unigram.convert_ids_to_tokens(range(5, 11)) == [language_tag(lang) for lang in langs]
    s = unigram.specials
    assert (s.pad, s.cls, s.sep, s.unk, s.mask, s.vocab_size) == (0, 1, 2, 3, 4, 1000)
    assert s.languages == {lang: i for i, lang in enumerate(langs)}
    assert s.all_special() == frozenset(range(11))


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_round_trip_on_real_multilingual_text(corpus, unigram, model_type):
    tok = unigram if model_type == "unigram" else SentencePieceTokenizer.train(corpus, 1000, model_type="bpe")
    texts = [t for path in corpus.values() for t in lines(path, 60)]
    checked = 0
    for text in texts:
        ids = tok.encode(text)
        assert ids[0] == 1 and ids[-1] == 2
        if tok.specials.unk in ids:  # a character outside the 99.95% coverage
            continue
        assert tok.decode(ids) == tok.normalize(text)
        checked += 1
    assert checked >= 0.95 * len(texts)
    pieces = tok.tokenize("Guten Morgen, wie geht es dir?")
    assert "".join(pieces).replace("\u2581", " ").strip() == "Guten Morgen, wie geht es dir?"


def test_training_sample_follows_alpha_and_upsamples_low_resource(unigram):
    stats = unigram.training["languages"]
    counts = {lang: s["lines"] - s["empty"] - s["too_long"] for lang, s in stats.items()}
    total = sum(counts.values())
    q = sampling_probabilities(counts, 0.3)
    assert unigram.training["sentences"] == total == 5390
    # p(sw) = 390/5390 = 0.072; with α = 0.3, q(sw) = 0.131 (hand-computed from the counts)
    assert stats["sw"]["probability"] == pytest.approx(0.1310, abs=1e-4) == q["sw"]
    for lang, s in stats.items():
        assert s["probability"] == pytest.approx(q[lang])
        sigma = (total * q[lang] * (1 - q[lang])) ** 0.5  # multinomial draw
        assert abs(s["sampled"] - q[lang] * total) <= 4 * sigma
    assert counts["sw"] == 390 and stats["sw"]["sampled"] > 390  # Swahili is upsampled...
    assert stats["de"]["sampled"] < 1000  # ...and the 1000-line languages downsampled


def test_training_is_deterministic_given_the_seed(corpus):
    small = {lang: corpus[lang] for lang in ("de", "sw")}
    a = SentencePieceTokenizer.train(small, 500, seed=3)
    b = SentencePieceTokenizer.train(small, 500, seed=3)
    c = SentencePieceTokenizer.train(small, 500, seed=4)
    assert a.model_proto == b.model_proto
    assert a.model_proto != c.model_proto


def test_training_accepts_sentences_and_counts_what_it_skips(tmp_path):
    text = ["Der Hund schläft.", "", "  ", "Die Katze spielt im Garten.", "x" * 5000] * 40
    tok = SentencePieceTokenizer.train({"de": text, "fr": ["Le chien dort."] * 50}, vocab_size=60,
                                       hard_vocab_limit=False)
    de = tok.training["languages"]["de"]
    assert (de["lines"], de["empty"], de["too_long"]) == (200, 80, 40)
    assert de["sampled"] + tok.training["languages"]["fr"]["sampled"] == tok.training["sentences"] == 80 + 50
    bad = tmp_path / "bad.txt"
    bad.write_bytes("eins\nzwei\n".encode() + b"dr\xffei\n")
    with pytest.raises(TokenizerError, match=r"bad\.txt:3: invalid UTF-8"):
        SentencePieceTokenizer.train({"de": bad}, 60)
    with pytest.raises(TokenizerError, match=r"not in languages"):
        SentencePieceTokenizer.train({"de": text}, 60, languages=["fr"])


def test_sentinels_are_reserved_after_the_language_tags_and_survive_saving(tmp_path):
    corpus = {"de": ["Der Hund schläft.", "Die Katze spielt im Garten."] * 30, "fr": ["Le chien dort."] * 50}
    tok = SentencePieceTokenizer.train(corpus, vocab_size=80, sentinels=3, hard_vocab_limit=False)
    assert tok.convert_ids_to_tokens(range(5, 10)) == ["[de]", "[fr]", "<extra_id_0>", "<extra_id_1>", "<extra_id_2>"]
    s = tok.specials
    assert s.language_tags == {"de": 5, "fr": 6} and s.sentinels == (7, 8, 9)
    assert s.all_special() >= frozenset(range(10))
    assert tok.encode("Hund <extra_id_1> Katze", add_special_tokens=False).count(8) == 1  # one piece, never split
    tok.save(tmp_path)
    assert Tokenizer.load(tmp_path).specials == s
    plain = SentencePieceTokenizer.train(corpus, vocab_size=80, hard_vocab_limit=False)
    assert plain.specials.sentinels == () and plain.specials.language_tags == {"de": 5, "fr": 6}


# ---- framing, batching, decoding ----------------------------------------------------------------

def test_encode_and_pair_framing(unigram):
    a, b = unigram.encode("Guten Tag", add_special_tokens=False), unigram.encode("Bonjour", add_special_tokens=False)
    assert unigram.encode("Guten Tag") == [1, *a, 2]
    ids, segments = unigram.encode_pair("Guten Tag", "Bonjour")
    assert ids == [1, *a, 2, *b, 2]
    assert segments == [0] * (len(a) + 2) + [1] * (len(b) + 1)
    assert unigram.tokenize("Guten <mask> Tag")[1:].count("<mask>") == 1
    assert unigram.encode("<mask>", add_special_tokens=False) == [4]


def test_language_tags_and_language_ids(corpus):
    tok = SentencePieceTokenizer.train({k: corpus[k] for k in ("de", "fr")}, 500, prefix_language_tag=True)
    de, fr = tok.specials.languages["de"], tok.specials.languages["fr"]
    body = tok.encode("Hallo", add_special_tokens=False)
    assert tok.encode("Hallo", lang="de") == [1, tok.token_to_id("[de]"), *body, 2]
    assert tok.encode("Hallo") == [1, *body, 2]
    batch = tok.batch_encode(["Hallo", "Bonjour tout le monde"], langs=["de", "fr"])
    assert batch["input_ids"][1, 1].item() == tok.token_to_id("[fr]")
    assert batch["language_ids"][0].tolist() == [de] * batch["input_ids"].shape[1]
    assert batch["language_ids"][1].tolist() == [fr] * batch["input_ids"].shape[1]
    pair = tok.batch_encode(["Hallo"], ["Bonjour"], langs=[("de", "fr")])
    n_first = 1 + 1 + len(body) + 1
    assert pair["language_ids"][0].tolist()[:n_first] == [de] * n_first
    assert set(pair["language_ids"][0].tolist()[n_first:]) == {fr}
    assert tok.decode(tok.encode("Hallo", lang="de")) == "Hallo"
    with pytest.raises(TokenizerError, match=r"unknown language 'xx'.*de, fr"):
        tok.encode("Hallo", lang="xx")


def test_batch_encode_padding_and_truncation(unigram, held_out):
    texts = held_out[:8]
    singles = [unigram.encode(t) for t in texts]
    batch = unigram.batch_encode(texts)
    width = max(map(len, singles))
    assert batch["input_ids"].shape == (8, width) and batch["input_ids"].dtype == torch.long
    for row, ids, mask in zip(batch["input_ids"].tolist(), singles, batch["attention_mask"].tolist()):
        assert row == ids + [0] * (width - len(ids))
        assert mask == [1] * len(ids) + [0] * (width - len(ids))
    assert batch["segment_ids"].eq(0).all()
    short = unigram.batch_encode(texts, max_length=6, padding="max_length")
    assert short["input_ids"].shape == (8, 6)
    for row, ids in zip(short["input_ids"].tolist(), singles):
        assert row == (ids[:5] + [2] if len(ids) > 6 else ids + [0] * (6 - len(ids)))
    wide = unigram.batch_encode(texts[:2], max_length=64, padding="max_length")
    assert wide["input_ids"].shape == (2, 64)
    ragged = unigram.batch_encode(texts[:3], padding=False, return_tensors=None)
    assert ragged["input_ids"] == singles[:3]
    with pytest.raises(TokenizerError, match="different lengths"):
        unigram.batch_encode(texts[:3], padding=False)
    with pytest.raises(TokenizerError, match="truncation=True"):
        unigram.batch_encode(texts[:3], max_length=4, truncation=False)
    assert unigram.batch_encode([])["input_ids"].shape == (0, 0)
    assert unigram.batch_encode([], max_length=5, padding="max_length")["attention_mask"].shape == (0, 5)
    with pytest.raises(TokenizerError, match="no room"):
        unigram.batch_encode(texts[:1], max_length=1)


def test_pair_truncation_longest_first(unigram):
    a = "eins zwei drei vier fünf sechs sieben acht neun zehn"
    b = "un deux"
    ids_a, ids_b = (unigram.encode(t, add_special_tokens=False) for t in (a, b))
    out = unigram.batch_encode([a], [b], max_length=len(ids_b) + 3 + 4)
    assert out["input_ids"][0].tolist() == [1, *ids_a[:4], 2, *ids_b, 2]  # only the longer side is cut
    out = unigram.batch_encode([a], [a], max_length=3 + 5)  # both cut: 2 and 3 tokens
    assert out["input_ids"][0].tolist() == [1, *ids_a[:2], 2, *ids_a[:3], 2]


def test_decode_and_word_starts(unigram):
    ids = unigram.encode("Das ist gut.")
    assert unigram.decode(ids) == "Das ist gut."
    assert unigram.decode(torch.tensor(ids), skip_special_tokens=False) == "<s> Das ist gut. </s>"
    assert unigram.batch_decode([ids, ids]) == ["Das ist gut."] * 2
    with pytest.raises(TokenizerError, match="outside the vocabulary"):
        unigram.decode([5000])
    starts = unigram.word_starts()
    assert starts.shape == (1000,) and starts.dtype == torch.bool
    pieces = unigram.convert_ids_to_tokens(range(1000))
    assert starts[11:].tolist() == [p.startswith("\u2581") for p in pieces[11:]]
    assert starts[:11].all()


# ---- saving and loading -----------------------------------------------------------------------

def test_save_load_round_trip(unigram, tmp_path, held_out):
    unigram.save(tmp_path)
    meta = json.loads((tmp_path / "babelzoo_tokenizer.json").read_text(encoding="utf-8"))
    assert meta["type"] == "sentencepiece" and meta["languages"] == list(unigram.languages)
    assert meta["specials"] == {"pad": 0, "cls": 1, "sep": 2, "unk": 3, "mask": 4, "vocab_size": 1000}
    loaded = Tokenizer.load(tmp_path)
    assert isinstance(loaded, SentencePieceTokenizer)
    assert loaded.specials == unigram.specials and loaded.training == unigram.training
    assert [loaded.encode(t) for t in held_out] == [unigram.encode(t) for t in held_out]


def test_load_tokenizer_none_and_errors(unigram, tmp_path):
    assert load_tokenizer(tmp_path) is None
    with pytest.raises(TokenizerError, match="no tokenizer files"):
        Tokenizer.load(tmp_path)
    unigram.save(tmp_path)
    meta = json.loads((tmp_path / "babelzoo_tokenizer.json").read_text())
    meta["specials"]["mask"] = 7
    (tmp_path / "babelzoo_tokenizer.json").write_text(json.dumps(meta))
    with pytest.raises(TokenizerError, match=r"babelzoo_tokenizer\.json: specials do not match.*mask"):
        load_tokenizer(tmp_path)
    (tmp_path / "babelzoo_tokenizer.json").write_text('{"format": "babelzoo-tokenizer",\n "version": }')
    with pytest.raises(TokenizerError, match=r"babelzoo_tokenizer\.json:2: invalid JSON"):
        load_tokenizer(tmp_path)


def test_saved_and_loaded_with_the_model(unigram, tmp_path):
    import babelzoo

    model = babelzoo.create_model("xlm_tiny", vocab_size=unigram.vocab_size, num_languages=len(unigram.languages))
    model.save_pretrained(tmp_path, tokenizer=unigram)
    loaded = babelzoo.from_pretrained(tmp_path)
    assert loaded.tokenizer.encode("Guten Tag") == unigram.encode("Guten Tag")


# ---- XLM-R import ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def xlmr_dir(corpus, tmp_path_factory) -> Path:
    """A small unigram model with XLM-R's sentencepiece ids (<unk>=0, <s>=1, </s>=2, no <pad>)."""
    import sentencepiece as spm

    sentences = [t for path in corpus.values() for t in lines(path, 1000)]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_writer=model, vocab_size=1500,
                                   model_type="unigram", num_threads=1, minloglevel=2)
    directory = tmp_path_factory.mktemp("xlmr")
    (directory / "sentencepiece.bpe.model").write_bytes(model.getvalue())
    return directory


def test_xlmr_layout(xlmr_dir):
    tok = SentencePieceTokenizer.from_xlmr(xlmr_dir / "sentencepiece.bpe.model")
    s = tok.specials
    assert (s.cls, s.pad, s.sep, s.unk, s.mask, s.vocab_size) == (0, 1, 2, 3, 1501, 1502)
    assert tok.convert_ids_to_tokens([0, 1, 2, 3, 1501]) == ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    assert tok.id_to_token(4) == tok.sp.id_to_piece(3)  # pieces shifted by one
    ids, segments = tok.encode_pair("a", "b")
    assert ids[0] == 0 and ids.count(2) == 3 and segments == [0] * len(ids)  # <s> A </s></s> B </s>


def test_xlmr_ids_equal_hf(xlmr_dir, shared_data, tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("google.protobuf", reason="transformers needs protobuf to read a sentencepiece model")
    theirs = transformers.XLMRobertaTokenizer.from_pretrained(str(xlmr_dir))
    ours = load_tokenizer(xlmr_dir)  # a Hugging Face directory: imported with fairseq ids
    assert isinstance(ours, SentencePieceTokenizer) and ours.vocab_size == len(theirs) == 1502
    texts = []
    for code in ("deu", "fra", "rus", "ell", "swh", "spa", "cmn", "ara", "hin", "tur"):
        texts += lines(tatoeba(shared_data, code), 30)
    texts += ["Hello <mask> world", "a<mask>b", "  extra   spaces  ", "ＡＢＣ ﬁ é", "😀 emoji", ""]
    assert [ours.encode(t) for t in texts] == theirs(texts)["input_ids"]
    a, b = texts[:60], texts[60:120]
    assert [ours.encode_pair(x, y)[0] for x, y in zip(a, b)] == theirs(a, b)["input_ids"]
    ref = theirs(a, b, padding=True, truncation=True, max_length=20, return_tensors="pt")
    got = ours.batch_encode(a, b, max_length=20)
    assert torch.equal(got["input_ids"], ref["input_ids"])
    assert torch.equal(got["attention_mask"], ref["attention_mask"])
    for t in texts[:100]:
        ids = ours.encode(t)
        if ours.specials.unk not in ids:
            assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=True)
    # saved by babelzoo, exported back to Hugging Face's layout: same ids everywhere
    ours.save(tmp_path / "ckpt")
    assert load_tokenizer(tmp_path / "ckpt").encode(texts[0]) == ours.encode(texts[0])
    ours.save_hf(tmp_path / "hf")
    again = transformers.XLMRobertaTokenizer.from_pretrained(str(tmp_path / "hf"))
    assert again(texts)["input_ids"] == theirs(texts)["input_ids"]


def test_xlmr_rejects_other_layouts(unigram, tmp_path):
    (tmp_path / "m.model").write_bytes(unigram.model_proto)
    with pytest.raises(TokenizerError, match=r"m\.model: an XLM-R model has <unk>=0"):
        SentencePieceTokenizer.from_xlmr(tmp_path / "m.model")
    (tmp_path / "junk.model").write_bytes(b"not a model")
    with pytest.raises(TokenizerError, match="not a sentencepiece model"):
        SentencePieceTokenizer.from_xlmr(tmp_path / "junk.model")


# ---- ALBERT import ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def albert_dir(corpus, tmp_path_factory) -> Path:
    """A small unigram model with ALBERT's ids (<pad>=0, <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4),
    trained like ALBERT's on lower-cased, accent-stripped text."""
    import sentencepiece as spm

    from babelzoo.datasets.spm import albert_normalizer

    normalizer = albert_normalizer(lowercase=True, keep_accents=False)
    sentences = [normalizer.normalize_str(t) for path in corpus.values() for t in lines(path, 1000)]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_writer=model, vocab_size=1500,
                                   pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"],
                                   num_threads=1, minloglevel=2)
    directory = tmp_path_factory.mktemp("albert")
    (directory / "spiece.model").write_bytes(model.getvalue())
    return directory


def test_albert_ids_equal_hf(albert_dir, shared_data, tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("google.protobuf", reason="transformers needs protobuf to read a sentencepiece model")
    theirs = transformers.AlbertTokenizer.from_pretrained(str(albert_dir))
    ours = load_tokenizer(albert_dir)
    s = ours.specials
    assert (s.pad, s.unk, s.cls, s.sep, s.mask, s.vocab_size) == (0, 1, 2, 3, 4, len(theirs))
    texts = []
    for code in ("deu", "fra", "rus", "ell", "tur", "spa", "cmn", "vie"):
        texts += lines(tatoeba(shared_data, code), 25)
    texts += ["``Quoted'' text", "ΟΔΟΣ Straße İstanbul Ünïcödé", "Hello [MASK] world", "a[CLS]b", "ﬁ ＡＢＣ ①", ""]
    assert [ours.encode(t) for t in texts] == theirs(texts)["input_ids"]
    a, b = texts[:60], texts[60:120]
    pair = theirs(a[0], b[0], return_token_type_ids=True)
    assert ours.encode_pair(a[0], b[0]) == (pair["input_ids"], pair["token_type_ids"])
    ref = theirs(a, b, padding=True, truncation=True, max_length=24, return_tensors="pt")
    assert torch.equal(ours.batch_encode(a, b, max_length=24)["input_ids"], ref["input_ids"])
    for t in texts[:60]:
        ids = ours.encode(t)
        if s.unk not in ids:
            assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=True)
    # a cased, accent-keeping configuration is read from tokenizer_config.json and exported back
    (albert_dir / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False, "keep_accents": True}))
    try:
        cased = load_tokenizer(albert_dir)
        cased_ref = transformers.AlbertTokenizer.from_pretrained(str(albert_dir))
        assert not cased.lowercase and cased.keep_accents
        assert [cased.encode(t) for t in texts] == cased_ref(texts)["input_ids"]
    finally:
        (albert_dir / "tokenizer_config.json").unlink()
    ours.save_hf(tmp_path / "hf")
    assert transformers.AlbertTokenizer.from_pretrained(str(tmp_path / "hf"))(texts)["input_ids"] == \
        theirs(texts)["input_ids"]
    ours.save(tmp_path / "ckpt")
    assert load_tokenizer(tmp_path / "ckpt").encode(texts[0]) == ours.encode(texts[0])
