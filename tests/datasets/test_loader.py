"""Token cache (memory-mapped arrays keyed by source + tokenizer) and the sharded epoch sampler.

The tokenizer is a real sentencepiece unigram model trained here on real multilingual text
(CLDR language and territory names from ``babel``); it counts its ``encode`` calls so the tests
can tell a cache hit from a rebuild.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import pickle
from collections import Counter

import numpy as np
import pytest

from babelzoo.datasets.loader import (
    CorpusMixture,
    EpochOrder,
    PairExample,
    TextExample,
    TokenizedCorpus,
    tokenizer_fingerprint,
)
from babelzoo.datasets.text import CorpusError, MonolingualCorpus, ParallelCorpus, ReadReport, multi30k_pairs

LANGS = ("en", "de", "fr", "cs")


def cldr_names(lang: str) -> list[str]:
    babel = pytest.importorskip("babel")
    locale = babel.Locale.parse(lang)
    return sorted(set(locale.languages.values()) | set(locale.territories.values()))


class SentencePieceTokenizer:
    """A trained sentencepiece model behind the loader's tokenizer interface."""

    def __init__(self, model: bytes):
        import sentencepiece as spm

        self.processor = spm.SentencePieceProcessor(model_proto=model)
        self.fingerprint = "spm-" + hashlib.sha256(model).hexdigest()
        self.calls = 0
        self.langs: set = set()

    def encode(self, text: str, lang: str | None = None, add_special_tokens: bool = False) -> list[int]:
        self.calls += 1
        self.langs.add(lang)
        return self.processor.encode(text)


@pytest.fixture(scope="module")
def spm_model() -> bytes:
    import sentencepiece as spm

    text = [name for lang in LANGS for name in cldr_names(lang)]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_writer=model, vocab_size=500,
                                   model_type="unigram", character_coverage=1.0, minloglevel=2, num_threads=1)
    return model.getvalue()


@pytest.fixture
def tokenizer(spm_model) -> SentencePieceTokenizer:
    return SentencePieceTokenizer(spm_model)


def mono(lang: str) -> MonolingualCorpus:
    names = cldr_names(lang)
    return MonolingualCorpus(lang, names, ReadReport(files=("cldr",), lines=len(names), kept=len(names)))


# --- token cache -------------------------------------------------------------------------------

