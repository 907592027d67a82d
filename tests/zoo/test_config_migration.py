"""Checkpoints written before text configs were split per family still load, to the same outputs.

``tests/fixtures/legacy_checkpoints`` was written by that older code (see its README): flat
``text`` fields, ``encoder: lstm|gru``, ERNIE fusion weights under ``ffn.entity_*``.
"""

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import babelzoo
from babelzoo.zoo.model_config import ModelConfig

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "legacy_checkpoints"
EXPECTED = load_file(ROOT / "expected.safetensors")
CASES = ["nezha", "xlm_t5_albert", "xlmr", "bigru", "ernie", "vl_fusion"]


@pytest.mark.parametrize("name", CASES)
def test_legacy_checkpoint_loads_to_the_same_outputs(name):
    model = babelzoo.from_pretrained(ROOT / name).eval()
    inputs = dict(input_ids=EXPECTED["input_ids"], attention_mask=EXPECTED["attention_mask"])
    if name == "ernie":
        inputs["entities"] = EXPECTED["ernie_entities"]
    if name == "vl_fusion":
        inputs["pixel_values"] = EXPECTED["vl_fusion_pixels"]
    with torch.no_grad():
        hidden = model(**inputs).last_hidden
    torch.testing.assert_close(hidden, EXPECTED[name], rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", CASES)
def test_migrated_config_round_trips_in_the_current_layout(name):
    config = ModelConfig.from_json(ROOT / name / "config.json")
    again = ModelConfig.from_json(config.to_json())
    assert again == config
    assert again.to_dict() == config.to_dict()
