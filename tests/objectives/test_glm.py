"""GLM's blank infilling: Part A, Part B, both position ids, the targets and the attention mask
of hand-built examples; the Poisson span lengths and the 15 % coverage over 100k tokens; the
random order of Part B; the loss through the model; bad input."""

import math

import pytest
import torch

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.errors import ConfigError, InputError
from babelzoo.objectives import (
    ExampleError,
    Sentence,
    build_objective,
    infill_layout,
    poisson_span_lengths,
    sample_spans,
)

I = -100
S = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=64)
START, END, MASK = S.cls, S.sep, S.mask


def model(name="xlmr_tiny", **overrides):
    options = dict(vocab_size=64, hidden_size=32, num_heads=2, intermediate_size=64, dropout=0.0,
                   attention_dropout=0.0, pad_token_id=0)
    options.update(overrides)
    return babelzoo.create_model(name, **options)


def test_layout_of_a_hand_built_example():
    # x1..x7 = 10..16; spans x5 x6 then x2 (Part B's order)
    layout = infill_layout([10, 11, 12, 13, 14, 15, 16], [(4, 6), (1, 2)], S)
    #                  Part A: [CLS] x1 [M] x3 x4 [M] x7 [SEP] | Part B: [S] x5 x6 | [S] x2
    assert layout["input_ids"] == [1, 10, MASK, 12, 13, MASK, 16, 2, START, 14, 15, START, 11]
    assert layout["position_ids"] == [0, 1, 2, 3, 4, 5, 6, 7, 5, 5, 5, 2, 2]
    assert layout["block_position_ids"] == [0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 1, 2]
    # each Part B input predicts the next token of its span, the last one [END]
    assert layout["labels"] == [I] * 8 + [14, 15, END, 11, END]
    assert layout["part_a"] == 8


def test_collated_batch_and_its_attention_mask_by_hand():
    objective = build_objective("glm", S, model().config)
    batch = objective.collate([Sentence([10, 11, 12]), Sentence([20, 21, 22, 23, 24])],
                              [[(1, 2)], [(3, 5), (0, 1)]])
    assert batch["input_ids"].tolist() == [[1, 10, MASK, 12, 2, START, 11, 0, 0, 0, 0],
                                           [1, MASK, 21, 22, MASK, 2, START, 23, 24, START, 20]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 3, 4, 2, 2, 0, 0, 0, 0],
                                              [0, 1, 2, 3, 4, 5, 4, 4, 4, 1, 1]]
    assert batch["block_position_ids"].tolist() == [[0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0],
                                                    [0, 0, 0, 0, 0, 0, 1, 2, 3, 1, 2]]
    assert batch["labels"].tolist() == [[I, I, I, I, I, 11, END, I, I, I, I],
                                        [I, I, I, I, I, I, 23, 24, END, 20, END]]
    assert batch["attention_mask"].tolist() == [[1] * 7 + [0] * 4, [1] * 11]
    # Part A (5 and 6 tokens) sees Part A; Part B sees Part A and itself up to each token
    assert batch["visible"].long().tolist() == [
        [[1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0],
         [1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0],
         [1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0],
         [1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0],
         [1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0],
         [1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0],
         [1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0],
         [0] * 11, [0] * 11, [0] * 11, [0] * 11],
        [[1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0],
         [1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0],
         [1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0],
         [1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0],
         [1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0],
         [1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0],
         [1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0],
         [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0],
         [1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0],
         [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0],
         [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]]]


def test_poisson_span_lengths():
    probs = poisson_span_lengths(3.0, 40)
    by_hand = [3 ** k * math.exp(-3) / math.factorial(k) for k in range(1, 41)]
    torch.testing.assert_close(probs, torch.tensor(by_hand, dtype=torch.float64) / sum(by_hand))
    assert abs(float(probs[0]) - 3 * math.exp(-3) / (1 - math.exp(-3))) < 1e-12  # P(1): the zero-truncated Poisson


def test_spans_cover_fifteen_percent_with_poisson_lengths_over_100k_tokens():
    generator = torch.Generator().manual_seed(0)
    probs = poisson_span_lengths(3.0, 40)
    n, rows = 100, 1000  # 100k tokens
    lengths, covered = [], 0
    for _ in range(rows):
        spans = sample_spans(n, 0.15, probs, generator)
        sizes = [end - start for start, end in spans]
        assert all(0 <= a < b <= n for a, b in spans)
        assert all(b1 < a2 for (_, b1), (a2, _) in zip(spans, spans[1:]))  # apart, never touching
        # drawn until at least 15 % are covered, and not one span longer: without the longest
        # span (at least as long as the last one drawn) the cover is short of the 15 tokens
        assert sum(sizes) >= 15 > sum(sizes) - max(sizes)
        lengths += sizes
        covered += sum(sizes)
    assert 0.15 <= covered / (n * rows) < 0.15 + 3.5 / n  # the overshoot: less than one mean span
    counts = torch.bincount(torch.tensor(lengths), minlength=41)[1:].double()
    total = counts.sum()
    for k in range(8):  # frequencies of ℓ = 1..8 within 4 standard deviations of P(ℓ)
        p = float(probs[k])
        assert abs(float(counts[k]) - total * p) < 4 * float((total * p * (1 - p)) ** 0.5), (k + 1, counts[:8])
    mean = sum(lengths) / len(lengths)
    assert abs(mean - 3 / (1 - math.exp(-3))) < 0.1  # E[ℓ] = λ / (1 − e^{−λ})


