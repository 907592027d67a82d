"""Translating with a model trained by the ``translation`` objective, and sacreBLEU scores:
BLEU and chrF by hand, the sources framed exactly as in training, batching and sorting that do
not change a translation, a tiny model that learns to copy and then translates back exactly,
and bad input."""

from __future__ import annotations

import copy
import math

import pytest
import torch

import babelzoo
from babelzoo.datasets.spm import SentencePieceTokenizer
from babelzoo.errors import InputError
from babelzoo.evaluation.translation import corpus_scores, translate
from babelzoo.objectives import Pair, build_objective

pytest.importorskip("sacrebleu")

SENTENCES = ["the red house", "a small green door", "the dog sleeps", "two old men walk to the market",
             "a child plays", "the sun is hot today", "birds sing in the morning", "she reads a long book",
             "we eat bread", "the river runs to the sea", "my brother has a blue car", "it rains"]


@pytest.fixture(scope="module")
def tokenizer():
    words = sorted({w for s in SENTENCES for w in s.split()})
    corpus = {"en": SENTENCES + words, "de": SENTENCES + words}
    return SentencePieceTokenizer.train(corpus, vocab_size=70, model_type="unigram", seed=0, languages=["en", "de"])


def mbart(tokenizer, seed: int = 0):
    torch.manual_seed(seed)
    return babelzoo.create_model("mbart_tiny", vocab_size=tokenizer.specials.vocab_size,
                                 pad_token_id=tokenizer.specials.pad, max_positions=32, dropout=0.0)


def test_bleu_and_chrf_by_hand():
    # n-gram precisions 5/6, 4/5, 3/4, 2/3, equal lengths (no brevity penalty):
    # BLEU = (5/6 · 4/5 · 3/4 · 2/3)^(1/4) = (1/3)^(1/4)
    scores = corpus_scores(["a b c d e f"], ["a b c d e g"], "en")
    assert scores["bleu"] == pytest.approx(100 * (1 / 3) ** 0.25, abs=1e-9)
    assert scores["bleu_precisions"] == pytest.approx([100 * 5 / 6, 100 * 4 / 5, 100 * 3 / 4, 100 * 2 / 3])
    assert scores["brevity_penalty"] == 1.0
    # a hypothesis of 3 words against 6: BP = exp(1 − 6/3)
    short = corpus_scores(["a b c"], ["a b c d e f"], "en")
    assert short["brevity_penalty"] == pytest.approx(math.exp(1 - 6 / 3))
    same = corpus_scores(SENTENCES, SENTENCES, "de")
    assert same["bleu"] == pytest.approx(100) and same["chrf"] == pytest.approx(100)
    assert "tok:13a" in same["signature"]["bleu"] and "nc:6" in same["signature"]["chrf"]


def test_scores_refuse_unequal_counts():
    with pytest.raises(InputError, match="2 hypotheses for 1 references"):
        corpus_scores(["a", "b"], ["a"], "de")
    with pytest.raises(InputError, match="no sentences"):
        corpus_scores([], [], "de")


class Spy(torch.nn.Module):
    """The model, recording what ``generate`` is given."""

    def __init__(self, model):
        super().__init__()
        self.model, self.calls = model, []
        self.config = model.config

    def generate(self, input_ids, **options):
        self.calls.append((input_ids.clone(), options))
        return self.model.generate(input_ids, **options)


def test_sources_are_framed_as_the_objective_frames_them(tokenizer):
    model = mbart(tokenizer)
    spy = Spy(model)
    translate(spy, tokenizer, SENTENCES[:3], "en", "de", num_beams=1, batch_size=8, max_new_tokens=4)
    (ids, options), = spy.calls
    s = tokenizer.specials
    objective = build_objective("translation", s, model.config, max_length=32)
    pieces = [tokenizer.encode(x, lang="en", add_special_tokens=False) for x in SENTENCES[:3]]
    order = sorted(range(3), key=lambda i: len(pieces[i]))  # batched shortest first
    trained = objective.prepare([Pair(pieces[i], [7], "en", "de") for i in order])
    assert ids.tolist() == trained["input_ids"].tolist()
    assert options["decoder_start_token_id"] == trained["decoder_input_ids"][0, 0] == s.language_tags["de"]
    assert options["eos_token_id"] == s.sep and options["pad_token_id"] == s.pad
    assert options["attention_mask"].tolist() == trained["attention_mask"].tolist()


@pytest.fixture(scope="module")
def copiers(tokenizer):
    """``{steps: model}``: ``mbart_tiny`` trained by the shipped objective on en→de pairs whose
    target is the source, after 30 steps (it writes something else for each source) and 150."""
    model = mbart(tokenizer)
    objective = build_objective("translation", tokenizer.specials, model.config, max_length=32)
    pairs = [Pair(tokenizer.encode(x, lang="en", add_special_tokens=False),
                  tokenizer.encode(x, lang="de", add_special_tokens=False), "en", "de") for x in SENTENCES]
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    out, threads = {}, torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model trains fastest on one thread
    try:
        for step in range(1, 151):
            loss = objective(model.train(), objective.prepare(pairs))
            optimizer.zero_grad()
            loss.value.backward()
            optimizer.step()
            if step in (30, 150):
                out[step] = copy.deepcopy(model)
    finally:
        torch.set_num_threads(threads)
    return out


@pytest.mark.parametrize("num_beams", [1, 3])
def test_batching_and_sorting_do_not_change_a_translation(tokenizer, copiers, num_beams):
    model = copiers[30]
    one = translate(model, tokenizer, SENTENCES, "en", "de", num_beams=num_beams, batch_size=1, max_new_tokens=8)
    many = translate(model, tokenizer, SENTENCES, "en", "de", num_beams=num_beams, batch_size=5, max_new_tokens=8)
    assert one == many
    assert len(set(one)) > 3 and one != SENTENCES  # each in its place: not yet one output for all


@pytest.mark.slow
def test_a_model_that_learned_to_copy_translates_back_exactly(tokenizer, copiers):
    """After 150 steps, the translations through ``translate`` are the sources themselves:
    the decoding frames its input as training did. BLEU 100."""
    model = copiers[150].train()
    out = translate(model, tokenizer, SENTENCES, "en", "de", num_beams=2, batch_size=4)
    assert model.training  # translate restores the mode it found
    assert out == SENTENCES
    assert corpus_scores(out, SENTENCES, "de")["bleu"] == pytest.approx(100)


def test_bad_input_is_named(tokenizer):
    model = mbart(tokenizer)
    with pytest.raises(babelzoo.errors.BabelzooError, match=r"no tag \[fr\]"):
        translate(model, tokenizer, SENTENCES[:2], "en", "fr", max_new_tokens=4)
    long = " ".join(SENTENCES)
    with pytest.raises(InputError, match=r"sentence 1 has \d+ pieces.*max_length=32"):
        translate(model, tokenizer, ["a child plays", long], "en", "de", max_new_tokens=4)
    assert len(translate(model, tokenizer, [long], "en", "de", max_new_tokens=4, truncate=True)) == 1
    encoder = babelzoo.create_model("xlmr_tiny", vocab_size=tokenizer.specials.vocab_size)
    with pytest.raises(InputError, match="not an encoder–decoder"):
        translate(encoder, tokenizer, SENTENCES[:1], "en", "de")
