"""Every registered vision–text and speech–text tiny model: forward/backward, padding
invariance, whether the other modality reaches the text states, and save → load identity."""

import pytest
import torch
from fusion_models import fusion_models

import babelzoo
from babelzoo.zoo.factory import model_config
from babelzoo.zoo.families.rnn.config import RNNConfig
from babelzoo.zoo.families.transformer.config import TransformerConfig
from babelzoo.zoo.model_config import FusionConfig, ModelConfig, VisionConfig
from babelzoo.zoo.multimodal import FusionModel

FUSION_TINY = [n for n in babelzoo.list_models("*tiny") if model_config(n).fusion is not None]


def inputs(model, batch=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, model.config.text.vocab_size, (batch, 9), generator=g)
    ids[1, 6:] = 0
    ids[2, 4:] = 0
    if model.modality == "vision":
        size = model.config.vision.image_size
        return ids, {"pixel_values": torch.randn(batch, 3, size, size, generator=g)}
    mask = torch.ones(batch, 80, dtype=torch.long)
    mask[1, 50:] = 0
    return ids, {"audio_features": torch.randn(batch, 80, 80, generator=g), "audio_mask": mask}


def test_every_fusion_mode_and_modality_is_registered():
    modes = {(model_config(n).fusion.mode, model_config(n).vision is not None) for n in FUSION_TINY}
    assert {("single_stream", True), ("cross_attention", True), ("dual", True),
            ("cross_attention", False), ("dual", False)} <= modes


@pytest.mark.parametrize("name", FUSION_TINY)
def test_forward_backward(name):
    model = babelzoo.create_model(name)
    assert isinstance(model, FusionModel)
    ids, other = inputs(model)
    out = model(ids, **other)
    hidden = model.config.text.hidden_size
    assert out.last_hidden.shape == (3, 9, hidden)
    assert out.modality_hidden.shape[0] == 3 and out.modality_hidden.shape[2] == hidden
    uni = model(ids, unimodal=True, **other)
    assert uni.text_embeds.shape == uni.modality_embeds.shape == (3, model.config.fusion.projection_dim)
    torch.testing.assert_close(uni.text_embeds.norm(dim=-1), torch.ones(3))
    logits = model.mlm_logits(out.last_hidden, ids.ne(0))
    loss = out.last_hidden.pow(2).mean() + logits.logsumexp(-1).mean() + (uni.text_embeds * uni.modality_embeds).sum()
    loss.backward()
    # the image/speech tower, the fusion layers and both projections all learn
    for prefix in ("frontend.", "text.embeddings.", "text_projection.", "modality_projection.", "fusion_layers."):
        params = [p for n, p in model.named_parameters() if n.startswith(prefix)]
        assert all(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in params), prefix
    assert torch.isfinite(loss)


@pytest.mark.parametrize("name", FUSION_TINY)
def test_padding_does_not_change_real_positions(name):
    model = babelzoo.create_model(name).eval()
    ids, other = inputs(model)
    with torch.no_grad():
        full = model(ids, **other).last_hidden
        short = model(ids[2:3, :4], **{k: v[2:3] for k, v in other.items()}).last_hidden
    torch.testing.assert_close(full[2:3, :4], short, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", FUSION_TINY)
def test_the_other_modality_reaches_the_text_only_when_fused(name):
    model = babelzoo.create_model(name).eval()
    ids, other = inputs(model)
    _, changed = inputs(model, seed=1)
    if "audio_mask" in changed:
        changed["audio_mask"] = other["audio_mask"]
    with torch.no_grad():
        a, b = model(ids, **other), model(ids, **changed)
    differs = not torch.allclose(a.last_hidden, b.last_hidden, atol=1e-6)
    assert differs == model.has_joint_encoder
    assert not torch.allclose(a.modality_hidden, b.modality_hidden)


@pytest.mark.parametrize("name", fusion_models())
def test_save_load_round_trip(tmp_path, name):
    model = babelzoo.create_model(name).eval()
    ids, other = inputs(model)
    model.save_pretrained(tmp_path / name)
    loaded = babelzoo.from_pretrained(tmp_path / name).eval()
    assert isinstance(loaded, FusionModel) and loaded.config == model.config
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids, **other).last_hidden, model(ids, **other).last_hidden, rtol=0, atol=0)
    assert loaded.text.lm_head.decoder.weight is loaded.text.embeddings.word.weight  # tied again


def test_timm_backbone_fusion_and_checkpoint(tmp_path):
    model = babelzoo.create_model("vl_albef_tiny", vision={"backbone": "test_resnet"}).eval()
    assert model.modality_token is None and model.modality_encoder is None  # timm is the image encoder
    ids, other = inputs(model)
    with torch.no_grad():
        out = model(ids, unimodal=True, **other)
        first = model.frontend(other["pixel_values"])[:, 0]
    assert out.modality_hidden.shape == (3, 1 + 2 * 2, 128)  # pooled + a 2x2 feature map of a 64px image
    model.save_pretrained(tmp_path / "m")
    loaded = babelzoo.from_pretrained(tmp_path / "m").eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded.frontend(other["pixel_values"])[:, 0], first, rtol=0, atol=0)
    pretrained = model.config.override(vision={"pretrained": True})
    assert FusionModel.checkpoint_config(type("M", (), {"config": pretrained})()).vision.pretrained is False


def test_single_stream_with_fewer_joint_layers_runs_text_layers_first():
    model = babelzoo.create_model("vl_fusion_tiny", fusion={"num_layers": 1}).eval()
    ids, other = inputs(model)
    with torch.no_grad():
        out = model(ids, output_hidden_states=True, **other)
        text_only = model.encode_text(ids, output_hidden_states=True)
    # layer 0 sees text alone, so its output equals the text tower's
    torch.testing.assert_close(out.hidden_states[1], text_only.hidden_states[1])
    assert len(out.hidden_states) == 3


@pytest.mark.parametrize("config, message", [
    (ModelConfig(text=TransformerConfig(num_layers=2), vision=VisionConfig(), fusion=FusionConfig(num_layers=3)),
     "num_layers=3 must be <= TransformerConfig.num_layers=2"),
    (ModelConfig(fusion=FusionConfig()), "exactly one of a vision or an audio part"),
    (ModelConfig(text=RNNConfig(cell="lstm"), vision=VisionConfig(), fusion=FusionConfig()),
     "fusion needs a text tower of the 'transformer' family"),
])
def test_invalid_fusion_configs(config, message):
    with pytest.raises(ValueError, match=message):
        FusionModel(config)


def test_wrong_modality_input_is_an_error():
    model = babelzoo.create_model("vl_dual_tiny")
    with pytest.raises(ValueError, match="vision–text model: give pixel_values"):
        model(torch.tensor([[1, 7, 2]]), audio_features=torch.randn(1, 20, 80))
