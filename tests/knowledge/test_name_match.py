"""Re-ranking by the words of the entities' texts (babelzoo.knowledge.name_match)."""

import math

import pytest
import torch

from babelzoo.knowledge import KBError, LinkPredictionData, evaluate, load_kb
from babelzoo.knowledge.name_match import (FEATURES, MatchRanker, NameMatches, SharedWords, TextFeatures,
                                           fit_name_matches, names_and_descriptions, words)

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
    # early: each weight over 1 + the word its first mention starts at ("a"0 "domestic"1 "animal"2 "a"3 "canine"4)
    assert m.forward(torch.tensor([0]), early=True)[0].tolist() == pytest.approx(
        [0, idf[2] / 5, idf[1] / 2, 0, 0, 0, idf[5] / 1])
    assert torch.equal(m.backward(torch.arange(n), early=True), m.forward(torch.arange(n), early=True).T)
    assert torch.equal(m.backward(torch.arange(n)), forward.T)
    assert m.num_matches == int((forward > 0).sum())


def test_shared_words_is_the_cosine_of_the_idf_weighted_word_sets():
    texts = ["red fox", "red wolf", "grey wolf", "fox"]
    idf = {"red": math.log(4 / 2), "fox": math.log(4 / 2), "wolf": math.log(4 / 2), "grey": math.log(4 / 1)}

    def vector(text):
        v = {w: idf[w] for w in text.split()}
        norm = math.sqrt(sum(x * x for x in v.values()))
        return {w: x / norm for w, x in v.items()}

    def cosine(a, b):
        va, vb = vector(a), vector(b)
        return sum(x * vb.get(w, 0.0) for w, x in va.items())

    got = SharedWords(texts).similarity(torch.tensor([0, 2]))
    expected = [[0.0 if i == j else cosine(texts[i], texts[j]) for j in range(4)] for i in (0, 2)]
    assert got.tolist() == [pytest.approx(row, abs=1e-6) for row in expected]
    assert got[0, 1] == pytest.approx(0.5, abs=1e-6) and got[0, 2] == 0.0  # "red" is half of "red fox"


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
    features, flat = TextFeatures(names, descriptions, descriptions), Flat(data.num_entities)
    ranker, weights, valid_mrr = fit_name_matches(flat, data, features, grid=(0.0, 8.0), min_questions=5)
    # the forward match is the clue of tail prediction (a weight of 8 lifts an idf of about 0.5 above a
    # standardised noise of a few units), and the backward match that of head prediction: a tail's
    # name is in its heads' descriptions
    assert weights[("tail", 0)][0] == 8.0 and weights[("head", 0)][1] == 8.0
    assert valid_mrr == pytest.approx(evaluate(ranker, data, "valid")["mrr"], abs=1e-6)
    before, after = evaluate(flat, data, "test"), evaluate(ranker, data, "test")
    # the answer is one of the three names each description holds: tail MRR about (1 + 1/2 + 1/3)/3
    assert after["tail_mrr"] > 0.5 > 0.2 > before["tail_mrr"]
    assert after["head_mrr"] > 0.2 > before["head_mrr"]
    # a relation with fewer valid questions than min_questions takes the weights fitted on all of them
    _, pooled, pooled_mrr = fit_name_matches(flat, data, features, grid=(0.0, 8.0), min_questions=11)
    assert set(pooled) == {("tail", None), ("head", None)} and pooled_mrr == pytest.approx(valid_mrr)


def test_a_match_ranker_adds_exactly_its_weighted_features_to_the_standardised_scores():
    data, names, descriptions = graph_where_the_description_names_the_tail()
    texts = [f"{n} {d}" for n, d in zip(names, descriptions)]
    features, flat = TextFeatures(names, descriptions, texts), Flat(data.num_entities)
    assert FEATURES == ("forward", "backward", "forward_early", "backward_early", "shared")
    ranker = MatchRanker(flat, features, {("tail", None): (0.5, 2.0, 0, 0, 0.0), ("head", None): (0, 0, 0, 0, 1.0),
                                          ("tail", 0): (3.0, 1.0, 0.5, 4.0, 2.0)})
    h, r = data.test[:, 0], data.test[:, 1]
    z = flat.score_tails(h, r)
    z = (z - z.mean(1, keepdim=True)) / z.std(1, keepdim=True)
    m = features.matches
    expected = (z + 3.0 * m.forward(h) + 1.0 * m.backward(h) + 0.5 * m.forward(h, early=True)
                + 4.0 * m.backward(h, early=True) + 2.0 * features.shared.similarity(h))
    assert torch.allclose(ranker.score_tails(h, r), expected, atol=1e-5)
    with pytest.raises(KBError, match=r"default for each side.*'head'"):
        MatchRanker(flat, features, {("tail", None): (0.0,) * 5})
    with pytest.raises(KBError, match=r"one per feature, forward, backward, forward_early, backward_early, shared"):
        MatchRanker(flat, features, {("tail", None): (0.0, 0.0), ("head", None): (0.0,) * 5})


def test_matches_of_another_graph_are_refused():
    data, names, descriptions = graph_where_the_description_names_the_tail()
    with pytest.raises(KBError, match="cover 3 entities, the graph 60"):
        fit_name_matches(Flat(60), data, TextFeatures(names[:3], descriptions[:3], descriptions[:3]))
    with pytest.raises(KBError, match="3 names and 2 descriptions"):
        NameMatches(names[:3], descriptions[:2])