def test_short_texts_still_get_a_span():
    generator = torch.Generator().manual_seed(0)
    probs = poisson_span_lengths()
    for n in (1, 2, 3, 6):
        for _ in range(50):
            spans = sample_spans(n, 0.15, probs, generator)
            assert spans and all(0 <= a < b <= n for a, b in spans)


def test_part_b_order_is_random():
    torch.manual_seed(0)
    objective = build_objective("glm", S, model().config, coverage=0.3)
    sorted_rows, expected = 0, 0.0
    for _ in range(60):
        batch = objective.prepare([list(range(10, 50))] * 4)
        starts = batch["block_position_ids"] == 1
        for row in range(4):
            masks = batch["position_ids"][row][starts[row]].tolist()  # each span's [MASK] position, Part B order
            sorted_rows += masks == sorted(masks)
            expected += 1 / math.factorial(len(masks))
            # the spans' [MASK]s in Part A are exactly the positions named, once each
            part_a = batch["input_ids"][row][:int((batch["block_position_ids"][row] == 0).sum())]
            assert sorted(masks) == (part_a == MASK).nonzero().squeeze(1).tolist()
    assert abs(sorted_rows - expected) < 4 * expected ** 0.5 + 2


def test_loss_through_the_model_uses_both_positions_and_the_mask():
    torch.manual_seed(0)
    net = model().eval()
    objective = build_objective("glm", S, net.config).eval()
    batch = objective.collate([Sentence([10, 11, 12, 13, 14, 15, 16]), Sentence([20, 21, 22])],
                              [[(4, 6), (1, 2)], [(1, 2)]])
    loss = objective(net, batch)
    # by hand: word embeddings + block positions as inputs_embeds, position 1 as position_ids
    embeds = net.embeddings.word.weight[batch["input_ids"]] + objective.block_position.weight[batch["block_position_ids"]]

    def run(position_ids, embeds=embeds):
        return net(inputs_embeds=embeds, attention_mask=batch["attention_mask"], position_ids=position_ids,
                   visible=batch["visible"]).last_hidden

    hidden = run(batch["position_ids"])
    labels = batch["labels"]
    logits = net.mlm_logits(hidden)[labels.ne(I)]
    torch.testing.assert_close(loss.value, torch.nn.functional.cross_entropy(logits, labels[labels.ne(I)]),
                               rtol=1e-5, atol=1e-6)
    assert int(loss.metrics["predicted"]) == 5 + 2
    # position 1 matters: with plain 0..L-1 positions Part B's states differ
    assert not torch.allclose(run(None)[0, 8:13], hidden[0, 8:13], atol=1e-4)
    # Part A never sees Part B: changing Part B leaves Part A's states as they were
    changed = embeds.clone()
    changed[0, 8:13] += torch.randn(5, embeds.shape[-1])  # (a constant shift would vanish in the norm)
    after = run(batch["position_ids"], changed)
    torch.testing.assert_close(after[0, :8], hidden[0, :8])
    assert not torch.allclose(after[0, 8:13], hidden[0, 8:13], atol=1e-4)
    # the earlier span (x5 x6) does not see the later one ([S] x2)
    changed = embeds.clone()
    changed[0, 11:13] += torch.randn(2, embeds.shape[-1])
    torch.testing.assert_close(run(batch["position_ids"], changed)[0, :11], hidden[0, :11])


def test_long_texts_are_cut_to_max_length_and_counted():
    objective = build_objective("glm", S, model().config, max_length=12)
    batch = objective.prepare([list(range(10, 30)), [40, 41]])
    assert int(batch["truncated"]) == 20 - 10
    part_a = (batch["block_position_ids"] == 0) & batch["attention_mask"].bool()
    assert int(batch["position_ids"].max()) < 12 and int(part_a[0].sum()) <= 12
    objective(model(), batch)  # position ids stay inside the model's table


def test_bad_input():
    objective = build_objective("glm", S, model().config)
    with pytest.raises(ExampleError, match="example 1 is empty"):
        objective.prepare([[10, 11], []])
    with pytest.raises(ExampleError, match="empty batch"):
        objective.prepare([])
    with pytest.raises(InputError, match=r"span \(1, 3\)"):
        infill_layout([10, 11, 12, 13], [(0, 2), (1, 3)], S)  # overlapping
    with pytest.raises(InputError, match=r"span \(3, 6\)"):
        infill_layout([10, 11, 12, 13], [(3, 6)], S)  # past the end
    for options, message in [({"coverage": 0.0}, "coverage"), ({"poisson_lambda": -1.0}, "poisson_lambda"),
                             ({"span_max": 0}, "span_max"), ({"max_length": 300}, "max_positions=")]:
        with pytest.raises(ConfigError, match=message):
            build_objective("glm", S, model().config, **options)
