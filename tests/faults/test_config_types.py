"""Config values are checked against their declared types, with the file and field named."""

import json

import pytest

from babelzoo.zoo.config import ConfigError
from babelzoo.zoo.families.transformer.config import TransformerConfig
from babelzoo.zoo.model_config import ModelConfig

TEXT = {"vocab_size": 64, "hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64}


def write(tmp_path, data) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("field, value, message", [
    ("tie_word_embeddings", "false", "tie_word_embeddings='false' must be true or false"),
    ("mlm_head", "no", "mlm_head='no' must be true or false"),
    ("layer_norm_eps", "1e-5", "layer_norm_eps='1e-5' must be a number"),
    ("num_layers", 2.5, "num_layers=2.5 must be an integer"),
    ("embedding_size", "16", "embedding_size='16' must be an integer or null"),
    ("pooler", 1, "pooler=1 must be true or false"),
])
def test_a_wrongly_typed_field_names_file_and_field(tmp_path, field, value, message):
    path = write(tmp_path, {"architecture": "custom", "text": {**TEXT, field: value}})
    with pytest.raises(ConfigError) as err:
        ModelConfig.from_json(path)
    assert str(err.value).startswith(f"{path}[text]: TransformerConfig.{field}")
    assert message in str(err.value)


def test_numbers_keep_their_meaning():
    config = TransformerConfig(**TEXT, dropout=0, layer_norm_eps=1e-5)  # an int is a valid float
    assert config.dropout == 0 and config.layer_norm_eps == 1e-5


@pytest.mark.parametrize("data, message", [
    ({"architecture": "custom", "text": None}, "ModelConfig.text is required"),
    ({"architecture": "custom"}, "ModelConfig.text is missing"),
    ({"architecture": "custom", "text": [1, 2]}, "expected a mapping of EncoderConfig fields, got list"),
    ([1, 2], "expected a mapping, got list"),
])
def test_a_missing_or_malformed_part_is_not_replaced_by_a_default(tmp_path, data, message):
    path = write(tmp_path, data)
    with pytest.raises(ConfigError, match=message) as err:
        ModelConfig.from_json(path)
    assert path in str(err.value)


def test_config_that_is_not_utf8_names_the_file(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b'{"architecture": "caf\xe9"}')
    with pytest.raises(ConfigError, match=rf"{path}: not UTF-8 text \(byte 21"):
        ModelConfig.from_json(path)
