"""Registered vision–text and speech–text architectures. Each entry's docstring is its model card.

Text towers use a 32,000-piece multilingual sentencepiece vocabulary (captions in any language
share one text encoder). ``*_tiny`` entries keep every switch of their family at a size that
trains in seconds on a CPU; ``create_model(name, vision={"backbone": "resnet50",
"pretrained": True})`` swaps in any timm image backbone.
"""

from __future__ import annotations

from .model_config import AudioConfig, FusionConfig, ModelConfig, VisionConfig
from .entries import TINY, register_model
from .families.transformer.config import TransformerConfig

TINY_VISION = dict(backbone="patch", image_size=64, patch_size=16, pretrained=False)
TINY_AUDIO = dict(conv_channels=128, max_frames=1500)


def _tiny(config: ModelConfig, fusion_layers: int = 2) -> ModelConfig:
    config = config.override(**TINY, fusion={"num_layers": fusion_layers, "projection_dim": 64})
    if config.vision is not None:
        config = config.override(vision=TINY_VISION)
    if config.audio is not None:
        config = config.override(audio=TINY_AUDIO)
    return config


# --- vision–text -------------------------------------------------------------------------------

@register_model
def vl_fusion_base() -> ModelConfig:
    """ViLT (Kim et al. 2021, "ViLT: Vision-and-Language Transformer Without Convolution or
    Region Supervision"): one pre-LN Transformer (ViT-B/32 sizes: 12 layers, hidden 768) over the
    concatenation of text tokens and 32×32 raw patches of a 384×384 image, each with a
    modality-type embedding; trained with ITM, MLM conditioned on the image (and ITC here)."""
    return ModelConfig(text=TransformerConfig(norm_position="pre", layer_norm_eps=1e-6, max_positions=40),
                       vision=VisionConfig(backbone="patch", image_size=384, patch_size=32),
                       fusion=FusionConfig(mode="single_stream", num_layers=12, projection_dim=256))


@register_model
def vl_fusion_tiny() -> ModelConfig:
    """ViLT's single stream (shared pre-LN layers over text + 16×16 patches of 64×64 images) at tiny size."""
    return _tiny(vl_fusion_base(), fusion_layers=TINY["num_layers"])


@register_model
def vl_albef_base() -> ModelConfig:
    """ALBEF (Li et al. 2021, "Align before Fuse: Vision and Language Representation Learning
    with Momentum Distillation"): a ViT-B/16 image encoder (timm ``vit_base_patch16_224``; pass
    ``vision={"pretrained": True}`` for its ImageNet weights), a 6-layer BERT-base text encoder,
    then 6 fusion layers with cross-attention to the image tokens; ITC (256-d projections,
    learned temperature from 0.07), ITM with hard negatives from ITC similarities, and MLM
    conditioned on the image. Momentum distillation is not part of this entry."""
    return ModelConfig(text=TransformerConfig(num_layers=6),
                       vision=VisionConfig(backbone="vit_base_patch16_224", image_size=224, patch_size=16),
                       fusion=FusionConfig(mode="cross_attention", num_layers=6, projection_dim=256))


@register_model
def vl_albef_tiny() -> ModelConfig:
    """ALBEF's text → cross-attention fusion layout at tiny size; the image tower is raw 16×16
    patches of 64×64 images through a 2-layer Transformer (no timm download)."""
    return _tiny(vl_albef_base())


@register_model
def vl_dual_base() -> ModelConfig:
    """CLIP (Radford et al. 2021, "Learning Transferable Visual Models From Natural Language
    Supervision"), ViT-B/32 layout: an image tower (timm ``vit_base_patch32_224``) and a 12-layer
    pre-LN text Transformer of width 512 (8 heads, 77 positions), each projected to a 512-d
    space and compared by cosine similarity over a learned temperature (initialised to 0.07,
    logit scale clamped at 100); trained with the symmetric InfoNCE loss (ITC)."""
    return ModelConfig(text=TransformerConfig(hidden_size=512, num_heads=8, intermediate_size=2048, max_positions=77,
                                       norm_position="pre", layer_norm_eps=1e-5, dropout=0.0,
                                       attention_dropout=0.0, pooler=False),
                       vision=VisionConfig(backbone="vit_base_patch32_224", image_size=224, patch_size=32),
                       fusion=FusionConfig(mode="dual", num_layers=1, projection_dim=512))


@register_model
def vl_dual_tiny() -> ModelConfig:
    """CLIP's two towers at tiny size; the image tower is raw 16×16 patches of 64×64 images through
    a 2-layer pre-LN Transformer."""
    return _tiny(vl_dual_base(), fusion_layers=1)


# --- speech–text -------------------------------------------------------------------------------

_SPEECH = AudioConfig(num_mel_bins=80, sample_rate=16000, conv_channels=1024, conv_layers=2, conv_kernel=5,
                      conv_stride=2, max_frames=3000)


@register_model
def speech_text_base() -> ModelConfig:
    """Speech–text fusion in ALBEF's layout (Li et al. 2021). Speech enters as 80-bin log-mel
    filterbank frames (10 ms shift, utterance CMVN, SpecAugment in the data pipeline) subsampled
    4× by two stride-2 Conv1d+GLU layers (kernel 5, 1024 channels), the speech embedding of
    TencentPretrain/UER (Zhao et al. 2023) and fairseq S2T (Wang et al. 2020), after
    Speech-Transformer's convolutional front end (Dong et al. 2018); then a 6-layer speech
    Transformer, a 6-layer text encoder and 6 cross-attention fusion layers. Trained with ITC,
    ITM and MLM conditioned on the speech."""
    return ModelConfig(text=TransformerConfig(num_layers=6), audio=_SPEECH,
                       fusion=FusionConfig(mode="cross_attention", num_layers=6, projection_dim=256))


@register_model
def speech_text_tiny() -> ModelConfig:
    """Speech–text cross-attention fusion (Conv1d+GLU subsampler, 2-layer towers) at tiny size."""
    return _tiny(speech_text_base())


@register_model
def speech_dual_base() -> ModelConfig:
    """A CLIP-style dual encoder for speech and text (Radford et al. 2021's objective over
    TencentPretrain's convolutional speech embedding): 12-layer speech and text Transformers,
    256-d projections, learned temperature; for speech↔text retrieval."""
    return ModelConfig(text=TransformerConfig(), audio=_SPEECH,
                       fusion=FusionConfig(mode="dual", num_layers=1, projection_dim=256))


@register_model
def speech_dual_tiny() -> ModelConfig:
    """The speech–text dual encoder at tiny size."""
    return _tiny(speech_dual_base(), fusion_layers=1)
