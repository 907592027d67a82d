"""The encoder–decoder objectives: batches of hand-built examples (BART's and mBART's layouts,
T5's sentinels, MASS's fragment, translation and XAE pairs), BART's 30 % / mBART's 35 % noise
through ``prepare`` over 100k tokens, bad input, the refusal of encoder-only models, the loss by
hand, and that each objective learns.

The models are the zoo's tiny encoder–decoders: ``t5_tiny`` for span corruption (T5's
sentinels), ``mbart_tiny`` for mBART denoising, translation and XAE (language tags),
``bart_tiny`` for BART infilling and MASS.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.errors import ConfigError
from babelzoo.objectives import (
    OBJECTIVES,
    ExampleError,
    Pair,
    Sentence,
    Seq2SeqObjective,
    build_objective,
    is_seq2seq,
)

I = -100
TAGS = {"en": 5, "de": 6}
SENTINELS = tuple(range(100, 110))
S = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=128, languages={"en": 0, "de": 1},
               language_tags=TAGS, sentinels=SENTINELS)
PAD, BOS, EOS, MASK = S.pad, S.cls, S.sep, S.mask
EN, DE = TAGS["en"], TAGS["de"]
# words for mBART's word spans: an odd id from 21 to 99 continues the word before it
WORDS = torch.tensor([not (21 <= i < 100 and i % 2) for i in range(128)])


MODEL_FOR = {"span_corruption": "t5_tiny", "mbart_denoising": "mbart_tiny", "translation": "mbart_tiny",
             "xae": "mbart_tiny"}


def seq2seq_model(vocab_size: int = 128, objective: str = "text_infilling") -> nn.Module:
    """The zoo's tiny encoder–decoder that ``objective`` trains."""
    return babelzoo.create_model(MODEL_FOR.get(objective, "bart_tiny"), vocab_size=vocab_size, max_positions=128)


def objective(name, specials=S, **options):
    if name == "mbart_denoising":
        options.setdefault("word_starts", WORDS)
    return build_objective(name, specials, babelzoo.model_config("xlm_tiny", vocab_size=specials.vocab_size),
                           **options)


def rows(batch):
    return {k: v.tolist() for k, v in batch.items() if k != "truncated"}


DOCUMENT = [([20, 21, 22], "de"), ([30, 31], "de"), ([40, 41, 42, 43], "de")]


# --- BART -------------------------------------------------------------------------------------

def test_bart_layout_without_noise():
    batch = objective("text_infilling", mask_ratio=0.0, permute_sentences=False).prepare([DOCUMENT, [[50, 51]]])
    stream = [20, 21, 22, EOS, 30, 31, EOS, 40, 41, 42, 43]
    assert rows(batch) == {
        "input_ids": [[BOS, *stream, EOS], [BOS, 50, 51, EOS] + [PAD] * 9],
        "attention_mask": [[1] * 13, [1] * 4 + [0] * 9],
        "labels": [[BOS, *stream, EOS], [BOS, 50, 51, EOS] + [I] * 9],
        "decoder_input_ids": [[EOS, BOS, *stream], [EOS, BOS, 50, 51] + [PAD] * 9],
        "decoder_attention_mask": [[1] * 13, [1] * 4 + [0] * 9]}


def split(stream):
    out = [[]]
    for token in stream:
        out.append([]) if token == EOS else out[-1].append(token)
    return out


def test_sentence_permutation_keeps_the_sentences_and_the_target():
    torch.manual_seed(0)
    bart = objective("text_infilling", mask_ratio=0.0)
    orders = set()
    for _ in range(40):
        batch = bart.prepare([DOCUMENT])
        source = batch["input_ids"][0, 1:-1].tolist()
        assert sorted(split(source)) == sorted([[20, 21, 22], [30, 31], [40, 41, 42, 43]])
        assert batch["labels"][0].tolist() == [BOS, 20, 21, 22, EOS, 30, 31, EOS, 40, 41, 42, 43, EOS]
        orders.add(tuple(s[0] for s in split(source)))
    assert len(orders) == 6


