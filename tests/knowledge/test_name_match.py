"""Re-ranking by the words of the entities' texts (babelzoo.knowledge.name_match)."""

import math

import pytest
import torch

from babelzoo.knowledge import KBError, LinkPredictionData, evaluate, load_kb
from babelzoo.knowledge.name_match import (MatchRanker, NameMatches, fit_name_matches, names_and_descriptions,
                                           words)

NAMES = ["dog", "canine", "domestic animal", "cat", "feline", "wolf", "a"]
DESCRIPTIONS = ["a domestic animal, a canine", "a carnivore like the dog or the wolf", "an animal kept by people",
                "a small feline", "a cat or a lion", "a wild canine", "the first letter"]


def test_words_are_lower_cased_and_keep_inner_hyphens():
    assert words("A well-being, Ann's DOG;") == ("a", "well-being", "ann's", "dog")


def test_every_name_a_description_holds_is_found_once_with_its_idf_weight():
    m = NameMatches(NAMES, DESCRIPTIONS)
    n, log_n = len(NAMES), math.log(len(NAMES))
    idf = {held_by: math.log(n / held_by) / log_n for held_by in range(1, n + 1)}
    forward = m.forward(torch.arange(n))
    # dog's description names "domestic animal" (2 words), "canine" and "a" (held by 5 descriptions)
    assert forward[0].tolist() == pytest.approx([0, idf[2], idf[1], 0, 0, 0, idf[5]])
    # canine's names dog and wolf; wolf's names canine; nobody names "domestic" alone
    assert forward[1].tolist() == pytest.approx([idf[1], 0, 0, 0, 0, idf[1], idf[5]])
    assert forward[5].tolist() == pytest.approx([0, idf[2], 0, 0, 0, 0, idf[5]])
    assert forward[6].tolist() == [0.0] * n  # "the first letter" names nobody, and "a" is not its own match
    assert torch.equal(m.backward(torch.arange(n)), forward.T)
    assert m.num_matches == int((forward > 0).sum())


def test_a_text_graph_gives_each_entity_its_name_and_the_rest_of_its_text(tmp_path):
    from tests.knowledge.test_text_kge import write_graph

    write_graph(tmp_path / "g")
    kb = load_kb(str(tmp_path / "g"))
    data = LinkPredictionData.from_kb(kb)
    names, descriptions = names_and_descriptions(kb, data)
    assert (names[data.entities.index("00")], descriptions[data.entities.index("00")]) == ("dog", "a pet")
    assert (names[data.entities.index("05")], descriptions[data.entities.index("05")]) == ("bark", "a dog sound")


class Flat:
    """A ranker that knows nothing: every entity scores the same but for a little noise."""

    def __init__(self, n, seed=0):
        self.n, self.seed = n, seed

    def _scores(self, rows):
        g = torch.Generator().manual_seed(self.seed + int(rows.sum()))
        return torch.rand(len(rows), self.n, generator=g) * 1e-3

    def score_tails(self, h, r):
        return self._scores(h * 7 + r)

    def score_heads(self, r, t):
        return self._scores(t * 11 + r + 3)


def graph_where_the_description_names_the_tail(n=60, questions=40):
    """Entity i (i < questions) is described by the name of its tail q(i) = questions + i % 20 and
    two decoy names (the tails' descriptions are empty)."""
    names = [f"thing{i}" for i in range(n)]
    descriptions = ["" for _ in range(n)]
    triples = []
    for i in range(questions):
        tail = questions + i % (n - questions)
        decoys = [questions + (i + 3) % (n - questions), questions + (i + 7) % (n - questions)]
        descriptions[i] = f"a kind of {names[tail]} near {names[decoys[0]]} and {names[decoys[1]]}"
        triples.append((i, 0, tail))
    triples = torch.tensor(triples)
    return LinkPredictionData(names, ["is a"], triples[:20], triples[20:30], triples[30:]), names, descriptions


def test_the_weights_are_chosen_on_valid_and_lift_the_answers_the_descriptions_name():
    data, names, descriptions = graph_where_the_description_names_the_tail()
    matches, flat = NameMatches(names, descriptions), Flat(data.num_entities)
    ranker, weights, valid_mrr = fit_name_matches(flat, data, matches, grid=(0.0, 8.0), min_questions=5)
    # the forward match is the clue of tail prediction (a weight of 8 lifts an idf of about 0.5 above a
    # standardised noise of a few units)
    assert weights[("tail", 0)][0] == 8.0
    # no head-side description names anything: no weight buys a rank, so the first of the grid stays
    assert weights[("head", 0)] == weights[("head", None)]
    assert valid_mrr == pytest.approx(evaluate(ranker, data, "valid")["mrr"], abs=1e-6)
    before, after = evaluate(flat, data, "test"), evaluate(ranker, data, "test")
    # the answer is one of the three names each description holds: tail MRR about (1 + 1/2 + 1/3)/3
    assert after["tail_mrr"] > 0.5 > 0.2 > before["tail_mrr"]
    assert after["head_mrr"] > 0.2 > before["head_mrr"]


def test_a_match_ranker_adds_exactly_its_weighted_features_to_the_standardised_scores():
    data, names, descriptions = graph_where_the_description_names_the_tail()
    matches, flat = NameMatches(names, descriptions), Flat(data.num_entities)
    ranker = MatchRanker(flat, matches, {("tail", None): (0.5, 2.0), ("head", None): (0.0, 0.0), ("tail", 0): (3.0, 1.0)})
    h, r = data.test[:, 0], data.test[:, 1]
    z = flat.score_tails(h, r)
    z = (z - z.mean(1, keepdim=True)) / z.std(1, keepdim=True)
    expected = z + 3.0 * matches.forward(h) + 1.0 * matches.backward(h)
    assert torch.allclose(ranker.score_tails(h, r), expected, atol=1e-5)
    with pytest.raises(KBError, match=r"default for each side.*'head'"):
        MatchRanker(flat, matches, {("tail", None): (0.0, 0.0)})


def test_matches_of_another_graph_are_refused():
    data, names, descriptions = graph_where_the_description_names_the_tail()
    with pytest.raises(KBError, match="cover 3 entities, the graph 60"):
        fit_name_matches(Flat(60), data, NameMatches(names[:3], descriptions[:3]))
    with pytest.raises(KBError, match="3 names and 2 descriptions"):
        NameMatches(names[:3], descriptions[:2])