def test_monolingual_cache_round_trip_and_hit(tmp_path, spm_model):
    corpus = mono("de")
    first_tok = SentencePieceTokenizer(spm_model)
    first = TokenizedCorpus.from_corpus(corpus, first_tok, cache_dir=tmp_path)
    assert not first.cache_hit and first_tok.calls == len(corpus) > 300
    reference = SentencePieceTokenizer(spm_model).processor
    for i in (0, 1, len(corpus) // 2, len(corpus) - 1):
        assert first[i] == TextExample(reference.encode(corpus.sentences[i]), "de")
    assert first.lengths().tolist() == [len(reference.encode(s)) for s in corpus.sentences]
    tokens, offsets = first.arrays()["text"]
    assert isinstance(tokens, np.memmap) and tokens.dtype == np.int32 and offsets.dtype == np.int64

    second_tok = SentencePieceTokenizer(spm_model)  # a fresh process would look like this
    second = TokenizedCorpus.from_corpus(corpus, second_tok, cache_dir=tmp_path)
    assert second.cache_hit and second_tok.calls == 0
    assert [second[i] for i in range(len(second))] == [first[i] for i in range(len(first))]
    assert second.report.kept == len(corpus)


def test_cache_key_covers_tokenizer_and_content(tmp_path, tokenizer):
    corpus = mono("fr")
    base = TokenizedCorpus.from_corpus(corpus, tokenizer, cache_dir=tmp_path)
    other_identity = TokenizedCorpus.from_corpus(corpus, tokenizer, cache_dir=tmp_path, fingerprint="other-model")
    assert not other_identity.cache_hit and other_identity.folder != base.folder
    edited = MonolingualCorpus("fr", corpus.sentences[:-1] + ["autre chose"], corpus.report)
    assert TokenizedCorpus.from_corpus(edited, tokenizer, cache_dir=tmp_path).folder != base.folder
    relabelled = MonolingualCorpus("br", corpus.sentences, corpus.report)  # language is part of the key
    assert TokenizedCorpus.from_corpus(relabelled, tokenizer, cache_dir=tmp_path).folder != base.folder
    assert tokenizer.langs == {"fr", "br"}
    tokenizer.langs.clear()
    untagged = TokenizedCorpus.from_corpus(corpus, tokenizer, cache_dir=tmp_path, encode_lang=False)
    assert untagged.folder != base.folder and tokenizer.langs == {None} and untagged[0].lang == "fr"


def test_parallel_corpus_cache(tmp_path, tokenizer):
    en, de = cldr_names("en")[:200], cldr_names("de")[:200]
    corpus = ParallelCorpus("en", "de", list(zip(en, de)), ReadReport(files=("a", "b"), lines=200, kept=200))
    data = TokenizedCorpus.from_corpus(corpus, tokenizer, cache_dir=tmp_path)
    assert data.is_parallel and len(data) == 200 and tokenizer.calls == 400
    item = data[7]
    assert isinstance(item, PairExample) and (item.src_lang, item.tgt_lang) == ("en", "de")
    assert item.src == tokenizer.processor.encode(en[7]) and item.tgt == tokenizer.processor.encode(de[7])
    assert data[-1] == data[199]
    with pytest.raises(IndexError):
        data[200]


def test_text_files_keyed_by_file_bytes(tmp_path, spm_model):
    names = cldr_names("cs")
    path = tmp_path / "cs.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(names[:100]) + "\n\n" + "\n".join(names[100:]) + "\n")
    tok = SentencePieceTokenizer(spm_model)
    built = TokenizedCorpus.from_text_files(path, "cs", tok, cache_dir=tmp_path / "cache")
    assert not built.cache_hit and len(built) == len(names) and tok.calls == len(names)
    assert (built.report.skipped, built.report.lines) == (1, len(names) + 1)  # the empty line, counted
    assert built[100] == TextExample(tok.processor.encode(names[100]), "cs")
    again = SentencePieceTokenizer(spm_model)
    hit = TokenizedCorpus.from_text_files(path, "cs", again, cache_dir=tmp_path / "cache")
    assert hit.cache_hit and again.calls == 0 and hit.report.skipped == 1
    with gzip.open(path, "wt", encoding="utf-8") as handle:  # new bytes: a new entry
        handle.write("\n".join(names[:50]) + "\n")
    changed = TokenizedCorpus.from_text_files(path, "cs", again, cache_dir=tmp_path / "cache")
    assert not changed.cache_hit and len(changed) == 50


def test_failed_build_leaves_nothing(tmp_path, tokenizer):
    path = tmp_path / "en.txt"
    path.write_text("one\n\nthree\n", encoding="utf-8")
    cache = tmp_path / "cache"
    with pytest.raises(CorpusError, match=rf"{path}:2: empty line"):
        TokenizedCorpus.from_text_files(path, "en", tokenizer, empty="error", cache_dir=cache)
    assert list(cache.iterdir()) == []


def test_corrupt_cache_is_a_clear_error(tmp_path, tokenizer):
    data = TokenizedCorpus.from_corpus(mono("en"), tokenizer, cache_dir=tmp_path)
    tokens_file = data.folder / "text.tokens.bin"
    tokens_file.write_bytes(tokens_file.read_bytes()[:-8])
    with pytest.raises(RuntimeError, match=r"token cache .* is corrupt: text.tokens.bin should have"):
        TokenizedCorpus.from_corpus(mono("en"), tokenizer, cache_dir=tmp_path)


def test_pickles_without_copying_the_arrays(tmp_path, tokenizer):
    # spawn/forkserver DataLoader workers receive the dataset pickled: they must re-open the
    # memory maps, not receive a copy of the token arrays
    data = TokenizedCorpus.from_corpus(mono("en"), tokenizer, cache_dir=tmp_path)
    blob = pickle.dumps(data)
    assert len(blob) < 4096 < data.arrays()["text"][0].nbytes
    clone = pickle.loads(blob)
    assert [clone[i] for i in range(len(clone))] == [data[i] for i in range(len(data))]


def test_tokenizer_needs_an_identity(tmp_path, spm_model):
    import sentencepiece as spm

    bare = spm.SentencePieceProcessor(model_proto=spm_model)
    with pytest.raises(ValueError, match="SentencePieceProcessor has no string 'fingerprint'"):
        tokenizer_fingerprint(bare)
    assert tokenizer_fingerprint(bare, "abc") == "abc"


def test_real_multi30k_pairs(tmp_path, shared_data, tokenizer):
    corpus = multi30k_pairs(shared_data, "val", "en", "de")
    data = TokenizedCorpus.from_corpus(corpus, tokenizer, cache_dir=tmp_path)
    assert len(data) == 1014 and data.report.lines == 1014
    assert data[1013].src == tokenizer.processor.encode(corpus.pairs[1013][0])
    assert data[1013].tgt == tokenizer.processor.encode(corpus.pairs[1013][1])


# --- sampler -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mixture(tmp_path_factory, spm_model):
    cache = tmp_path_factory.mktemp("cache")
    tok = SentencePieceTokenizer(spm_model)
    corpora = {lang: TokenizedCorpus.from_corpus(MonolingualCorpus(lang, cldr_names(lang)[:n], ReadReport(("x",))),
                                                 tok, cache_dir=cache)
               for lang, n in (("en", 60), ("de", 25), ("cs", 7))}
    return CorpusMixture(corpora)


def test_mixture_indexing(mixture):
    assert mixture.sizes == {"en": 60, "de": 25, "cs": 7} and len(mixture) == 92
    assert mixture.locate(0) == ("en", 0) and mixture.locate(60) == ("de", 0) and mixture.locate(91) == ("cs", 6)
    assert mixture[85].lang == "cs" and mixture[85] == mixture.corpora[2][0]


def test_epoch_order_is_a_function_of_seed_and_epoch(mixture):
    make = lambda seed: EpochOrder(mixture.sizes, alpha=0.5, seed=seed)  # noqa: E731
    a, b = make(1), make(1)
    assert np.array_equal(a.epoch_order(0), b.epoch_order(0))
    assert not np.array_equal(a.epoch_order(0), a.epoch_order(1))
    assert not np.array_equal(a.epoch_order(0), make(2).epoch_order(0))
    assert EpochOrder(92, shuffle=False).epoch_order(3).tolist() == list(range(92))
    assert EpochOrder(5, shuffle=False, num_samples=7).epoch_order().tolist() == [0, 1, 2, 3, 4, 0, 1]
    shuffled = EpochOrder(92, num_samples=184, seed=4).epoch_order()
    assert sorted(shuffled[:92].tolist()) == list(range(92)) == sorted(shuffled[92:].tolist())  # fresh permutations


def test_alpha_sampling_frequencies_and_no_early_repeats(mixture):
    n = 60_000
    sampler = EpochOrder(mixture.sizes, alpha=0.5, num_samples=n, seed=0)
    order = sampler.epoch_order()
    keys = np.array([mixture.locate(int(i))[0] for i in order[:6000]])
    q = sampler.probabilities
    assert q["cs"] == pytest.approx(7 ** 0.5 / (60 ** 0.5 + 25 ** 0.5 + 7 ** 0.5))
    for lang in ("en", "de", "cs"):
        share = float(np.mean(keys == lang))
        assert abs(share - q[lang]) < 4 * (q[lang] * (1 - q[lang]) / 6000) ** 0.5, lang
    # within a corpus, fresh permutations: every sentence once before any twice
    cs = order[order >= 85] - 85
    assert sorted(cs[:7].tolist()) == list(range(7)) and sorted(cs[7:14].tolist()) == list(range(7))
    counts = Counter(cs.tolist())
    assert max(counts.values()) - min(counts.values()) <= 1


def test_language_homogeneous_steps(mixture):
    """group_size = the global batch: every step's batch comes from one corpus."""
    batch = 8
    order = EpochOrder(mixture.sizes, alpha=0.5, num_samples=400, group_size=batch, seed=3).epoch_order()
    langs_per_step = [{mixture.locate(int(i))[0] for i in order[step * batch:(step + 1) * batch]}
                      for step in range(400 // batch)]
    assert all(len(langs) == 1 for langs in langs_per_step)
    assert set.union(*langs_per_step) == {"en", "de", "cs"}


def test_bad_orders_are_errors():
    with pytest.raises(ValueError, match="group_size=0: expected >= 1"):
        EpochOrder(10, group_size=0)
    with pytest.raises(ValueError, match="cannot draw 5 samples from corpora of sizes"):
        EpochOrder([0, 0], num_samples=5)