@pytest.mark.parametrize("name,ratio", [("text_infilling", 0.3), ("mbart_denoising", 0.35)])
def test_noise_rate_through_prepare_over_100k_tokens(name, ratio):
    torch.manual_seed(0)
    denoise = objective(name, permute_sentences=False, unit="token")
    # documents of 3 sentences, 101 tokens in the stream (the two </s> between sentences count)
    document = [(list(range(20, 53)), "de"), (list(range(53, 86)), "de"), (list(range(86, 119)), "de")]
    removed, tokens, spans_left = 0, 0, 0
    for _ in range(10):
        batch = denoise.prepare([document] * 100)
        framing = 2  # <s> … </s> for BART, … </s> [de] for mBART
        for source, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist()):
            source = [t for t in source if t != PAD]
            stream = labels[1:-1] if name == "text_infilling" else labels[:-2]
            kept = len(source) - framing - source.count(MASK)
            removed += len(stream) - kept
            tokens += len(stream)
            spans_left += source.count(MASK)
    assert tokens == 101_000
    # the budget ⌊ratio·101 + u⌋ varies by at most 1: variance below 1/4 a row
    assert abs(removed - ratio * tokens) < 4 * math.sqrt(1000 / 4), removed
    assert spans_left > removed / 4  # one mask per span of mean length ≈ 3, not one per token


def test_bart_spans_each_become_one_mask_and_the_rest_is_kept_in_order():
    torch.manual_seed(1)
    batch = objective("text_infilling", permute_sentences=False).prepare([[(list(range(20, 60)), "en")]])
    source = batch["input_ids"][0, 1:-1].tolist()
    kept = [t for t in source if t != MASK]
    assert kept == sorted(kept) and set(kept) < set(range(20, 60))  # an ordered subsequence
    assert 40 - len(kept) == 12  # 0.3 · 40 tokens, whatever u
    assert 1 <= source.count(MASK) <= 12


def test_long_documents_are_cut_before_the_noise():
    batch = objective("text_infilling", mask_ratio=0.0, permute_sentences=False, max_length=8).prepare(
        [[([20, 21, 22], "en"), ([30, 31, 32], "en"), ([40], "en")]])
    assert batch["labels"][0].tolist() == [BOS, 20, 21, 22, EOS, 30, 31, EOS]
    assert int(batch["truncated"]) == 9 - 6


# --- mBART ------------------------------------------------------------------------------------

def test_mbart_layout_without_noise():
    batch = objective("mbart_denoising", mask_ratio=0.0, permute_sentences=False).prepare(
        [DOCUMENT, [([50, 51], "en")]])
    stream = [20, 21, 22, EOS, 30, 31, EOS, 40, 41, 42, 43]
    assert rows(batch) == {
        "input_ids": [[*stream, EOS, DE], [50, 51, EOS, EN] + [PAD] * 9],
        "attention_mask": [[1] * 13, [1] * 4 + [0] * 9],
        "labels": [[*stream, EOS, DE], [50, 51, EOS, EN] + [I] * 9],
        "decoder_input_ids": [[DE, *stream, EOS], [EN, 50, 51, EOS] + [PAD] * 9],
        "decoder_attention_mask": [[1] * 13, [1] * 4 + [0] * 9]}
    mbart, bart = objective("mbart_denoising"), objective("text_infilling")
    assert (mbart.mask_ratio, mbart.poisson_lambda, bart.mask_ratio, bart.poisson_lambda) == (0.35, 3.5, 0.3, 3.0)


def test_mbart_masks_35_percent_of_the_words_in_whole_words_over_100k_tokens():
    torch.manual_seed(0)
    mbart = objective("mbart_denoising", permute_sentences=False)
    assert mbart.unit == "word"
    # three sentences of 34 tokens, 17 two-token words each; with the two </s>, 53 words a row
    document = [(list(range(20, 54)), "de"), (list(range(54, 88)), "de"), ([20, 21] * 17, "de")]
    removed, rows = 0, 0
    for _ in range(10):
        batch = mbart.prepare([document] * 100)
        for source in batch["input_ids"].tolist():
            source = [t for t in source if t != PAD][:-2]  # without </s> [de]
            for previous, token in zip([MASK, *source], source):
                if token != MASK and not WORDS[token]:  # a kept continuation follows its word's start
                    assert previous == token - 1, source
                if previous != MASK and previous != EOS and not WORDS[previous]:
                    assert token == MASK or WORDS[token] or token == previous + 1
            kept_words = sum(1 for t in source if t != MASK and WORDS[t])
            removed += 53 - kept_words
            rows += 1
    assert rows * 104 > 100_000
    # ⌊0.35·53 + u⌋ = 18 or 19 words a row (variance 0.55·0.45)
    assert abs(removed - 0.35 * 53 * rows) < 4 * math.sqrt(0.55 * 0.45 * rows), removed
    with pytest.raises(ConfigError, match="unit='word' needs a word_starts table"):
        build_objective("mbart_denoising", S, babelzoo.model_config("xlm_tiny", vocab_size=128))
    with pytest.raises(ConfigError, match=r"word_starts has shape \(5,\)"):
        objective("mbart_denoising", word_starts=torch.ones(5, dtype=torch.bool))


