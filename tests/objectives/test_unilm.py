"""UniLM: the four self-attention masks by hand (padding and the source/target boundary
included), the layouts and segment ids each mode builds, the masks' effect inside the model,
the mode shares over many batches, masking only the target under seq2seq, and bad input."""

import pytest
import torch

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.errors import ConfigError
from babelzoo.objectives import UNILM_MODES, ExampleError, build_objective, unilm_visibility

I = -100
SPECIALS = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=64)
KEEP = {"mask_token": 0.0, "random_token": 0.0}  # chosen tokens stay themselves: layouts are readable


def model(**overrides):
    options = dict(vocab_size=64, hidden_size=32, num_heads=2, intermediate_size=64, dropout=0.0,
                   attention_dropout=0.0)
    options.update(overrides)
    return babelzoo.create_model("mbert_tiny", **options)


def as_int(visible):
    return visible.long().tolist()


# Two rows padded to width 5: row 0 has 5 real tokens (source [CLS] a [SEP], 3), row 1 has 4
# (source [CLS] a, 2) and one padding position, which sees nothing and is seen by nobody.
LENGTHS, SOURCES = torch.tensor([5, 4]), torch.tensor([3, 2])


def test_bidirectional_mask_by_hand():
    assert as_int(unilm_visibility("bidirectional", LENGTHS, SOURCES, 5)) == [
        [[1, 1, 1, 1, 1], [1, 1, 1, 1, 1], [1, 1, 1, 1, 1], [1, 1, 1, 1, 1], [1, 1, 1, 1, 1]],
        [[1, 1, 1, 1, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 0], [0, 0, 0, 0, 0]]]


def test_left_to_right_mask_by_hand():
    assert as_int(unilm_visibility("left_to_right", LENGTHS, SOURCES, 5)) == [
        [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]],
        [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [0, 0, 0, 0, 0]]]


def test_right_to_left_mask_by_hand():
    assert as_int(unilm_visibility("right_to_left", LENGTHS, SOURCES, 5)) == [
        [[1, 1, 1, 1, 1], [0, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 0, 1, 1], [0, 0, 0, 0, 1]],
        [[1, 1, 1, 1, 0], [0, 1, 1, 1, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 0], [0, 0, 0, 0, 0]]]


