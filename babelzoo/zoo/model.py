"""BabelModel: a text family's embeddings → encoder (+ knowledge fusion) with an optional tied
MLM head, pooler and task head."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from ..errors import ConfigError, InputError
from .model_config import ModelConfig
from .family import family_of
from .heads import build_head
from .layers import LayerStack, Packing, Pooler, init_weights, pool
from .layers.masks import check_mask_shapes
from .checkpoint_io import Checkpointed
from .sentences import ReadsText, hidden_layer


@dataclass
class EncoderOutput:
    """``last_hidden`` [B, L, H]; ``hidden_states``: the embedding output then every layer's
    output (when asked for); ``pooled`` [B, H] when the model has a pooler; ``mask`` [B, L], the
    padding mask the encoder used (1 = real token)."""

    last_hidden: torch.Tensor
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None
    pooled: Optional[torch.Tensor] = None
    mask: Optional[torch.Tensor] = None


class BabelModel(ReadsText, Checkpointed, nn.Module):
    """A composed encoder. Build one with :func:`babelzoo.create_model` or from a config::

        model = BabelModel(ModelConfig(text=TransformerConfig(hidden_size=256, num_heads=4)))
        out = model(input_ids, attention_mask=mask)
        out.last_hidden.shape   # [B, L, 256]
        vectors = model.encode(["Hello", "Bonjour"])   # with a tokenizer: [2, 256] (ReadsText.encode)
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        config.check_towers()
        self.config = config
        text = config.text
        # Drawn before any module is built, whose constructors draw from the global RNG too.
        generator = torch.Generator().manual_seed(int(torch.randint(0, 2 ** 62, ())))
        parts = family_of(text).parts(text, config.knowledge)
        self.embeddings = parts.embeddings
        self.encoder = parts.encoder
        self.pooler = Pooler(text.hidden_size) if text.pooler else None
        self.lm_head = parts.lm_head
        self.knowledge = parts.entities
        # XLNet's attention reads the segments (relative segment encoding); other encoders get
        # them through the embeddings only.
        self.encoder_reads_segments = isinstance(self.encoder, LayerStack) and self.encoder.reads_segments
        self.head = None
        if config.head is not None:
            self._build_head(config.head)
        self._initialise(generator)
        self.tie_weights()

    def _build_head(self, head) -> None:
        """The task head; a frozen encoder gets no gradients."""
        self.head = build_head(head, self.config.text)
        if self.encoder_frozen:
            for name, param in self.named_parameters():
                if not name.startswith("head."):
                    param.requires_grad_(False)

    @property
    def encoder_frozen(self) -> bool:
        """True when only the task head trains (a probe, or ``freeze_encoder``)."""
        return self.head is not None and (self.head.freezes_encoder or self.config.head.freeze_encoder)

    def train(self, mode: bool = True) -> "BabelModel":
        super().train(mode)
        if self.encoder_frozen:  # frozen features: no dropout in the encoder either
            for name, child in self.named_children():
                if name != "head":
                    child.eval()
        return self

    # --- weights -------------------------------------------------------------------------------
    def _initialise(self, generator: torch.Generator) -> None:
        """BERT's initialisation from ``generator`` (seeded by one draw of the global RNG): the
        base weights first, then those of a knowledge part, then a task head's, so that a model
        has the same base weights with or without knowledge fusion or a head."""
        named = list(self.named_modules())
        order = {"base": [], "knowledge": [], "head": []}
        for name, module in named:
            part = ("head" if name.startswith("head") else
                    "knowledge" if name.startswith("knowledge") or ".entity_" in name else "base")
            order[part].append(module)
        for modules in order.values():
            for module in modules:
                self._init_weights(module, generator)

    def _init_weights(self, module: nn.Module, generator: Optional[torch.Generator] = None) -> None:
        init_weights(module, self.config.text.init_std, generator)

    def tie_weights(self) -> None:
        if self.lm_head is not None and self.config.text.tie_word_embeddings:
            self.lm_head.decoder.weight = self.embeddings.word.weight

    @property
    def word_embeddings(self) -> nn.Embedding:
        return self.embeddings.word

    # --- forward -------------------------------------------------------------------------------
    def forward(self, input_ids: Optional[torch.Tensor] = None,
                attention_mask: Optional[torch.Tensor] = None,
                visible: Optional[torch.Tensor] = None,
                position_ids: Optional[torch.Tensor] = None,
                segment_ids: Optional[torch.Tensor] = None,
                language_ids: Optional[torch.Tensor] = None,
                entities: Optional[torch.Tensor] = None,
                inputs_embeds: Optional[torch.Tensor] = None,
                causal: bool = False,
                output_hidden_states: bool = False,
                output_positions: Optional[torch.Tensor] = None,
                unpad: bool = False) -> EncoderOutput:
        """Encode a batch.

        ``attention_mask`` [B, L] marks real tokens (1) and padding (0); ``visible`` [B, L, L]
        (or [L, L]) says which position may attend to which (K-BERT trees, prefix masks);
        ``causal=True`` adds a left-to-right constraint. ``inputs_embeds`` [B, L, E] replaces
        the token lookup.

        ``output_positions`` (bool [B, L]) asks for the last layer at those positions only:
        ``last_hidden`` is then ``[N, H]``, equal to ``last_hidden[output_positions]`` of a full
        pass, and ``pooled`` is None. The last layer then computes queries, feed-forward and
        norms at those positions alone (keys and values still see every position), which saves
        most of that layer when a masked-LM loss reads ~15% of the tokens::

            out = model(ids, attention_mask=mask, output_positions=labels.ne(-100))
            logits = model.mlm_logits(out.last_hidden)          # [N, V]

        ``unpad=True`` runs every projection and feed-forward layer on the real tokens only
        (attention still sees the padded layout and its mask), so a batch of mixed lengths
        pays for its tokens, not for its padding; the states at padding positions are then zeros
        rather than the (meaningless) values a padded pass gives them.
        """
        if entities is not None and self.config.knowledge is None:
            raise InputError(f"entities given, but model {self.config.architecture!r} has no knowledge part")
        if input_ids is None and inputs_embeds is None:
            raise InputError("give input_ids or inputs_embeds")
        if output_positions is not None and output_hidden_states:
            raise InputError("output_positions returns the selected positions of the last layer only; "
                             "it cannot be combined with output_hidden_states")
        check_mask_shapes(input_ids if input_ids is not None else inputs_embeds, attention_mask, visible,
                          ("input_ids" if input_ids is not None else "inputs_embeds", "attention_mask"))
        if attention_mask is None and input_ids is not None:
            attention_mask = input_ids.ne(self.config.text.pad_token_id).long()
        if entities is not None and self.knowledge is None:
            raise InputError(f"entities given, but model {self.config.architecture!r} has no fusion layers "
                             f"(knowledge fusion={self.config.knowledge.fusion!r}); use attach_knowledge")
        packing = None
        if entities is None and isinstance(self.encoder, LayerStack) and self.encoder.packs(attention_mask, unpad):
            packing = Packing(attention_mask)
            x = self._embed_packed(packing, input_ids, position_ids, segment_ids, language_ids, inputs_embeds)
        else:
            x = self.embeddings(input_ids, position_ids, segment_ids, language_ids, inputs_embeds)
        options = dict(attention_mask=attention_mask, visible=visible, causal=causal,
                       output_hidden_states=output_hidden_states, output_positions=output_positions, unpad=unpad,
                       position_ids=position_ids)
        if self.encoder_reads_segments:
            options["segment_ids"] = segment_ids
        if packing is not None:  # x holds the real tokens only
            options["packing"] = packing
        if entities is not None:
            with self.knowledge.bind(entities):
                hidden, states = self.encoder(x, **options)
        else:
            hidden, states = self.encoder(x, **options)
        pooled = self.pooler(hidden) if self.pooler is not None and output_positions is None else None
        return EncoderOutput(hidden, states, pooled, attention_mask)

    def _embed_packed(self, packing: Packing, input_ids, position_ids, segment_ids, language_ids,
                      inputs_embeds) -> torch.Tensor:
        """The embeddings of the real tokens only, [N, H]: every per-token input packed, and the
        positions a padded pass would give them made explicit first."""
        embeddings = self.embeddings
        if position_ids is None and embeddings.positions != "none":
            source = input_ids if input_ids is not None else inputs_embeds
            position_ids = embeddings.default_positions(input_ids, source.shape[:2], source.device)
            position_ids = position_ids - embeddings.position_offset  # counted from 0, as a caller gives them

        def pack(t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
            return None if t is None else packing.pack(t)[None]

        x = embeddings(pack(input_ids), pack(position_ids), pack(segment_ids), pack(language_ids), pack(inputs_embeds))
        return x[0]

    def head_logits(self, input_ids: Optional[torch.Tensor] = None, positions: Optional[torch.Tensor] = None,
                    **inputs) -> torch.Tensor:
        """Logits of the task head: [B, C] for a sequence head, [B, L, C] for a token head.

        For a token head, ``positions`` (bool [B, L]) asks for the labelled positions only
        (``[N, C]``, equal to ``logits[positions]``). The encoder runs unpadded (see
        :meth:`forward`), so logits at padding positions of a token head are not meaningful;
        a frozen encoder runs without autograd."""
        if self.head is None:
            raise InputError(f"model {self.config.architecture!r} has no task head; build it with "
                             f"head={{'kind': ..., 'labels': [...]}} or babelzoo.zoo.build.with_head")
        if positions is not None and not self.head.per_token:
            raise InputError(f"positions select tokens; head {self.head.name!r} predicts one label per text")
        fast = positions is not None and not self.head.needs_hidden_states
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.encoder_frozen):
            out = self(input_ids, output_hidden_states=self.head.needs_hidden_states,
                       output_positions=positions if fast else None, unpad=True, **inputs)
        if fast:
            return self.head.logits(out.last_hidden)
        logits = self.head(out)
        return logits[positions] if positions is not None else logits

    def sentence_pooling(self, requested: Optional[str] = None, default: str = "cls") -> str:
        """The pooling that makes this model's sentence vectors: the one its architecture fixes
        (``config.text.sentence_pooling``, e.g. InferSent's ``max``), else ``requested``, else
        ``default``. Asking a model that fixes its pooling for another one is an error."""
        fixed = self.config.text.sentence_pooling
        if fixed is not None and requested is not None and requested != fixed:
            raise ConfigError(f"pooling={requested!r} was asked for, but model {self.config.architecture!r} fixes "
                              f"its sentence vectors' pooling to {fixed!r} ({type(self.config.text).__name__}"
                              f".sentence_pooling); drop the pooling option or set it to {fixed!r}")
        return fixed or requested or default

    def sentence_embedding(self, hidden: torch.Tensor, mask: Optional[torch.Tensor], pooling: Optional[str] = None,
                           default: str = "cls") -> torch.Tensor:
        """Sentence vectors [B, H] from a layer's states [B, L, H] (``mask``: 1 = real token),
        pooled as :meth:`sentence_pooling` decides (:func:`~babelzoo.zoo.layers.pool`). Every
        pair objective and :class:`~babelzoo.evaluation.encoders.BabelEncoder` reads sentence
        vectors through it::

            out = model(ids, attention_mask=mask)
            u = model.sentence_embedding(out.last_hidden, out.mask)   # InferSent: max over time
        """
        mode = self.sentence_pooling(pooling, default)
        return pool(hidden, mask, mode, self.config.text.output_directions)

    def sentence_vectors(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, layer: int = -1,
                         pooling: Optional[str] = None, language_ids: Optional[torch.Tensor] = None,
                         unpad: bool = True) -> torch.Tensor:
        """[B, H] vectors of a padded batch (what :meth:`encode` and
        :class:`~babelzoo.evaluation.encoders.BabelEncoder` pool): layer ``layer`` of
        ``hidden_states`` (-1: the last) by :meth:`sentence_embedding` (default: the mean), the
        encoder run on the real tokens only with ``unpad``."""
        out = self(input_ids, attention_mask=attention_mask, language_ids=language_ids,
                   output_hidden_states=layer != -1, unpad=unpad)
        return self.sentence_embedding(hidden_layer(out, layer, self), attention_mask, pooling, default="mean")

    def mlm_logits(self, hidden: torch.Tensor, positions: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Vocabulary logits from the tied MLM head, for all positions or only where the bool
        ``positions`` mask is True."""
        if self.lm_head is None:
            raise InputError(f"model {self.config.architecture!r} was built without an MLM head (mlm_head=False)")
        return self.lm_head(hidden, positions)
