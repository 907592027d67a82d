"""Decoding rules on a toy decoder whose next-token scores are a fixed table: beam search
against brute-force enumeration, n-gram blocking, top-k/top-p support sets, forced and stop
tokens, argument checks."""

import itertools
import math

import pytest
import torch

from babelzoo.errors import InputError
from babelzoo.zoo.generation import GenerationSettings, block_repeated_ngrams, generate, warp

V, START, EOS, PAD = 5, 0, 1, 4


class Toy:
    """A decoder of ``sources`` rows (× beams): the log-probabilities of the next token depend on
    the source, the position and the last token, log p = log_softmax(table[source, t, last])."""

    def __init__(self, sources, beams, steps, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.table = torch.randn(sources, steps, V, V, generator=g) * 2
        self.source = torch.arange(sources).repeat_interleave(beams)
        self.t = 0

    def step(self, tokens):
        logits = self.table[self.source, self.t, tokens[:, 0]]
        self.t += 1
        return logits

    def reorder(self, rows):
        self.source = self.source[rows]

    def log_prob(self, source, sequence):
        """Σ log p of ``sequence`` (after the start token) for one source."""
        total, last = 0.0, START
        for t, token in enumerate(sequence):
            total += float(self.table[source, t, last].log_softmax(-1)[token])
            last = token
        return total


def settings(**options):
    return GenerationSettings(decoder_start_token_id=START, eos_token_id=EOS, pad_token_id=PAD, vocab_size=V,
                              **options)


def brute_force_best(toy, source, steps, length_penalty):
    """The best hypothesis by Σ log p / length^penalty over every sequence that ends with the
    end token or at the length limit."""
    best, best_score = None, -math.inf
    for n in range(1, steps + 1):
        for body in itertools.product([t for t in range(V) if t != EOS], repeat=n - 1):
            for last in range(V):
                if last != EOS and n < steps:
                    continue  # unfinished before the limit: not a hypothesis
                sequence = [*body, last]
                score = toy.log_prob(source, sequence) / n ** length_penalty
                if score > best_score:
                    best, best_score = sequence, score
    return best


@pytest.mark.parametrize("length_penalty", [1.0, 0.0, 2.0])
def test_wide_beam_search_finds_the_brute_force_best(length_penalty):
    steps, beams = 3, V ** 3  # as many beams as sequences: nothing is pruned
    toy = Toy(sources=2, beams=beams, steps=steps, seed=1)
    out = generate(toy.step, toy.reorder, 2, "cpu",
                   settings(max_new_tokens=steps, num_beams=beams, length_penalty=length_penalty))
    for source in range(2):
        expected = brute_force_best(toy, source, steps, length_penalty)
        row = out[source, 1:].tolist()
        assert row[:len(expected)] == expected
        assert all(t == PAD for t in row[len(expected):])


def test_narrow_beam_search_beats_or_equals_greedy():
    steps = 4
    greedy_toy, beam_toy = Toy(3, 1, steps, seed=2), Toy(3, 3, steps, seed=2)
    greedy = generate(greedy_toy.step, greedy_toy.reorder, 3, "cpu", settings(max_new_tokens=steps))
    beam = generate(beam_toy.step, beam_toy.reorder, 3, "cpu", settings(max_new_tokens=steps, num_beams=3,
                                                                          length_penalty=0.0))
    for source in range(3):
        def score(row):
            tokens = row[1:].tolist()
            return greedy_toy.log_prob(source, tokens[:tokens.index(EOS) + 1] if EOS in tokens else tokens)
        assert score(beam[source]) >= score(greedy[source]) - 1e-6


def argmax_chain(toy, source, steps):
    """The greedy tokens of one source, up to its end token."""
    tokens, last = [], START
    for t in range(steps):
        last = int(toy.table[source, t, last].argmax())
        tokens.append(last)
        if last == EOS:
            break
    return tokens


def test_greedy_takes_the_argmax_and_pads_after_the_end_token():
    toy = Toy(2, 1, 6, seed=3)
    toy.table[0, 2, :, EOS] += 20  # the first source ends at its third token
    toy.table[1, :, :, EOS] -= 20  # the second never does
    out = generate(toy.step, toy.reorder, 2, "cpu", settings(max_new_tokens=6)).tolist()
    first = argmax_chain(toy, 0, 6)
    assert len(first) == 3 and first[-1] == EOS
    assert out[0] == [START, *first, PAD, PAD, PAD]
    assert out[1] == [START, *argmax_chain(toy, 1, 6)]


def test_early_stopping_ends_once_every_beam_has_finished():
    # the end token is always likeliest: all beams finish at the first step
    def step(tokens):
        logits = torch.zeros(tokens.shape[0], V)
        logits[:, EOS] = 5.0
        return logits

    out = generate(step, lambda rows: None, 2, "cpu", settings(max_new_tokens=8, num_beams=2, early_stopping=True))
    assert out.tolist() == [[START, EOS], [START, EOS]]


def test_ngram_blocking_by_hand():
    scores = torch.zeros(3, 9)
    rows = torch.tensor([[5, 6, 7, 5, 6], [1, 1, 1, 1, 1], [5, 6, 7, 8, 3]])
    banned = block_repeated_ngrams(scores, rows, 3).isinf()
    # row 0: "5 6" was followed by 7; row 1: "1 1" by 1; row 2: "8 3" never occurred before
    assert [torch.nonzero(b).flatten().tolist() for b in banned] == [[7], [1], []]
    banned = block_repeated_ngrams(scores, rows, 2).isinf()
    # bigrams after the last token: 6 → 7; 1 → 1; 3 → nothing
    assert [torch.nonzero(b).flatten().tolist() for b in banned] == [[7], [1], []]
    assert not block_repeated_ngrams(scores, rows[:, :2], 3).isinf().any()  # too short for a 3-gram


def test_generated_rows_repeat_no_ngram():
    toy = Toy(4, 1, 12, seed=4)
    out = generate(toy.step, toy.reorder, 4, "cpu", settings(max_new_tokens=12, no_repeat_ngram_size=2))
    for row in out.tolist():
        grams = [tuple(row[i:i + 2]) for i in range(len(row) - 1) if PAD not in row[i:i + 2]]
        assert len(grams) == len(set(grams))


def support(scores):
    return torch.nonzero(scores[0].isfinite()).flatten().tolist()


@pytest.mark.parametrize("top_k, top_p, kept", [
    (2, None, [0, 1]), (3, None, [0, 1, 2]), (None, 0.8, [0, 1]), (None, 0.81, [0, 1, 2]),
    (None, 0.5, [0]), (None, 0.3, [0]), (None, 1.0, [0, 1, 2, 3]), (3, 0.6, [0, 1]), (1, 0.99, [0]),
])
def test_top_k_top_p_supports_by_hand(top_k, top_p, kept):
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    s = GenerationSettings(max_new_tokens=1, decoder_start_token_id=0, eos_token_id=1, pad_token_id=0,
                           vocab_size=4, do_sample=True, top_k=top_k, top_p=top_p)
    assert support(warp(probs.log(), s)) == kept


def test_sampling_draws_within_the_support_and_reaches_all_of_it():
    table = torch.tensor([0.5, 0.3, 0.15, 0.05, 0.0]).clamp(min=1e-9).log()

    def step(tokens):
        return table.expand(tokens.shape[0], V)

    g = torch.Generator().manual_seed(0)
    out = generate(step, lambda rows: None, 400, "cpu",
                   settings(max_new_tokens=1, do_sample=True, top_p=0.8), generator=g)
    assert set(out[:, 1].tolist()) == {0, 1}
    out = generate(step, lambda rows: None, 400, "cpu",
                   settings(max_new_tokens=1, do_sample=True, top_k=3), generator=g)
    assert set(out[:, 1].tolist()) == {0, 1, 2}


def test_a_forced_first_token_is_taken_whatever_its_score():
    for beams in (1, 2):
        toy = Toy(2, beams, 4, seed=5)
        out = generate(toy.step, toy.reorder, 2, "cpu",
                       settings(max_new_tokens=4, num_beams=beams, forced_bos_token_id=3))
        assert out[:, 1].eq(3).all()


@pytest.mark.parametrize("options, message", [
    (dict(max_new_tokens=0), "max_new_tokens=0 must be a positive integer"),
    (dict(max_new_tokens=2, num_beams=0), "num_beams=0 must be a positive integer"),
    (dict(max_new_tokens=2, top_p=1.5), r"top_p=1.5 must be in \(0, 1\]"),
    (dict(max_new_tokens=2, num_beams=2, do_sample=True), "num_beams=2 must be 1 with do_sample=True"),
    (dict(max_new_tokens=2, forced_bos_token_id=7), "forced_bos_token_id=7 must be a token id below"),
])
def test_bad_arguments_are_errors_naming_them(options, message):
    with pytest.raises(InputError, match=message):
        settings(**options)
