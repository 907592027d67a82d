"""Replaced-token detection (RTD), ELECTRA's objective.

Clark et al. 2020, "ELECTRA: Pre-training Text Encoders as Discriminators Rather Than
Generators". A small generator G is trained with masked LM; its samples replace the masked
tokens, and the model being pre-trained (the discriminator D) classifies every token as
original or replaced:

    L = L_MLM(x, θ_G) + λ · L_Disc(x, θ_D),   λ = 50
    L_Disc = −Σ_t [ 1(x̂_t = x_t) log D(x̂, t) + 1(x̂_t ≠ x_t) log(1 − D(x̂, t)) ]   (mean over tokens)

As in the paper: the masked positions are replaced by [MASK] in the generator's input; a
replacement is *sampled* from the generator's softmax (no gradient flows through the sample);
a sampled token that equals the original counts as original; the discriminator sees every
real token. The generator shares the model's token, position, segment and language
embeddings (and their LayerNorm) and has its own projection E → H_G; it is ``generator_size``
(¼ by default) of the discriminator's width with the same depth, 64-wide attention heads and
a 4·H_G feed-forward, and its LM head is tied to the shared word embeddings.

The objective owns the generator (``generator_project``, ``generator``, ``generator_head``)
and the discriminator head (``discriminator``: dense → activation → dense to one logit).
"""

from __future__ import annotations

from typing import Mapping, Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..datasets.specials import SpecialIds
from ..zoo.config import ConfigError, EncoderConfig
from ..zoo.model_config import ModelConfig
from ..zoo.family import family_of
from ..zoo.layers import activation
from .base import Loss, register_objective
from .batching import IGNORE, encoder_inputs, unwrap
from .masking import MaskingConfig
from .mlm import MLM


def generator_config(text: EncoderConfig, size: float) -> EncoderConfig:
    """The generator's encoder config: width ``size`` × H, heads of 64 (at least one), 4× FFN."""
    if not 0.0 < size <= 1.0:
        raise ConfigError(f"RTD generator_size={size!r} must be in (0, 1]")
    width = max(8, int(round(text.hidden_size * size)))
    heads = max(1, width // 64)
    width = heads * (width // heads)
    # Only the encoder is built: it reads the shared (projected) embeddings, so the family's
    # embedding fields do not matter.
    return text.replace(hidden_size=width, num_heads=heads, intermediate_size=4 * width, pooler=False, mlm_head=False)


class GeneratorHead(nn.Module):
    """MLM head of the generator: dense H_G → E, activation, LayerNorm, then the shared word
    embedding matrix as decoder, plus a bias of its own."""

    def __init__(self, hidden: int, embedding: int, vocab: int, act: str, eps: float):
        super().__init__()
        self.dense = nn.Linear(hidden, embedding)
        self.act = activation(act)
        self.norm = nn.LayerNorm(embedding, eps=eps)
        self.bias = nn.Parameter(torch.zeros(vocab))

    def forward(self, hidden: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(self.act(self.dense(hidden))), word_embeddings) + self.bias


@register_objective
class RTD(MLM):
    """ELECTRA's replaced-token detection over sentences (token-id lists or ``(ids, lang)``)."""

    name = "rtd"
    consumes = "sentence"

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *, generator_size: float = 0.25,
                 discriminator_weight: float = 50.0, masking: MaskingConfig | Mapping | None = None,
                 word_starts: Optional[torch.Tensor] = None, max_length: int = 128, use_language_ids: bool = True):
        # ELECTRA's generator input replaces every chosen token by [MASK].
        masking = MaskingConfig.coerce(masking if masking is not None else {"mask_token": 1.0, "random_token": 0.0})
        super().__init__(specials, masking=masking, word_starts=word_starts, max_length=max_length,
                         use_language_ids=use_language_ids)
        text = config.text if isinstance(config, ModelConfig) else config
        self.discriminator_weight = discriminator_weight
        gen = generator_config(text, generator_size)
        self.generator_project = (nn.Linear(text.embedding_dim, gen.hidden_size)
                                  if text.embedding_dim != gen.hidden_size else None)
        self.generator = family_of(gen).build_encoder(gen)
        self.generator_head = GeneratorHead(gen.hidden_size, text.embedding_dim, text.vocab_size, text.activation,
                                            text.layer_norm_eps)
        self.discriminator = nn.Sequential(nn.Linear(text.hidden_size, text.hidden_size), activation(text.activation),
                                           nn.Linear(text.hidden_size, 1))
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=text.init_std)
                if module.bias is not None:  # a bias-free family's generator (ModernBERT)
                    nn.init.zeros_(module.bias)

    def generate(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """The generator's logits at the masked positions, through the shared embeddings."""
        core = unwrap(model)
        kwargs = encoder_inputs(model, batch, self.use_language_ids)
        mask = kwargs.pop("attention_mask")
        x = core.embeddings(**kwargs, project=False)
        if self.generator_project is not None:
            x = self.generator_project(x)
        hidden, _ = self.generator(x, mask)
        positions = batch["labels"].ne(IGNORE)
        return self.generator_head(hidden[positions], core.embeddings.word.weight), positions

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        labels = batch["labels"]
        logits, positions = self.generate(model, batch)
        targets = labels[positions]
        generator_loss = F.cross_entropy(logits.float(), targets)
        with torch.no_grad():
            sampled = torch.multinomial(logits.float().softmax(-1), 1).squeeze(1)
            original = torch.where(positions, labels, batch["input_ids"])
            corrupted = original.clone()
            corrupted[positions] = sampled
            real = batch["attention_mask"].bool()
            replaced = (corrupted != original) & real  # a sample equal to the original counts as original
        disc_batch = dict(batch, input_ids=corrupted)
        out = model(**encoder_inputs(model, disc_batch, self.use_language_ids))
        scores = self.discriminator(out.last_hidden).squeeze(-1)
        discriminator_loss = F.binary_cross_entropy_with_logits(scores[real].float(), replaced[real].float())
        loss = generator_loss + self.discriminator_weight * discriminator_loss  # L = L_MLM + λ·L_Disc
        with torch.no_grad():
            accuracy = ((scores[real] > 0) == replaced[real]).float().mean()
            generator_accuracy = (logits.argmax(-1) == targets).float().mean()
        metrics = {"loss": loss.detach(), "accuracy": accuracy,
                   "generator_loss": generator_loss.detach(),
                   "generator_accuracy": generator_accuracy,
                   "discriminator_loss": discriminator_loss.detach(),
                   "replaced": replaced[real].float().mean(), "truncated": batch["truncated"]}
        return Loss(loss, metrics, real.sum())