def test_mbart_refuses_a_language_without_a_tag():
    mbart = objective("mbart_denoising")
    with pytest.raises(ExampleError, match=r"example 1: the vocabulary has no tag \[fr\] for language 'fr' "
                                           r"\(its tags: \[de\], \[en\]\)"):
        mbart.prepare([DOCUMENT, [([50, 51], "fr")]])
    with pytest.raises(ExampleError, match="example 0: no language code"):
        mbart.prepare([[[50, 51], [52]]])


# --- T5 ---------------------------------------------------------------------------------------

def test_t5_sentinel_layout():
    torch.manual_seed(0)
    t5 = objective("span_corruption")
    ids = list(range(20, 60))  # 40 tokens: round(6) = 6 noise tokens in round(2) = 2 spans
    batch = t5.prepare([ids, [70]])
    source = batch["input_ids"][0].tolist()
    labels = batch["labels"][0].tolist()
    assert source[-1] == EOS and labels[-1] == EOS
    assert [t for t in source if t in SENTINELS] == [100, 101]
    assert [t for t in labels if t in SENTINELS] == [100, 101, 102]
    assert batch["decoder_input_ids"][0].tolist() == [PAD, *labels[:-1]]
    # the sentinels stand for their spans: filling them back in gives the sentence
    spans = {}
    for token in labels[:-1]:
        spans.setdefault(token, []) if token in SENTINELS else spans[list(spans)[-1]].append(token)
    restored = [t for token in source[:-1] for t in (spans[token] if token in SENTINELS else [token])]
    assert restored == ids and sum(len(v) for v in spans.values()) == 6 and spans[102] == []
    # one token: T5 draws the mask of 2 tokens and keeps the first, so nothing is dropped
    assert batch["input_ids"][1].tolist()[:2] == [70, EOS] and batch["labels"][1].tolist()[:2] == [100, EOS]


def test_t5_needs_sentinels():
    with pytest.raises(ConfigError, match=r"reserves 0 sentinel tokens.*sentinels: 100"):
        objective("span_corruption", specials=dataclasses.replace(S, sentinels=()))
    few = objective("span_corruption", specials=dataclasses.replace(S, sentinels=(100, 101)))
    with pytest.raises(ExampleError, match=r"example 1 \(100 tokens\): 5 noise spans need 6 sentinels"):
        few.prepare([[20, 21, 22], list(range(20, 120))])


# --- MASS -------------------------------------------------------------------------------------

def test_mass_layout():
    torch.manual_seed(0)
    ids = [20, 21, 22, 23, 24, 25, 26]
    for _ in range(20):
        batch = objective("mass").prepare([ids])
        source, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
        start = source.index(MASK) - 1
        assert len(labels) in (3, 4) and labels == ids[start:start + len(labels)]
        assert source == [BOS, *ids[:start], *[MASK] * len(labels), *ids[start + len(labels):], EOS]
        assert batch["decoder_input_ids"][0].tolist() == [EOS, *labels[:-1]]
    with pytest.raises(ExampleError, match="mass: example 1 is empty"):
        objective("mass").prepare([ids, []])


# --- translation and XAE ----------------------------------------------------------------------

def test_translation_batch_by_hand():
    batch = objective("translation").prepare([Pair([20, 21, 22], [30, 31], "en", "de"),
                                              ([40], [50, 51, 52, 53], "de", "en")])
    assert rows(batch) == {
        "input_ids": [[20, 21, 22, EOS, EN], [40, EOS, DE, PAD, PAD]],
        "attention_mask": [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]],
        "labels": [[30, 31, EOS, DE, I, I], [50, 51, 52, 53, EOS, EN]],
        "decoder_input_ids": [[DE, 30, 31, EOS, PAD, PAD], [EN, 50, 51, 52, 53, EOS]],
        "decoder_attention_mask": [[1, 1, 1, 1, 0, 0], [1] * 6]}


