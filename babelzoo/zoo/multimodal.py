"""FusionModel: a text tower (:class:`BabelModel`) meets an image or speech tower.

Three ways to fuse, chosen by ``config.fusion.mode``:

- ``single_stream`` (ViLT; Kim et al. 2021): text embeddings and image patches / speech tokens,
  each plus a modality-type embedding, are concatenated and run through the *same* Transformer
  blocks: the top ``fusion.num_layers`` layers of the text encoder (all of them when
  ``fusion.num_layers == text.num_layers``, which is ViLT; fewer lets text-only layers run first).
- ``cross_attention`` (ALBEF; Li et al. 2021, "Align before Fuse"): the text encoder runs on
  text alone, the other modality through its own Transformer, then ``fusion.num_layers`` fusion
  blocks (self-attention, cross-attention to the image/speech tokens, feed-forward).
- ``dual`` (CLIP; Radford et al. 2021): two towers that only meet in the contrastive loss
  (``fusion.num_layers`` is not used).

Every mode has the projections to a shared ``fusion.projection_dim`` space and CLIP's learned
temperature ``logit_scale`` (log 1/0.07 at start), so ITC works for all of them; ITM and
conditioned MLM need a joint encoder (not ``dual``).

Raw patches and speech frames are shallow tokens: in ``cross_attention`` and ``dual`` modes they
pass through a Transformer shaped like the text encoder (ViT; Dosovitskiy et al. 2021). A timm
backbone already is a deep image encoder and is used as is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InputError
from .checkpoint_io import CONFIG_NAME, Checkpointed, save_pretrained
from .config import ConfigError
from .model_config import ModelConfig
from .family import family_names, family_of
from .layers import Dropout, FeedForward, LayerStack, SelfAttention, attend, build_attention_mask
from .model import BabelModel, EncoderOutput
from .sentences import ReadsText, hidden_layer

TEXT, OTHER = 0, 1  # modality-type ids


@dataclass
class FusionOutput(EncoderOutput):
    """``last_hidden`` [B, L, H] is aligned with ``input_ids`` (fused with the other modality
    unless ``dual``); ``modality_hidden`` [B, M, H] and ``modality_mask`` [B, M] are the image or
    speech tokens (position 0 is the summary token: [IMG]/[AUD], or a timm backbone's pooled
    feature). ``text_embeds``/``modality_embeds`` [B, projection_dim] are the L2-normalised
    projections of each tower's first token, given by unimodal (and ``dual``) encodings; a
    unimodal call without text has ``last_hidden=None``."""

    modality_hidden: Optional[torch.Tensor] = None
    modality_mask: Optional[torch.Tensor] = None
    text_embeds: Optional[torch.Tensor] = None
    modality_embeds: Optional[torch.Tensor] = None


class CrossAttention(nn.Module):
    """Queries from the text stream, keys and values from the other modality."""

    def __init__(self, hidden_size: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.dropout = dropout
        self.query = nn.Linear(hidden_size, hidden_size)
        self.kv = nn.Linear(hidden_size, 2 * hidden_size)
        self.out = nn.Linear(hidden_size, hidden_size)

    def forward(self, x: torch.Tensor, context: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        b, length, width = x.shape
        q = self.query(x).view(b, length, self.num_heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(context).view(b, context.shape[1], 2, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        out = attend(q, k, v, mask=mask, dropout=self.dropout if self.training else 0.0)
        return self.out(out.transpose(1, 2).reshape(b, length, width))


class CrossAttentionBlock(nn.Module):
    """ALBEF's fusion layer: a BERT layer with cross-attention between self-attention and the
    feed-forward network; post-LN or pre-LN like the text encoder."""

    def __init__(self, hidden_size: int, num_heads: int, intermediate_size: int, act: str, dropout: float,
                 attention_dropout: float, eps: float, pre_norm: bool):
        super().__init__()
        self.pre_norm = pre_norm
        self.attention = SelfAttention(hidden_size, num_heads, attention_dropout)
        self.attention_norm = nn.LayerNorm(hidden_size, eps=eps)
        self.cross = CrossAttention(hidden_size, num_heads, attention_dropout)
        self.cross_norm = nn.LayerNorm(hidden_size, eps=eps)
        self.ffn = FeedForward(hidden_size, intermediate_size, act)
        self.ffn_norm = nn.LayerNorm(hidden_size, eps=eps)
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor, state: "FusionState") -> torch.Tensor:
        mask, context, context_mask = state.mask, state.context, state.context_mask
        if self.pre_norm:
            x = x + self.dropout(self.attention(self.attention_norm(x), mask=mask))
            x = x + self.dropout(self.cross(self.cross_norm(x), context, context_mask))
            return x + self.dropout(self.ffn(self.ffn_norm(x)))
        x = self.attention_norm(x + self.dropout(self.attention(x, mask=mask)))
        x = self.cross_norm(x + self.dropout(self.cross(x, context, context_mask)))
        return self.ffn_norm(x + self.dropout(self.ffn(x)))


@dataclass
class FusionState:
    """What every fusion layer reads: the text's SDPA ``mask``, the other modality's tokens
    (``context`` [B, M, H]) and their key mask."""

    mask: Optional[torch.Tensor]
    context: torch.Tensor
    context_mask: Optional[torch.Tensor]


class FusionLayers(LayerStack, nn.ModuleList):
    """ALBEF's fusion layers (:class:`CrossAttentionBlock`), run by the one layer loop
    (:meth:`LayerStack.run`); a module list, so their weights are ``fusion_layers.{i}.*``."""

    @property
    def num_layers(self) -> int:
        return len(self)

    def layer(self, index: int) -> nn.Module:
        return self[index]

    def prepare(self, attention_mask: Optional[torch.Tensor], length: int,
                visible: Optional[torch.Tensor] = None, causal: bool = False,
                position_ids: Optional[torch.Tensor] = None, *, context: torch.Tensor,
                context_mask: Optional[torch.Tensor] = None) -> FusionState:
        """The text's ``attention_mask`` [B, L] and the other modality's ``context`` [B, M, H]
        with its ``context_mask`` [B, M]."""
        return FusionState(build_attention_mask(attention_mask, visible, causal, length), context,
                           build_attention_mask(context_mask))

    def can_pack(self) -> bool:
        return False

    def can_select_rows(self) -> bool:
        return False


class FusionModel(ReadsText, Checkpointed, nn.Module):
    """Text + image or text + speech encoder. Build one with :func:`babelzoo.create_model`::

        model = babelzoo.create_model("vl_albef_tiny")
        out = model(input_ids, pixel_values=images)          # fused text states
        t, v = model.embed_text(input_ids), model.embed_modality(pixel_values=images)
        similarity = model.logit_scale.exp() * v @ t.T        # CLIP/ITC logits
        vectors = model.encode(["a red apple"])               # the text tower's, mean-pooled
    """

    fuses = True  # its checkpoints are those of configs with a fusion part

    def __init__(self, config: ModelConfig):
        super().__init__()
        if config.fusion is None:
            raise ConfigError(f"model {config.architecture!r} has no fusion part; build it with BabelModel")
        if (config.vision is None) == (config.audio is None):
            raise ConfigError(f"model {config.architecture!r}: a fusion model needs exactly one of a vision or an "
                              f"audio part (vision={config.vision is not None}, audio={config.audio is not None})")
        text, fusion = config.text, config.fusion
        text_family = family_of(text)
        if not text_family.fusion_tower:
            towers = " or ".join(repr(name) for name in family_names(lambda f: f.fusion_tower))
            raise ConfigError(f"ModelConfig.text is of family {text.family!r}: fusion needs a text tower of the "
                              f"{towers} family")
        if fusion.mode == "single_stream" and fusion.num_layers > text.num_layers:
            raise ConfigError(f"FusionConfig.num_layers={fusion.num_layers} must be <= TransformerConfig.num_layers="
                              f"{text.num_layers} for single_stream (it counts the top text layers run jointly)")
        self.config = config
        self.mode = fusion.mode
        self.modality = "vision" if config.vision is not None else "audio"
        hidden = text.hidden_size
        self.text = BabelModel(ModelConfig(architecture=config.architecture, text=text))
        if config.vision is not None:
            from .vision import build_vision_tower

            self.frontend = build_vision_tower(config.vision, hidden)
            deep_backbone = config.vision.backbone != "patch"
        else:
            from .audio import ConvSubsampler

            self.frontend = ConvSubsampler(config.audio, hidden)
            deep_backbone = False
        # A timm backbone's first token is its own pooled feature; raw patches and speech tokens
        # get a learned [IMG]/[AUD] summary token in front (ViLT, ViT's [class] token).
        self.modality_token = None if deep_backbone else nn.Parameter(torch.zeros(1, 1, hidden))
        self.type_embedding = nn.Embedding(2, hidden)
        self.modality_norm = nn.LayerNorm(hidden, eps=text.layer_norm_eps) if text.embedding_layer_norm else None
        self.dropout = Dropout(text.dropout)
        self.modality_encoder = None
        if fusion.mode != "single_stream" and not deep_backbone:
            # Positions of patches/frames are absolute (added by the front end), and a speech or
            # image tower never attends causally.
            self.modality_encoder = text_family.build_encoder(text.for_modality())
        self.fusion_layers = FusionLayers()
        if fusion.mode == "cross_attention":
            self.fusion_layers.extend(
                CrossAttentionBlock(hidden, text.num_heads, text.intermediate_size, text.activation, text.dropout,
                                    text.attention_dropout, text.layer_norm_eps, text.norm_position == "pre")
                for _ in range(fusion.num_layers))
        self.text_projection = nn.Linear(hidden, fusion.projection_dim)
        self.modality_projection = nn.Linear(hidden, fusion.projection_dim)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))
        self._init_own_weights()

    def _init_own_weights(self) -> None:
        # The text tower initialised itself; a timm backbone keeps its own (maybe pretrained) weights.
        skip = {id(m) for m in self.text.modules()}
        timm_model = getattr(self.frontend, "model", None)
        if timm_model is not None:
            skip |= {id(m) for m in timm_model.modules()}
        for module in self.modules():
            if id(module) not in skip and module is not self:
                self.text._init_weights(module)
        if self.modality_token is not None:
            nn.init.normal_(self.modality_token, std=self.config.text.init_std)

    def tie_weights(self) -> None:
        self.text.tie_weights()

    @property
    def word_embeddings(self) -> nn.Embedding:
        return self.text.word_embeddings

    @property
    def has_joint_encoder(self) -> bool:
        return self.mode != "dual"

    # --- towers --------------------------------------------------------------------------------
    def _modality_inputs(self, pixel_values, audio_features, audio_mask) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokenise the other modality: a summary token ([IMG]/[AUD], or a timm backbone's pooled
        feature), then patches or speech tokens, plus the modality-type embedding, normalised like
        the text embeddings."""
        if self.modality == "vision":
            if pixel_values is None or audio_features is not None:
                raise InputError(f"model {self.config.architecture!r} is a vision–text model: give pixel_values")
            tokens = self.frontend(pixel_values)
            mask = torch.ones(tokens.shape[:2], dtype=torch.long, device=tokens.device)
        else:
            if audio_features is None or pixel_values is not None:
                raise InputError(f"model {self.config.architecture!r} is a speech–text model: give audio_features")
            tokens, mask = self.frontend(audio_features, audio_mask)
        if self.modality_token is not None:
            batch = tokens.shape[0]
            tokens = torch.cat([self.modality_token.expand(batch, -1, -1).to(tokens.dtype), tokens], dim=1)
            mask = torch.cat([mask.new_ones(batch, 1), mask], dim=1)
        x = tokens + self.type_embedding.weight[OTHER]
        if self.modality_norm is not None:
            x = self.modality_norm(x)
        return self.dropout(x), mask

    @property
    def stack(self) -> LayerStack:
        """The text tower's layers, run through their public stack API."""
        return self.text.encoder

    def _run_layers(self, x: torch.Tensor, mask: torch.Tensor, start: int) -> torch.Tensor:
        """Run text-encoder layers ``start..num_layers-1`` (shared by both modalities)."""
        return self.stack.finish(self.stack.run(x, self.stack.prepare(mask, x.shape[1]), start=start))

    def encode_text(self, input_ids: Optional[torch.Tensor] = None, attention_mask: Optional[torch.Tensor] = None,
                    **kwargs) -> EncoderOutput:
        """The text tower alone (single_stream: text, with its modality-type embedding, through
        all the shared layers)."""
        if self.mode == "single_stream":
            hidden = kwargs.pop("output_hidden_states", False)
            unsupported = sorted(set(kwargs) - {"position_ids", "segment_ids", "language_ids", "inputs_embeds"})
            if unsupported:
                raise InputError(f"single_stream text encoding takes no {unsupported}")
            return self._single_stream(input_ids, attention_mask, kwargs, None, None, None, hidden)
        return self.text(input_ids, attention_mask, **kwargs)

    def encode_modality(self, pixel_values: Optional[torch.Tensor] = None,
                        audio_features: Optional[torch.Tensor] = None,
                        audio_mask: Optional[torch.Tensor] = None) -> EncoderOutput:
        """The image or speech tower alone: ``last_hidden`` [B, 1 + N, H] (position 0: the summary
        token), ``mask`` [B, 1 + N]."""
        x, mask = self._modality_inputs(pixel_values, audio_features, audio_mask)
        if self.modality_encoder is not None:
            x, _ = self.modality_encoder(x, mask)
        elif self.mode == "single_stream":
            x = self._run_layers(x, mask, self.config.text.num_layers - self.config.fusion.num_layers)
        return EncoderOutput(x, None, None, mask)

    def sentence_pooling(self, requested: Optional[str] = None, default: str = "cls") -> str:
        """The text tower's (:meth:`BabelModel.sentence_pooling <babelzoo.zoo.model.BabelModel.sentence_pooling>`)."""
        return self.text.sentence_pooling(requested, default)

    def sentence_vectors(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, layer: int = -1,
                         pooling: Optional[str] = None, language_ids: Optional[torch.Tensor] = None,
                         unpad: bool = True) -> torch.Tensor:
        """[B, H] text vectors (:meth:`encode_text`'s states, as
        :meth:`BabelModel.sentence_vectors <babelzoo.zoo.model.BabelModel.sentence_vectors>` pools them)."""
        if self.mode == "single_stream":  # the shared layers run the text padded
            out = self.encode_text(input_ids, attention_mask, language_ids=language_ids,
                                   output_hidden_states=layer != -1)
            return self.text.sentence_embedding(hidden_layer(out, layer, self), attention_mask, pooling, "mean")
        return self.text.sentence_vectors(input_ids, attention_mask, layer=layer, pooling=pooling,
                                          language_ids=language_ids, unpad=unpad)

    def embed_text(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                   **kwargs) -> torch.Tensor:
        """L2-normalised projection of the text [CLS] state, [B, projection_dim]."""
        return self._project_text(self.encode_text(input_ids, attention_mask, **kwargs).last_hidden)

    def embed_modality(self, pixel_values: Optional[torch.Tensor] = None,
                       audio_features: Optional[torch.Tensor] = None,
                       audio_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """L2-normalised projection of the summary token's state, [B, projection_dim]."""
        return self._project_modality(self.encode_modality(pixel_values, audio_features, audio_mask).last_hidden)

    def _project_text(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.text_projection(hidden[:, 0]), dim=-1)

    def _project_modality(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.modality_projection(hidden[:, 0]), dim=-1)

    # --- fused forward -------------------------------------------------------------------------
    def forward(self, input_ids: Optional[torch.Tensor] = None, attention_mask: Optional[torch.Tensor] = None,
                position_ids: Optional[torch.Tensor] = None, segment_ids: Optional[torch.Tensor] = None,
                language_ids: Optional[torch.Tensor] = None, pixel_values: Optional[torch.Tensor] = None,
                audio_features: Optional[torch.Tensor] = None, audio_mask: Optional[torch.Tensor] = None,
                inputs_embeds: Optional[torch.Tensor] = None, output_hidden_states: bool = False,
                unimodal: bool = False) -> FusionOutput:
        """Encode text fused with an image (``pixel_values`` [B, C, H, W]) or speech
        (``audio_features`` [B, T, num_mel_bins] with ``audio_mask`` [B, T]). Without either, this
        is the text tower alone.

        ``unimodal=True`` (always for ``dual``) encodes each tower on its own, without fusion,
        and adds the normalised ``text_embeds``/``modality_embeds`` for contrastive losses and
        retrieval; either input may then be omitted.
        """
        text_kwargs = dict(position_ids=position_ids, segment_ids=segment_ids, language_ids=language_ids,
                           inputs_embeds=inputs_embeds)
        if unimodal or self.mode == "dual":
            return self._unimodal(input_ids, attention_mask, text_kwargs, pixel_values, audio_features, audio_mask,
                                  output_hidden_states)
        if pixel_values is None and audio_features is None:
            out = self.encode_text(input_ids, attention_mask, output_hidden_states=output_hidden_states, **text_kwargs)
            return FusionOutput(out.last_hidden, out.hidden_states, out.pooled, out.mask)
        if input_ids is None and inputs_embeds is None:
            raise InputError("give input_ids or inputs_embeds")
        if attention_mask is None and input_ids is not None:
            attention_mask = input_ids.ne(self.config.text.pad_token_id).long()
        if self.mode == "single_stream":
            return self._single_stream(input_ids, attention_mask, text_kwargs, pixel_values, audio_features,
                                       audio_mask, output_hidden_states)
        text = self.encode_text(input_ids, attention_mask, output_hidden_states=output_hidden_states, **text_kwargs)
        other = self.encode_modality(pixel_values, audio_features, audio_mask)
        hidden, states = text.last_hidden, text.hidden_states
        states = list(states) if states is not None else None
        fusion = self.fusion_layers
        state = fusion.prepare(attention_mask, hidden.shape[1], context=other.last_hidden, context_mask=other.mask)
        hidden = fusion.run(hidden, state, states=states)
        pooled = self.text.pooler(hidden) if self.text.pooler is not None else None
        return FusionOutput(hidden, tuple(states) if states is not None else None, pooled, attention_mask,
                            other.last_hidden, other.mask)

    def _unimodal(self, input_ids, attention_mask, text_kwargs, pixel_values, audio_features, audio_mask,
                  output_hidden_states) -> FusionOutput:
        out = FusionOutput(None)
        if input_ids is not None or text_kwargs.get("inputs_embeds") is not None:
            text = self.encode_text(input_ids, attention_mask, output_hidden_states=output_hidden_states,
                                    **text_kwargs)
            out = FusionOutput(text.last_hidden, text.hidden_states, text.pooled, text.mask,
                               text_embeds=self._project_text(text.last_hidden))
        if pixel_values is not None or audio_features is not None:
            other = self.encode_modality(pixel_values, audio_features, audio_mask)
            out.modality_hidden, out.modality_mask = other.last_hidden, other.mask
            out.modality_embeds = self._project_modality(other.last_hidden)
        if out.text_embeds is None and out.modality_embeds is None:
            raise InputError("give input_ids (or inputs_embeds), pixel_values or audio_features")
        return out

    def _single_stream(self, input_ids, attention_mask, text_kwargs, pixel_values, audio_features, audio_mask,
                       output_hidden_states) -> FusionOutput:
        """ViLT: [text; image or speech] through the shared layers; the first
        ``num_layers - fusion.num_layers`` layers see the text alone. Without an image or speech
        input, the text runs through every layer alone."""
        text_cfg = self.config.text
        stack = self.stack
        x = self.text.embeddings(input_ids, **text_kwargs) + self.type_embedding.weight[TEXT]
        if attention_mask is None:
            attention_mask = (input_ids.ne(text_cfg.pad_token_id).long() if input_ids is not None
                              else torch.ones(x.shape[:2], dtype=torch.long, device=x.device))
        length = x.shape[1]
        fused = pixel_values is not None or audio_features is not None
        start = text_cfg.num_layers - self.config.fusion.num_layers if fused else text_cfg.num_layers
        states = [x] if output_hidden_states else None
        x = stack.run(x, stack.prepare(attention_mask, length), end=start, states=states)
        other, other_mask = None, None
        if fused:
            other, other_mask = self._modality_inputs(pixel_values, audio_features, audio_mask)
            x = torch.cat([x, other], dim=1)
            joint_mask = torch.cat([attention_mask.to(other_mask.dtype), other_mask], dim=1)
            joint = [] if states is not None else None
            x = stack.run(x, stack.prepare(joint_mask, x.shape[1]), start=start, states=joint)
            if states is not None:
                states.extend(s[:, :length] for s in joint)
        x = stack.finish(x)
        if states is not None:
            states[-1] = x[:, :length]
        hidden = x[:, :length]
        pooled = self.text.pooler(hidden) if self.text.pooler is not None else None
        return FusionOutput(hidden, tuple(states) if states is not None else None, pooled, attention_mask,
                            x[:, length:] if fused else None, other_mask)

    def mlm_logits(self, hidden: torch.Tensor, positions: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Vocabulary logits from the text tower's tied MLM head."""
        return self.text.mlm_logits(hidden, positions)

    # --- checkpoints ---------------------------------------------------------------------------
    def checkpoint_config(self) -> ModelConfig:
        """The config to store with the weights: a timm backbone's weights are in the checkpoint,
        so loading it must not download them again."""
        if self.config.vision is not None and self.config.vision.pretrained:
            return self.config.override(vision={"pretrained": False})
        return self.config

    def save_pretrained(self, directory: str | Path, tokenizer=None) -> Path:
        """Write ``config.json`` + ``model.safetensors`` (+ tokenizer files); load them back with
        :func:`babelzoo.from_pretrained`."""
        directory = save_pretrained(self, directory, tokenizer)
        stored = self.checkpoint_config()
        if stored != self.config:
            stored.to_json(Path(directory) / CONFIG_NAME)
        return directory
