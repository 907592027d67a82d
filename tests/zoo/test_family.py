"""The family seam: text configs name their family, families build the parts, and a family's
layer stack runs in pieces through its public API exactly as in one forward pass."""

import json

import pytest
import torch

import babelzoo
from babelzoo.zoo.config import ConfigError, EncoderConfig
from babelzoo.zoo.model_config import ModelConfig
from babelzoo.zoo.family import FAMILIES, load_builtin_families
from babelzoo.zoo.layers import LayerStack
from babelzoo.zoo.families.rnn.config import RNNConfig
from babelzoo.zoo.families.transformer.config import TransformerConfig

load_builtin_families()
TEXT_TINY = [n for n in babelzoo.list_models("*_tiny") if babelzoo.model_config(n).fusion is None
             and not babelzoo.model_config(n).text.is_encoder_decoder]  # encoders only


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_each_family_config_names_its_family_and_round_trips(name):
    config_class = FAMILIES.get(name).config
    config = ModelConfig(text=config_class(hidden_size=16, num_heads=2, vocab_size=50, pad_token_id=0))
    data = json.loads(config.to_json())
    assert data["text"]["family"] == name
    assert type(ModelConfig.from_dict(data).text) is config_class
    assert ModelConfig.from_dict(data) == config


def test_an_unknown_family_is_an_error_listing_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown text family 'perceiver'; known families: .*rnn.*transformer"):
        ModelConfig.from_dict({"text": {"family": "perceiver"}})


def test_a_field_of_another_family_is_an_error_naming_the_valid_keys():
    with pytest.raises(ConfigError, match=r"unknown RNNConfig key\(s\) \['relative_attention'\]"):
        ModelConfig.from_dict({"text": {"family": "rnn", "relative_attention": "t5"}})
    with pytest.raises(ConfigError, match="unknown config key 'cell'"):
        babelzoo.model_config("mbert_tiny", cell="gru")
    assert babelzoo.model_config("bilstm_tiny", cell="gru").text.cell == "gru"


def test_a_family_config_class_refuses_another_familys_data():
    with pytest.raises(ConfigError, match="family 'rnn' is not TransformerConfig's"):
        TransformerConfig.from_dict({"family": "rnn"})
    assert isinstance(EncoderConfig.from_dict({"family": "rnn"}), RNNConfig)


def test_a_legacy_rnn_config_with_an_embedding_field_it_cannot_hold_is_an_error():
    legacy = {"encoder": "lstm", "position_offset": 2, "hidden_size": 16, "num_heads": 2}
    with pytest.raises(ConfigError, match=r"position_offset=2: the rnn family has no such field"):
        ModelConfig.from_dict({"text": legacy})
    migrated = ModelConfig.from_dict({"text": {**legacy, "position_offset": 0, "norm_position": "pre"}})
    assert migrated.text == RNNConfig(cell="lstm", hidden_size=16, num_heads=2)


@pytest.mark.parametrize("name", TEXT_TINY)
def test_the_stack_run_in_pieces_equals_the_forward_pass(name):
    model = babelzoo.create_model(name, vocab_size=64, pad_token_id=0).eval()
    if not isinstance(model.encoder, LayerStack):
        pytest.skip(f"{name}'s encoder is not a layer stack")
    torch.manual_seed(0)
    ids = torch.randint(3, 64, (2, 9))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    ids[1, 6:] = 0
    with torch.no_grad():
        out = model(ids, attention_mask=mask, output_hidden_states=True)
        stack = model.encoder
        x = model.embeddings(ids)
        state = stack.prepare(mask, ids.shape[1])
        states = [x]
        for i in range(stack.num_layers):
            x = stack.run(x, state, i, i + 1, states=states)
        x = stack.finish(x)
    torch.testing.assert_close(x, out.last_hidden, rtol=0, atol=0)
    assert len(states) == len(out.hidden_states)
    for mine, theirs in zip(states[1:-1], out.hidden_states[1:-1]):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=0)