def test_translation_bad_input():
    translate = objective("translation", max_length=6)
    with pytest.raises(ExampleError, match=r"example 1 target: the vocabulary has no tag \[fr\] for language 'fr'"):
        translate.prepare([([20], [30], "en", "de"), ([20], [30], "en", "fr")])
    with pytest.raises(ExampleError, match="example 0 source: no language code"):
        translate.prepare([([20], [30])])
    with pytest.raises(ExampleError, match=r"example 1: the target has 5 tokens, .* 7: more than max_length=6"):
        translate.prepare([([20], [30], "en", "de"), ([20], [30, 31, 32, 33, 34], "en", "de")])
    cut = objective("translation", max_length=6, truncate_targets=True).prepare([([20] * 6, [30] * 5, "en", "de")])
    assert cut["labels"][0].tolist() == [30] * 4 + [EOS, DE] and int(cut["truncated"]) == 2 + 1
    with pytest.raises(ConfigError, match="max_length=999 exceeds the model's max_positions"):
        objective("translation", max_length=999)


def test_a_parallel_file_with_mismatched_lines_is_refused_naming_file_and_line(tmp_path):
    from babelzoo.datasets.text import CorpusError, read_parallel

    (tmp_path / "a.en").write_text("one\ntwo\nthree\n", encoding="utf-8")
    (tmp_path / "a.de").write_text("eins\nzwei\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"a\.en has 3 lines but .*a\.de has 2 lines \(.*a\.en:3 is the first "
                                          r"line with no partner in a\.de\)"):
        read_parallel(tmp_path / "a.en", tmp_path / "a.de", "en", "de")


def test_xae_translates_each_pair_in_a_random_direction():
    torch.manual_seed(0)
    xae = objective("xae")
    batch = xae.prepare([([20, 21, 22], [30, 31], "en", "de")] * 2000)
    forward = batch["decoder_input_ids"][:, 0] == DE
    assert abs(int(forward.sum()) - 1000) < 4 * math.sqrt(2000 / 4)
    one_way = batch["input_ids"][forward.nonzero()[0, 0]].tolist()
    other = batch["input_ids"][(~forward).nonzero()[0, 0]].tolist()
    assert one_way == [20, 21, 22, EOS, EN] and other == [30, 31, EOS, DE, PAD]
    assert batch["labels"][(~forward).nonzero()[0, 0]].tolist() == [20, 21, 22, EOS, EN]


# --- the model --------------------------------------------------------------------------------

# every registered encoder–decoder objective, and a batch of each example type they consume
NAMES = sorted(name for name, cls in OBJECTIVES.items() if issubclass(cls, Seq2SeqObjective))
EXAMPLES = {"document": [DOCUMENT] * 2, "sentence": [list(range(20, 40))] * 2,
            "pair": [([20, 21], [30, 31, 32], "en", "de")] * 2}


@pytest.mark.parametrize("name", NAMES)
def test_encoder_only_models_are_refused(name):
    encoder = babelzoo.create_model("xlm_tiny", vocab_size=128)
    assert not is_seq2seq(encoder) and is_seq2seq(seq2seq_model())
    # the trainer's torch.compile wrapper is looked into
    assert is_seq2seq(torch.compile(seq2seq_model())) and not is_seq2seq(torch.compile(encoder))
    seq = objective(name)
    with pytest.raises(ConfigError, match=rf"objective '{name}' trains an encoder–decoder, but model 'xlm_tiny'"):
        seq(encoder, seq.prepare(EXAMPLES[seq.consumes]))


@pytest.mark.parametrize("name", NAMES)
def test_loss_is_the_decoders_cross_entropy_at_the_labels(name):
    torch.manual_seed(0)
    model = seq2seq_model(objective=name).eval()
    seq = objective(name)
    batch = seq.prepare(EXAMPLES[seq.consumes])
    loss = seq(model, batch)
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                   decoder_input_ids=batch["decoder_input_ids"],
                   decoder_attention_mask=batch["decoder_attention_mask"]).logits
    labels = batch["labels"]
    torch.testing.assert_close(loss.value, F.cross_entropy(logits[labels.ne(I)], labels[labels.ne(I)]))
    assert all(isinstance(v, torch.Tensor) and not v.requires_grad for v in loss.metrics.values())
    assert int(loss.metrics["predicted"]) == int(labels.ne(I).sum())
    assert int(loss.tokens) == int(batch["attention_mask"].sum() + batch["decoder_attention_mask"].sum())


