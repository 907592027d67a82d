"""Cross-lingual word recovery (CLWR).

Huang et al. 2019, "Unicoder: A Universal Language Encoder by Pre-training with Multiple
Cross-lingual Tasks". For a translation pair (X, Y) with input word embeddings
x_1..x_m (source) and y_1..y_n (target), a trilinear attention lets every source position
gather target embeddings:

    A_ij = W · [x_i ; y_j ; x_i ⊙ y_j]          (W ∈ R^{3E}, trained with the objective)
    x̃_i  = Σ_j softmax_j(A_ij) · y_j

The recovered sequence x̃ (framed by the source's own [CLS]/[SEP] embeddings) goes through the
encoder as ``inputs_embeds``, and the tied LM head must predict the original source token at
every position: to succeed, W has to learn a soft word alignment and the encoder has to map
target-language embeddings back to source words.

The encoder gets the source language id (the language it must produce) when the model has
language embeddings.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import nn

from ..datasets.specials import SpecialIds
from ..zoo.config import EncoderConfig
from ..zoo.model_config import ModelConfig
from .base import Loss, Objective, register_objective
from .batching import IGNORE, check_vocab, encoder_inputs, language_index, languages_known, pad, truncate, unwrap
from .examples import ExampleError, as_pair, require_nonempty
from .mlm import token_prediction_loss


@register_objective
class CLWR(Objective):
    """Unicoder's cross-lingual word recovery over translation pairs. Owns ``attention``, the
    trilinear weight W (a bias would cancel in the softmax over j, so there is none)."""

    name = "clwr"
    consumes = "pair"

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *, max_length: int = 128,
                 use_language_ids: bool = True):
        super().__init__()
        text = config.text if isinstance(config, ModelConfig) else config
        self.specials = specials
        self.max_length = max_length
        self.use_language_ids = use_language_ids
        self.embedding_dim = text.embedding_dim
        self.attention = nn.Linear(3 * text.embedding_dim, 1, bias=False)
        nn.init.normal_(self.attention.weight, std=text.init_std)

    def scores(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """A [B, m, n] with A_ij = W·[x_i; y_j; x_i⊙y_j], computed as
        w_x·x_i + w_y·y_j + (w_xy⊙x_i)·y_j so no [B, m, n, 3E] tensor is built."""
        w_x, w_y, w_xy = self.attention.weight[0].split(self.embedding_dim)
        return (x @ w_x)[:, :, None] + (y @ w_y)[:, None, :] + torch.einsum("bie,bje->bij", x * w_xy, y)

    def recover(self, x: torch.Tensor, y: torch.Tensor, y_mask: torch.Tensor) -> torch.Tensor:
        """x̃ [B, m, E]: x̃_i = Σ_j softmax_j(A_ij) y_j over the real target tokens (``y_mask``)."""
        scores = self.scores(x, y).masked_fill(~y_mask.bool()[:, None, :], float("-inf"))
        return scores.softmax(dim=-1) @ y

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        require_nonempty(examples, self.name)
        pairs = [as_pair(x, i) for i, x in enumerate(examples)]
        s = self.specials
        rows, targets, truncated = [], [], 0
        for i, pair in enumerate(pairs):
            if not pair.src or not pair.tgt:
                raise ExampleError(f"{self.name}: example {i} has an empty {'source' if not pair.src else 'target'}")
            src, cut_src = truncate(pair.src, self.max_length - 2)
            tgt, cut_tgt = truncate(pair.tgt, self.max_length)
            truncated += cut_src + cut_tgt
            rows.append([s.cls, *src, s.sep])
            targets.append(tgt)
        input_ids = pad(rows, s.pad)
        target_ids = pad(targets, s.pad)
        check_vocab(input_ids, s, "source")
        check_vocab(target_ids, s, "target")
        p = torch.arange(input_ids.shape[1])[None]
        target_lengths = torch.tensor([len(t) for t in targets])[:, None]
        lengths = torch.tensor([len(r) for r in rows])[:, None]
        attention_mask = (p < lengths).long()
        words = (p >= 1) & (p < lengths - 1)  # every source token between [CLS] and [SEP]
        batch = {"input_ids": input_ids, "attention_mask": attention_mask,
                 "labels": torch.where(words, input_ids, torch.full_like(input_ids, IGNORE)),
                 "target_ids": target_ids,
                 "target_mask": (torch.arange(target_ids.shape[1])[None] < target_lengths).long(),
                 "truncated": torch.tensor(truncated)}
        if self.use_language_ids and languages_known([x.src_lang for x in pairs], self.name):
            src_lang = torch.tensor([language_index(s, x.src_lang, f"example {i} source") for i, x in enumerate(pairs)])
            batch["language_ids"] = src_lang[:, None] * attention_mask
        return batch

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        word = unwrap(model).embeddings.word
        x = word(batch["input_ids"])
        y = word(batch["target_ids"])
        recovered = self.recover(x, y, batch["target_mask"])
        words = batch["labels"].ne(IGNORE)
        inputs_embeds = torch.where(words[..., None], recovered, x)
        kwargs = encoder_inputs(model, batch, self.use_language_ids)
        kwargs["input_ids"] = None
        out = model(inputs_embeds=inputs_embeds, **kwargs)
        loss, metrics = token_prediction_loss(model, out.last_hidden, batch["labels"])
        metrics["truncated"] = batch["truncated"]
        return Loss(loss, metrics, batch["attention_mask"].sum() + batch["target_mask"].sum())
