"""Task heads: the formulas of each head, the first-sub-word fast path, frozen probes, and the
save/load round trip that restores a head with its label names."""

import pytest
import torch

import babelzoo
from babelzoo.zoo.config import ConfigError
from babelzoo.zoo.model_config import HeadConfig
from babelzoo.zoo.build import with_head
from babelzoo.zoo.heads import HEADS

LABELS = ("a", "b", "c")


def tiny(**head):
    return babelzoo.create_model("xlmr_tiny", num_layers=2, hidden_size=32, num_heads=4, intermediate_size=64,
                                 vocab_size=99, pooler=True, head={"labels": LABELS, **head} if head else None)


def batch():
    ids = torch.randint(5, 99, (3, 7))
    mask = torch.ones(3, 7, dtype=torch.long)
    mask[1, 5:] = 0
    mask[2, 3:] = 0
    return ids.masked_fill(mask.eq(0), 1), mask


def test_heads_are_registered_by_name():
    assert HEADS.list() == ["probe", "sequence_classification", "token_classification"]


def test_a_head_leaves_the_encoders_initial_weights_unchanged():
    torch.manual_seed(3)
    plain = tiny()
    torch.manual_seed(3)
    headed = tiny(kind="sequence_classification")
    state = headed.state_dict()
    assert {k for k in state if k.startswith("head.")} == {"head.out.weight", "head.out.bias"}
    for key, value in plain.state_dict().items():
        assert torch.equal(value, state[key]), key


@pytest.mark.parametrize("pooling", ["mean", "cls", "pooler"])
def test_sequence_head_is_a_linear_map_of_the_pooled_layer(pooling):
    model = tiny(kind="sequence_classification", pooling=pooling).eval()
    ids, mask = batch()
    out = model(ids, attention_mask=mask)
    h = out.last_hidden
    pooled = {"mean": (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True),
              "cls": h[:, 0], "pooler": out.pooled}[pooling]
    expected = pooled @ model.head.out.weight.T + model.head.out.bias
    torch.testing.assert_close(model.head_logits(ids, attention_mask=mask), expected, rtol=0, atol=1e-6)


def test_roberta_style_head_adds_dense_and_tanh():
    model = tiny(kind="sequence_classification", pooling="cls", hidden_layer=True).eval()
    ids, mask = batch()
    h0 = model(ids, attention_mask=mask).last_hidden[:, 0]
    hidden = torch.tanh(h0 @ model.head.dense.weight.T + model.head.dense.bias)
    expected = hidden @ model.head.out.weight.T + model.head.out.bias
    torch.testing.assert_close(model.head_logits(ids, attention_mask=mask), expected, rtol=0, atol=1e-6)


def test_token_head_at_selected_positions_equals_the_full_pass():
    model = tiny(kind="token_classification").eval()
    ids, mask = batch()
    full = model.head_logits(ids, attention_mask=mask)
    assert full.shape == (3, 7, 3)
    positions = torch.zeros(3, 7, dtype=torch.bool)
    positions[0, [1, 4]] = positions[1, 2] = positions[2, 1] = True
    fast = model.head_logits(ids, attention_mask=mask, positions=positions)
    torch.testing.assert_close(fast, full[positions], rtol=0, atol=1e-5)


def test_probe_reads_any_layer_of_a_frozen_encoder():
    model = tiny(kind="probe", layer=1, pooling="mean", dropout=0.0)
    trainable = sorted(n for n, p in model.named_parameters() if p.requires_grad)
    assert trainable == ["head.out.bias", "head.out.weight"]
    model.train()
    assert model.head.training and not model.encoder.training and not model.embeddings.training
    ids, mask = batch()
    logits = model.head_logits(ids, attention_mask=mask)
    h1 = model(ids, attention_mask=mask, output_hidden_states=True).hidden_states[1]
    pooled = (h1 * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    torch.testing.assert_close(logits, pooled @ model.head.out.weight.T + model.head.out.bias, rtol=0, atol=1e-6)
    logits.sum().backward()
    assert model.embeddings.word.weight.grad is None and model.head.out.weight.grad is not None


def test_save_and_load_restore_the_head_and_its_labels(tmp_path):
    model = tiny(kind="sequence_classification", pooling="mean", dropout=0.2).eval()
    model.save_pretrained(tmp_path)
    loaded = babelzoo.from_pretrained(tmp_path).eval()
    assert loaded.config.head == model.config.head
    assert loaded.config.head.labels == LABELS and loaded.config.head.dropout == 0.2
    ids, mask = batch()
    assert torch.equal(loaded.head_logits(ids, attention_mask=mask), model.head_logits(ids, attention_mask=mask))


def test_with_head_copies_the_encoder_and_replaces_a_head(tmp_path):
    base = tiny().eval()
    model = with_head(base, {"kind": "token_classification", "labels": ["x", "y"]}).eval()
    ids, mask = batch()
    assert torch.equal(model(ids, attention_mask=mask).last_hidden, base(ids, attention_mask=mask).last_hidden)
    again = with_head(model, {"kind": "sequence_classification", "labels": ["p", "q", "r", "s"]})
    assert again.head.out.out_features == 4 and again.config.head.kind == "sequence_classification"
    base.save_pretrained(tmp_path)  # an encoder checkpoint, loaded under a new head
    loaded = babelzoo.create_model("xlmr_tiny", weights=tmp_path, num_layers=2, hidden_size=32, num_heads=4,
                                   intermediate_size=64, vocab_size=99, pooler=True,
                                   head={"kind": "sequence_classification", "labels": ["n", "p"]})
    assert torch.equal(loaded.embeddings.word.weight, base.embeddings.word.weight)


@pytest.mark.parametrize("head, message", [
    ({"labels": ["only"]}, "at least two"),
    ({"labels": ["a", "a"]}, "must not repeat"),
    ({"labels": ["a", "b"], "layer": 9}, "must index the model's 3 hidden states"),
    ({"labels": ["a", "b"], "pooling": "attention"}, "must be one of"),
    ({"labels": ["a", "b"], "dropout": 1.5}, "dropout"),
])
def test_bad_head_configs_name_the_field(head, message):
    with pytest.raises(ConfigError, match=message):
        tiny(**head)


def test_pooler_pooling_needs_a_pooler():
    with pytest.raises(ConfigError, match="needs a model with a pooler"):
        babelzoo.create_model("xlmr_tiny", pooler=False, head={"labels": ["a", "b"], "pooling": "pooler"})


def test_unknown_head_kind_suggests_a_close_one():
    with pytest.raises(KeyError, match="did you mean 'probe'"):
        tiny(kind="prob")


def test_head_logits_needs_a_head():
    with pytest.raises(ValueError, match="has no task head"):
        tiny().head_logits(torch.tensor([[5, 6]]))


def test_head_config_round_trips_through_json():
    config = babelzoo.model_config("xlmr_tiny", head={"labels": ["x", "y"], "kind": "probe", "layer": 1})
    assert babelzoo.ModelConfig.from_json(config.to_json()) == config
    assert isinstance(config.head, HeadConfig) and config.head.num_labels == 2