def test_xnlg_stage_two_mixture_sums_xae_and_denoising():
    from babelzoo.objectives import Mixture

    torch.manual_seed(0)
    model = seq2seq_model(objective="xae").eval()
    mix = Mixture.from_spec({"xae": {}, "mbart_denoising": {"word_starts": WORDS}}, S, model.config)
    batch = mix.prepare({"xae": EXAMPLES["pair"], "mbart_denoising": EXAMPLES["document"]})
    loss = mix(model, batch)
    parts = [mix.objectives[n](model, {k.split(".", 1)[1]: v for k, v in batch.items() if k.startswith(n + ".")})
             for n in ("xae", "mbart_denoising")]
    torch.testing.assert_close(loss.value, parts[0].value + parts[1].value)
    assert {"xae/loss", "mbart_denoising/accuracy"} <= set(loss.metrics)


def test_mbart_spans_are_poisson_3_5():
    from babelzoo.objectives import poisson_span_lengths

    torch.testing.assert_close(objective("mbart_denoising").span_lengths, poisson_span_lengths(3.5, 40, min_length=0))
    torch.testing.assert_close(objective("text_infilling").span_lengths, poisson_span_lengths(3.0, 40, min_length=0))


# --- learning ---------------------------------------------------------------------------------

# (batch size, optimiser steps, largest allowed end/start ratio of the held loss); token losses
# start near log|V| ≈ 7. Each trains until its held loss is clearly past its bound (steps in
# multiples of 10; the trailing comment is the end/start ratio it reaches).
LEARNS = {"text_infilling": (8, 50, 0.8),  # 0.741
          "mbart_denoising": (8, 50, 0.8),  # 0.739
          "span_corruption": (8, 100, 0.5),  # 0.365
          "mass": (8, 60, 0.88),  # 0.831
          "translation": (8, 50, 0.75),  # 0.651
          "xae": (8, 50, 0.75)}  # 0.669


@pytest.fixture(scope="module")
def seq_specials(specials):
    """The test vocabulary with four language tags and 100 sentinels after its pieces."""
    n = specials.vocab_size
    return dataclasses.replace(specials, vocab_size=n + 104, language_tags={lang: n + i for i, lang in
                                                                            enumerate(("en", "de", "fr", "es"))},
                               sentinels=tuple(range(n + 4, n + 104)))


@pytest.fixture(scope="module")
def seq_word_starts(word_starts):
    """The test vocabulary's word starts, the tags and sentinels added after it each a word."""
    return torch.cat([word_starts, torch.ones(104, dtype=torch.bool)])


@pytest.fixture(scope="module")
def seq_data(parallel):
    parallel = [p for p in parallel if len(p.src) <= 12 and len(p.tgt) <= 12]
    sentences = [Sentence(p.src, p.src_lang) for p in parallel] + [Sentence(p.tgt, p.tgt_lang) for p in parallel]
    # documents: three consecutive catalog strings of one language (each side of three pairs)
    documents = [[Sentence(p.tgt, p.tgt_lang) for p in parallel[i:i + 3]] for i in range(0, len(parallel) - 3, 3)
                 if len({p.tgt_lang for p in parallel[i:i + 3]}) == 1]
    documents += [[Sentence(p.src, "en") for p in parallel[i:i + 3]] for i in range(0, len(parallel) - 3, 3)]
    # by example type (an objective's ``consumes``)
    return {"document": documents, "sentence": sentences, "pair": parallel}


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_objective_learns_on_real_text(name, seq_data, seq_specials, seq_word_starts, one_thread,
                                      train_on):
    assert name in LEARNS, f"{name}: add its batch size, steps and bound to LEARNS"
    batch_size, steps, ratio = LEARNS[name]
    examples = seq_data[OBJECTIVES.get(name).consumes]
    torch.manual_seed(0)
    model = seq2seq_model(seq_specials.vocab_size, name)
    options = {"word_starts": seq_word_starts} if name == "mbart_denoising" else {}
    seq = build_objective(name, seq_specials, model.config, max_length=48, **options)
    held = seq.prepare([examples[i] for i in torch.randperm(len(examples))[:64].tolist()])

    def held_loss():
        with torch.no_grad():
            return float(seq(model.eval(), held).value)

    start = held_loss()
    train_on(model, seq, examples, steps=steps, batch_size=batch_size, lr=3e-3)
    end = held_loss()
    print(f"{name}: held loss {start:.3f} -> {end:.3f}")
    assert end < ratio * start, f"{name}: held loss {start:.3f} -> {end:.3f} (needed < {ratio * start:.3f})"
