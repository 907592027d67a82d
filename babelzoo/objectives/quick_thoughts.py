"""Quick-thoughts: pick a sentence's neighbours out of the batch.

Logeswaran & Lee 2018, "An efficient framework for learning sentence representations". The
generation of skip-thoughts is replaced by classification: a batch holds runs of consecutive
sentences, and for every sentence s the true context sentences (its previous and next sentence
in the same document) must be told apart from every other sentence of the batch S_cand,

    p(s_cand | s, S_cand) = exp(f(s) · g(s_cand)) / Σ_{s' ∈ S_cand} exp(f(s) · g(s'))
    L = −Σ_s Σ_{s_ctxt ∈ C(s)} log p(s_ctxt | s, S_cand)

(averaged here over the sentences s that have a context in the batch). A sentence is never
its own candidate (S_cand = the batch without s) and contexts never cross documents; a
document's other sentences and other documents' sentences are all negatives.

f is the model; g is a second encoder of the same architecture owned by the objective
(``context_encoder``), as in the paper, which trains two encoders and concatenates f(s) and
g(s) at test time (:meth:`QuickThoughts.sentence_vectors`). g reads the model's (shared)
token embeddings, so only its recurrent layers are its own; the checkpoint the run saves is f,
which every fine-tuning head and evaluation reads. ``share_encoder=True`` makes g = f (one
encoder, half the recurrent parameters).
Sentence vectors are pooled as in skip-thoughts: ``final`` (the states each RNN direction ends
in) unless the architecture fixes another (:meth:`~babelzoo.zoo.model.BabelModel.sentence_embedding`).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch
from torch import nn

from ..datasets.specials import SpecialIds
from ..zoo.config import EncoderConfig
from ..zoo.model_config import ModelConfig
from ..zoo.family import family_of
from .base import Loss, Objective, register_objective
from .batching import encoder_inputs, sentence_batch, unwrap
from .examples import ExampleError, as_document, require_nonempty


def context_targets(sizes: Sequence[int]) -> torch.Tensor:
    """bool [N, N] over the N = Σ sizes sentences of documents laid out one after another:
    [i, j] is True when j is i's previous or next sentence in the same document."""
    starts = torch.tensor([0, *sizes]).cumsum(0)
    document = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(list(sizes)))
    index = torch.arange(int(starts[-1]))
    same = document[:, None] == document[None, :]
    return same & (index[:, None] - index[None, :]).abs().eq(1)


def context_loss(f: torch.Tensor, g: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """−Σ_{s_ctxt} log p(s_ctxt | s, S_cand), averaged over the rows of ``targets`` [N, N] that
    have a context; scores f(s)·g(s') with each sentence's own column removed from the softmax.
    Returns (loss, accuracy: how often the highest-scoring candidate is a true context)."""
    scores = f.float() @ g.float().T
    own = torch.eye(scores.shape[0], dtype=torch.bool, device=scores.device)
    scores = scores.masked_fill(own, float("-inf"))  # a sentence is never its own candidate
    log_p = scores.log_softmax(dim=-1)
    rows = targets.any(dim=1)
    per_sentence = -log_p.masked_fill(~targets, 0.0).sum(dim=1)
    loss = per_sentence[rows].mean()
    with torch.no_grad():
        best = scores.argmax(dim=-1)
        accuracy = targets[torch.arange(len(best), device=best.device), best][rows].float().mean()
    return loss, accuracy


@register_objective
class QuickThoughts(Objective):
    """Quick-thoughts over documents (every sentence of the batch's documents, in order)."""

    name = "quick_thoughts"
    consumes = "document"

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *, max_length: int = 64,
                 share_encoder: bool = False, pooling: Optional[str] = None, use_language_ids: bool = True):
        super().__init__()
        text = config.text if isinstance(config, ModelConfig) else config
        self.specials = specials
        self.max_length = max_length
        self.pooling = pooling
        self.use_language_ids = use_language_ids
        self.context_encoder = None if share_encoder else family_of(text).build_encoder(text)

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        require_nonempty(examples, self.name)
        documents = [as_document(x, i) for i, x in enumerate(examples)]
        sizes = [len(d) for d in documents]
        targets = context_targets(sizes)
        if not bool(targets.any()):
            raise ExampleError(f"{self.name}: no sentence of this batch has a neighbour in its document "
                               f"(document sizes: {sizes})")
        sentences = [sentence for document in documents for sentence in document]
        batch = sentence_batch(sentences, self.specials, self.max_length, self.name, self.use_language_ids)
        batch["targets"] = targets
        return batch

    def encode(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(f(s), g(s)) for every sentence of the batch, [N, H] each."""
        core = unwrap(model)
        kwargs = encoder_inputs(model, batch, self.use_language_ids)
        mask = kwargs["attention_mask"]
        out = model(**kwargs)
        f = core.sentence_embedding(out.last_hidden, mask, self.pooling, default="final")
        if self.context_encoder is None:
            return f, f
        embedded = core.embeddings(**{k: v for k, v in kwargs.items() if k != "attention_mask"})
        hidden, _ = self.context_encoder(embedded, mask)
        return f, core.sentence_embedding(hidden, mask, self.pooling, default="final")

    @torch.no_grad()
    def sentence_vectors(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The paper's test-time representation [f(s); g(s)], [N, 2H] (f(s) alone with a shared
        encoder)."""
        f, g = self.encode(model, batch)
        return f if self.context_encoder is None else torch.cat([f, g], dim=-1)

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        f, g = self.encode(model, batch)
        loss, accuracy = context_loss(f, g, batch["targets"])
        metrics = {"loss": loss.detach(), "accuracy": accuracy, "truncated": batch["truncated"]}
        return Loss(loss, metrics, batch["attention_mask"].sum())
