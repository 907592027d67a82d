"""Cross-lingual paraphrase classification (CLPC).

Huang et al. 2019, "Unicoder: A Universal Language Encoder by Pre-training with Multiple
Cross-lingual Tasks": the input ``[CLS] X [SEP] Y [SEP]`` pairs sentences of two languages
and the model classifies whether Y is a translation of X:

    p(translation | X, Y) = softmax(W · h_[CLS] + b)

Positives are the batch's translation pairs; each source also gets ``negatives`` targets from a
pluggable :mod:`miner <babelzoo.objectives.negatives>` — random, or hard negatives (nearest
non-translations by the current model's sentence embeddings, searched with FAISS). A true
translation is never used as a negative.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..datasets.specials import SpecialIds
from ..zoo.config import ConfigError, EncoderConfig
from ..zoo.model_config import ModelConfig
from .base import Loss, Objective, register_objective
from .batching import (
    check_vocab,
    encoder_inputs,
    frame_rows,
    language_index,
    languages_known,
    pad,
    pair_rows,
    truncate,
    unwrap,
)
from .examples import ExampleError, as_pair, require_nonempty
from .negatives import NegativeMiner, build_miner


def forbidden_matrix(srcs: Sequence[Sequence[int]], tgts: Sequence[Sequence[int]]) -> torch.Tensor:
    """[B, B] bool: True where target j is a translation of source i (same pair, or a pair with
    the same source or the same target text)."""
    src_keys = [tuple(s) for s in srcs]
    tgt_keys = [tuple(t) for t in tgts]
    same_src = torch.tensor([[a == b for b in src_keys] for a in src_keys])
    same_tgt = torch.tensor([[a == b for b in tgt_keys] for a in tgt_keys])
    return same_src | same_tgt | torch.eye(len(srcs), dtype=torch.bool)


def sentence_classifier_input(out) -> torch.Tensor:
    """BERT's sentence-pair representation: the pooler output tanh(W h_[CLS] + b) when the
    model has a pooler, else h_[CLS]."""
    return out.pooled if out.pooled is not None else out.last_hidden[:, 0]


@register_objective
class CLPC(Objective):
    """Unicoder's cross-lingual paraphrase classification. Owns ``classifier`` (Linear H → 2).

    Each side is cut to ``(max_length - 3) // 2`` tokens so that any source fits with any
    target. ``miner``: ``"random"``, ``"hard"`` or a :class:`NegativeMiner`."""

    name = "clpc"
    consumes = "pair"

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *,
                 miner: str | NegativeMiner = "random", negatives: int = 1, max_length: int = 128,
                 use_language_ids: bool = True):
        super().__init__()
        text = config.text if isinstance(config, ModelConfig) else config
        if negatives < 1:
            raise ConfigError(f"CLPC negatives={negatives} must be at least 1")
        self.specials = specials
        self.miner = build_miner(miner)
        self.negatives = negatives
        self.max_length = max_length
        self.use_language_ids = use_language_ids
        self.classifier = nn.Linear(text.hidden_size, 2)
        nn.init.normal_(self.classifier.weight, std=text.init_std)
        nn.init.zeros_(self.classifier.bias)

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        require_nonempty(examples, self.name)
        pairs = [as_pair(x, i) for i, x in enumerate(examples)]
        side = (self.max_length - 3) // 2
        srcs, tgts, truncated = [], [], 0
        for i, pair in enumerate(pairs):
            if not pair.src or not pair.tgt:
                raise ExampleError(f"{self.name}: example {i} has an empty {'source' if not pair.src else 'target'}")
            src, a = truncate(pair.src, side)
            tgt, b = truncate(pair.tgt, side)
            srcs.append(src)
            tgts.append(tgt)
            truncated += a + b
        s = self.specials
        batch = {"src_ids": pad(srcs, s.pad), "src_lengths": torch.tensor([len(x) for x in srcs]),
                 "tgt_ids": pad(tgts, s.pad), "tgt_lengths": torch.tensor([len(x) for x in tgts]),
                 "forbidden": forbidden_matrix(srcs, tgts), "truncated": torch.tensor(truncated)}
        check_vocab(batch["src_ids"], s, "source")
        check_vocab(batch["tgt_ids"], s, "target")
        if self.use_language_ids and languages_known([x.src_lang for x in pairs] + [x.tgt_lang for x in pairs], self.name):
            batch["src_lang"] = torch.tensor([language_index(s, x.src_lang, f"example {i} source")
                                              for i, x in enumerate(pairs)])
            batch["tgt_lang"] = torch.tensor([language_index(s, x.tgt_lang, f"example {i} target")
                                              for i, x in enumerate(pairs)])
        if not self.miner.needs_embeddings:
            batch["negatives"] = self.miner.mine(batch["forbidden"], self.negatives)
        return batch

    # --- mining with the current model ---------------------------------------------------------
    def _side(self, batch: dict[str, torch.Tensor], side: str) -> dict[str, torch.Tensor]:
        framed = frame_rows(batch[f"{side}_ids"], batch[f"{side}_lengths"], self.specials)
        if f"{side}_lang" in batch:
            framed["language_ids"] = batch[f"{side}_lang"][:, None] * framed["attention_mask"]
        return framed

    @torch.no_grad()
    def sentence_embeddings(self, model: nn.Module,
                            batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Source and target sentence vectors from the current model (eval mode, no grad)."""
        core = unwrap(model)
        was_training = core.training
        core.eval()
        try:
            vectors = []
            for side in ("src", "tgt"):
                framed = self._side(batch, side)
                out = core(**encoder_inputs(core, framed, self.use_language_ids))
                vectors.append(core.sentence_embedding(out.last_hidden, framed["attention_mask"], self.miner.pooling,
                                                      default="mean"))
        finally:
            core.train(was_training)
        return vectors[0], vectors[1]

    def mine(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """[B, negatives] indices of negative targets (mined now if the miner needs the model)."""
        if "negatives" in batch:
            return batch["negatives"]
        queries, keys = self.sentence_embeddings(model, batch)
        return self.miner.mine(batch["forbidden"], self.negatives, queries, keys)

    # --- loss ----------------------------------------------------------------------------------
    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        negatives = self.mine(model, batch)
        b = batch["src_ids"].shape[0]
        device = batch["src_ids"].device
        positives = torch.arange(b, device=device)
        rows = torch.cat([positives, positives.repeat_interleave(self.negatives)])
        cols = torch.cat([positives, negatives.reshape(-1)])
        labels = torch.cat([torch.ones(b, dtype=torch.long, device=device),
                            torch.zeros(b * self.negatives, dtype=torch.long, device=device)])
        pairs = pair_rows(batch["src_ids"], batch["src_lengths"], batch["tgt_ids"], batch["tgt_lengths"],
                          rows, cols, self.specials)
        if "src_lang" in batch:
            pairs["language_ids"] = torch.where(pairs["first"], batch["src_lang"][rows][:, None],
                                                batch["tgt_lang"][cols][:, None]) * pairs["attention_mask"]
        out = model(**encoder_inputs(model, pairs, self.use_language_ids))
        logits = self.classifier(sentence_classifier_input(out))  # p(translation | X, Y) = softmax(W·h + b)
        loss = F.cross_entropy(logits.float(), labels)
        accuracy = (logits.detach().argmax(-1) == labels).float().mean()
        metrics = {"loss": loss.detach(), "accuracy": accuracy, "truncated": batch["truncated"]}
        return Loss(loss, metrics, pairs["attention_mask"].sum())
