import dataclasses
import json

import pytest

import babelzoo
from babelzoo.zoo.config import ConfigError
from babelzoo.zoo.families.transformer.config import TransformerConfig
from babelzoo.zoo.model_config import KnowledgeConfig, ModelConfig, VisionConfig


def test_hidden_size_must_divide_by_heads():
    with pytest.raises(ConfigError, match=r"TransformerConfig.hidden_size=100 must be divisible by num_heads=12"):
        TransformerConfig(hidden_size=100)


@pytest.mark.parametrize("field,value,message", [
    ("activation", "swish", "TransformerConfig.activation='swish' must be one of 'gelu', 'gelu_tanh', 'relu', 'silu'"),
    ("num_layers", 0, "TransformerConfig.num_layers=0 must be a positive integer"),
    ("dropout", 1.5, "TransformerConfig.dropout=1.5 must be in [0, 1)"),
    ("pad_token_id", 9000, "TransformerConfig.pad_token_id=9000 must be smaller than vocab_size=8000"),
])
def test_bad_values_name_the_field(field, value, message):
    with pytest.raises(ConfigError) as err:
        babelzoo.create_model("xlm_tiny", **{field: value})
    assert str(err.value) == message


def test_unknown_override_lists_valid_keys():
    with pytest.raises(ConfigError) as err:
        babelzoo.create_model("xlmr_tiny", hiden_size=64)
    message = str(err.value)
    assert "unknown config key 'hiden_size'" in message
    assert "hidden_size" in message and "num_heads" in message


def test_unknown_subconfig_key_lists_valid_keys():
    with pytest.raises(ConfigError, match=r"unknown VisionConfig key\(s\) \['img_size'\]; valid keys: backbone"):
        ModelConfig().override(vision={"img_size": 64})


def test_json_round_trip_is_exact(tmp_path):
    config = ModelConfig(architecture="x", text=TransformerConfig(hidden_size=64, num_heads=2, embedding_size=32),
                         vision=VisionConfig(image_size=64, patch_size=16),
                         knowledge=KnowledgeConfig(entity_vocab_size=10, fusion_layers=(0, 1)))
    path = tmp_path / "config.json"
    config.to_json(path)
    assert ModelConfig.from_json(path) == config
    assert ModelConfig.from_dict(json.loads(path.read_text())) == config


def test_from_dict_rejects_unknown_keys_with_location(tmp_path):
    data = ModelConfig().to_dict()
    data["text"]["hidden"] = 3
    with pytest.raises(ConfigError, match=r"unknown TransformerConfig key\(s\) \['hidden'\] in text"):
        ModelConfig.from_dict(data)


def test_invalid_json_names_file_and_line(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{\n "architecture": "x",\n "text": {,}\n}')
    with pytest.raises(ConfigError, match=r"config.json:3: invalid JSON"):
        ModelConfig.from_json(path)


def test_overrides_dotted_and_nested():
    config = ModelConfig().override(hidden_size=64, num_heads=4, **{"vision.image_size": 32, "vision.patch_size": 8})
    assert config.text.hidden_size == 64 and config.vision.image_size == 32
    config = config.override(vision={"patch_size": 16})
    assert config.vision.patch_size == 16 and config.vision.image_size == 32


def test_configs_are_frozen():
    config = TransformerConfig()
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'hidden_size'"):
        config.hidden_size = 3
