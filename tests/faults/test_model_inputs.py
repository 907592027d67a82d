"""What a model is given: a mask of another shape than its inputs, or weights of another kind of
number than its parameters, is refused by name, never broadcast or converted silently."""

import re

import pytest
import torch
from safetensors.torch import load_file, save_file

import babelzoo
from babelzoo.errors import InputError
from babelzoo.errors import CheckpointError
from babelzoo.zoo.checkpoint_io import load_weights_into
from babelzoo.zoo.family import FAMILIES, load_all_families


def one_tiny_model_per_family() -> dict[str, str]:
    """family -> its first text-only ``*_tiny`` entry in the zoo's order: every family's forward
    checks its masks, so a new family is given wrong ones the moment it registers a tiny entry."""
    chosen: dict[str, str] = {}
    for name in babelzoo.list_models("*_tiny"):
        config = babelzoo.model_config(name)
        if config.fusion is None:
            chosen.setdefault(type(config.text).family, name)
    return chosen


MODELS = one_tiny_model_per_family()
SEQ2SEQ = {name for name in MODELS.values() if babelzoo.model_config(name).text.is_encoder_decoder}


def test_every_family_is_given_masks(every_part_tested):
    load_all_families()
    every_part_tested(FAMILIES, MODELS)


@pytest.fixture(scope="module")
def built():
    """Each model in eval mode, built once for the mask shapes it is given (it is only read)."""
    models = {}

    def get(name: str):
        if name not in models:
            models[name] = babelzoo.create_model(name).eval()
        return models[name]
    return get


@pytest.mark.parametrize("name", sorted(MODELS.values()))
@pytest.mark.parametrize("shape", [(2, 7), (2, 3), (1, 5), (5,), (2, 5, 1)])
def test_an_all_ones_mask_of_another_shape_is_refused(name, shape, built):
    model = built(name)
    ids = torch.randint(5, 50, (2, 5))
    extra = {"decoder_input_ids": torch.randint(5, 50, (2, 4))} if name in SEQ2SEQ else {}
    message = (f"attention_mask has shape {list(shape)} but input_ids has shape [2, 5]: the mask must be [2, 5] "
               "(1 = token, 0 = padding)")
    with pytest.raises(InputError, match=re.escape(message) + "$"):
        model(ids, attention_mask=torch.ones(shape, dtype=torch.long), **extra)
    with torch.no_grad():  # the right shape works, and equals no mask at all on unpadded rows
        masked = model(ids, attention_mask=torch.ones(2, 5, dtype=torch.long), **extra)
        plain = model(ids, **extra)
    first = masked.logits if name in SEQ2SEQ else masked.last_hidden
    torch.testing.assert_close(first, plain.logits if name in SEQ2SEQ else plain.last_hidden)


def test_a_visibility_matrix_must_fit_the_inputs():
    model = babelzoo.create_model("xlmr_tiny").eval()
    ids = torch.randint(5, 50, (2, 5))
    with pytest.raises(InputError, match=re.escape("attention_mask has shape [2, 5, 5] but input_ids has shape [2, 5]: "
                                                   "the mask must be [2, 5] (1 = token, 0 = padding); a [B, L, L] "
                                                   "matrix of which position may see which goes in visible=")):
        model(ids, attention_mask=torch.ones(2, 5, 5, dtype=torch.long))
    with pytest.raises(InputError, match=re.escape("visible has shape [2, 5, 6] but input_ids has shape [2, 5]: the "
                                                   "visibility matrix must be [2, 5, 5] or [5, 5]")):
        model(ids, visible=torch.ones(2, 5, 6, dtype=torch.bool))
    with pytest.raises(InputError, match=re.escape("attention_mask has shape [2, 4] but inputs_embeds has shape "
                                                   "[2, 5, 64]")):
        model(inputs_embeds=torch.randn(2, 5, model.config.text.embedding_size or 64),
              attention_mask=torch.ones(2, 4))
    with torch.no_grad():
        tree = model(ids, visible=torch.ones(5, 5, dtype=torch.bool)).last_hidden
        torch.testing.assert_close(tree, model(ids).last_hidden)


def test_a_decoder_mask_must_fit_the_target():
    model = babelzoo.create_model("bart_tiny").eval()
    with pytest.raises(InputError, match=re.escape("decoder_attention_mask has shape [2, 5] but decoder_input_ids "
                                                   "has shape [2, 4]: the mask must be [2, 4]")):
        model(torch.randint(5, 50, (2, 5)), decoder_input_ids=torch.randint(5, 50, (2, 4)),
              decoder_attention_mask=torch.ones(2, 5))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.complex64])
def test_weights_of_another_kind_of_number_are_refused_naming_the_key(tmp_path, dtype):
    model = babelzoo.create_model("xlmr_tiny")
    model.save_pretrained(tmp_path / "ckpt")
    weights = tmp_path / "ckpt" / "model.safetensors"
    state = load_file(weights)
    key = "embeddings.word.weight"
    state[key] = (state[key] * 100).to(dtype)
    save_file(state, weights)
    name = str(dtype).removeprefix("torch.")
    message = (f"{weights} does not match the model: dtype mismatches (1; a floating-point tensor cannot be loaded "
               f"from integer, bool or complex values, nor an integer one from floats): {key}: checkpoint {name} for "
               "the model's float32")
    with pytest.raises(CheckpointError, match=re.escape(message) + "$"):
        babelzoo.from_pretrained(tmp_path / "ckpt")
    with pytest.raises(CheckpointError, match=re.escape(message) + "$"):
        load_weights_into(babelzoo.create_model("xlmr_tiny"), weights)


def test_half_precision_weights_still_load_into_float_parameters(tmp_path):
    model = babelzoo.create_model("xlmr_tiny")
    model.save_pretrained(tmp_path / "ckpt")
    weights = tmp_path / "ckpt" / "model.safetensors"
    save_file({k: v.half() if v.is_floating_point() else v for k, v in load_file(weights).items()}, weights)
    loaded = babelzoo.from_pretrained(tmp_path / "ckpt")
    assert loaded.embeddings.word.weight.dtype == torch.float32
    torch.testing.assert_close(loaded.embeddings.word.weight, model.embeddings.word.weight.half().float())