def test_seq2seq_mask_by_hand():
    # source rows see the whole source only; target rows see the source and the target to their left
    assert as_int(unilm_visibility("seq2seq", LENGTHS, SOURCES, 5)) == [
        [[1, 1, 1, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]],
        [[1, 1, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [0, 0, 0, 0, 0]]]


DOCUMENTS = [[[10, 11], [12, 13, 14]], [[20], [21, 22]]]


def test_paired_modes_frame_two_segments_with_their_segment_ids():
    objective = build_objective("unilm", SPECIALS, model().config, masking=KEEP)
    for mode in ("bidirectional", "seq2seq"):
        batch = objective.prepare(DOCUMENTS, mode=mode)
        assert batch["input_ids"].tolist() == [[1, 10, 11, 2, 12, 13, 14, 2], [1, 20, 2, 21, 22, 2, 0, 0]]
        assert batch["segment_ids"].tolist() == [[0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 0, 0]]
        assert batch["attention_mask"].tolist() == [[1] * 8, [1] * 6 + [0] * 2]
        assert int(batch["mode"]) == UNILM_MODES.index(mode)
        assert torch.equal(batch["visible"], unilm_visibility(mode, torch.tensor([8, 6]), torch.tensor([4, 3]), 8))


def test_unidirectional_modes_read_one_segment():
    objective = build_objective("unilm", SPECIALS, model().config, masking=KEEP)
    for mode in ("left_to_right", "right_to_left"):
        batch = objective.prepare([[[10, 11, 12]], [[20, 21]]], mode=mode)
        assert batch["input_ids"].tolist() == [[1, 10, 11, 12, 2], [1, 20, 21, 2, 0]]
        assert batch["segment_ids"].tolist() == [[0] * 5, [0] * 5]
        assert torch.equal(batch["visible"], unilm_visibility(mode, torch.tensor([5, 4]), torch.tensor([5, 4]), 5))


def test_lm_segments_name_the_mode():
    objective = build_objective("unilm", SPECIALS, model(segment_vocab_size=6).config, masking=KEEP,
                                lm_segments=True)
    expected = {"bidirectional": [0, 0, 0, 0, 1, 1, 1, 1], "seq2seq": [4, 4, 4, 4, 5, 5, 5, 5]}
    for mode, segments in expected.items():
        assert objective.prepare(DOCUMENTS[:1], mode=mode)["segment_ids"].tolist() == [segments]
    assert objective.prepare([[[10, 11]]], mode="left_to_right")["segment_ids"].tolist() == [[2] * 4]
    assert objective.prepare([[[10, 11]]], mode="right_to_left")["segment_ids"].tolist() == [[3] * 4]
    with pytest.raises(ConfigError, match="segment_vocab_size=2"):
        build_objective("unilm", SPECIALS, model().config, lm_segments=True)


def test_seq2seq_masks_the_target_only_and_every_mode_masks_fifteen_percent():
    torch.manual_seed(0)
    objective = build_objective("unilm", SPECIALS, model().config)
    documents = [[list(range(10, 30)), list(range(30, 50))]] * 8
    for mode in UNILM_MODES:
        chosen = candidates = 0
        for _ in range(30):
            batch = objective.prepare(documents, mode=mode)
            labelled = batch["labels"].ne(I)
            tokens = batch["input_ids"].ge(5) | labelled  # the non-special positions
            if mode == "seq2seq":
                source = (batch["segment_ids"] == 0) & batch["attention_mask"].bool()
                assert not bool((labelled & source).any())
                tokens &= ~source
            chosen += int(labelled.sum())
            candidates += int(tokens.sum())
        assert abs(chosen / candidates - 0.15) < 0.01, (mode, chosen / candidates)


def test_the_masks_reach_the_model():
    """A prediction changes only with the tokens its mode lets it see."""
    torch.manual_seed(0)
    net = model().eval()
    objective = build_objective("unilm", SPECIALS, net.config, masking=KEEP)
    single, pair = [[list(range(10, 18))]], [[[10, 11, 12, 13], [14, 15, 16, 17]]]

    def states(mode, change):
        batch = objective.prepare(single if mode in ("left_to_right", "right_to_left") else pair, mode=mode)
        ids = batch["input_ids"].clone()
        ids[0, change] = 40
        return net(ids, attention_mask=batch["attention_mask"], segment_ids=batch["segment_ids"],
                   visible=batch["visible"]).last_hidden[0]

    def unchanged(mode, change):
        return [bool(torch.allclose(a, b, atol=1e-6)) for a, b in zip(states(mode, change), states(mode, []))]

    # one segment: [CLS] 10..17 [SEP] (10 tokens); change token 4
    assert unchanged("left_to_right", 4) == [True] * 4 + [False] * 6
    assert unchanged("right_to_left", 4) == [False] * 5 + [True] * 5
    # a pair: [CLS] 10..13 [SEP] | 14..17 [SEP] (11 tokens); a target token (7) reaches the
    # later targets only, a source token (2) every position
    assert unchanged("bidirectional", 7) == [False] * 11
    assert unchanged("seq2seq", 7) == [True] * 7 + [False] * 4
    assert unchanged("seq2seq", 2) == [False] * 11


def test_loss_is_the_tied_head_cross_entropy_under_the_mask():
    torch.manual_seed(0)
    net = model().eval()
    objective = build_objective("unilm", SPECIALS, net.config)
    batch = objective.prepare(DOCUMENTS, mode="seq2seq")
    loss = objective(net, batch)
    hidden = net(batch["input_ids"], attention_mask=batch["attention_mask"], segment_ids=batch["segment_ids"],
                 visible=batch["visible"]).last_hidden
    labels = batch["labels"]
    expected = torch.nn.functional.cross_entropy(net.mlm_logits(hidden)[labels.ne(I)], labels[labels.ne(I)])
    torch.testing.assert_close(loss.value, expected, rtol=1e-5, atol=1e-6)


def assert_shares_match(counts, shares):
    n = sum(counts)
    for mode, share in shares.items():
        sd = (n * share * (1 - share)) ** 0.5
        assert abs(counts[UNILM_MODES.index(mode)] - n * share) <= 4 * sd, (mode, counts)


def test_modes_are_drawn_with_their_shares():
    torch.manual_seed(0)
    paper = {"bidirectional": 1 / 3, "left_to_right": 1 / 6, "right_to_left": 1 / 6, "seq2seq": 1 / 3}
    objective = build_objective("unilm", SPECIALS, model().config)
    batches = [int(objective.prepare(DOCUMENTS)["mode"]) for _ in range(600)]  # the mode of each batch
    assert_shares_match([batches.count(i) for i in range(4)], paper)
    draws = [objective.draw_mode() for _ in range(6000)]
    assert_shares_match([draws.count(mode) for mode in UNILM_MODES], paper)
    chosen = build_objective("unilm", SPECIALS, model().config, modes={"seq2seq": 3, "left_to_right": 1})
    draws = [chosen.draw_mode() for _ in range(4000)]
    assert_shares_match([draws.count(mode) for mode in UNILM_MODES],
                 {"seq2seq": 0.75, "left_to_right": 0.25, "bidirectional": 0.0, "right_to_left": 0.0})


def test_long_documents_are_cut_and_counted():
    objective = build_objective("unilm", SPECIALS, model().config, max_length=10)
    batch = objective.prepare([[list(range(10, 22)), list(range(30, 35))]], mode="bidirectional")
    assert batch["input_ids"].shape[1] == 10 and int(batch["truncated"]) == 12 + 5 - 7
    batch = objective.prepare([[list(range(10, 22))]], mode="left_to_right")
    assert batch["input_ids"].shape[1] == 10 and int(batch["truncated"]) == 12 - 8


@pytest.mark.parametrize("examples, mode, message", [
    ([[]], "left_to_right", "example 0: expected a document"),
    ([[[10], []]], "left_to_right", "example 0 has an empty sentence"),
    ([[[10, 11]], [[12]]], "seq2seq", "example 0 has 1 sentence"),
    ([], None, "empty batch"),
])
def test_bad_documents_are_reported(examples, mode, message):
    objective = build_objective("unilm", SPECIALS, model().config)
    with pytest.raises(ExampleError, match=message):
        objective.prepare(examples, mode=mode)


@pytest.mark.parametrize("options, message", [
    ({"modes": {"bidirectonal": 1}}, "unknown mode"),
    ({"modes": {"seq2seq": -1}}, "non-negative"),
    ({"modes": {"seq2seq": 0}}, "at least one must be positive"),
    ({"max_length": 300}, "max_length=300 exceeds the model's max_positions=256"),
])
def test_bad_options_are_refused(options, message):
    with pytest.raises(ConfigError, match=message):
        build_objective("unilm", SPECIALS, model().config, **options)
