"""XLNet's permutation language modelling (PLM).

Yang et al. 2019, "XLNet: Generalized Autoregressive Pretraining for Language Understanding",
§2.2–2.3. For a sequence x of length T and Z_T the permutations of its positions, PLM
maximises the likelihood of x under every factorisation order z, predicting only the last
tokens of each order (partial prediction, cutting point c)::

    max_θ  E_{z∼Z_T} [ Σ_{t=c+1}^{|z|} log p_θ(x_{z_t} | x_{z<t}) ]

    p_θ(X_{z_t} = x | x_{z<t}) = exp(e(x)ᵀ g_θ(x_{z<t}, z_t)) / Σ_{x'} exp(e(x')ᵀ g_θ(x_{z<t}, z_t))

with e the tied output embeddings (plus the LM head's bias) and g the query stream of
two-stream self-attention, computed by the model's layers with shared weights::

    g_{z_t}^(m) ← Attention(Q = g_{z_t}^(m−1), KV = h_{z<t}^(m−1))    (position z_t, not its content)
    h_{z_t}^(m) ← Attention(Q = h_{z_t}^(m−1), KV = h_{z≤t}^(m−1))    (content, sees itself)

g^(0) = w (a learned vector), h^(0) = e(x). The input keeps its natural order: the
factorisation order only decides who sees whom (``visible``: i reads j iff z⁻¹(j) < z⁻¹(i)).

Partial prediction: the number of targets of a sequence with n predictable tokens (its tokens
but [CLS] and [SEP]) and T real tokens is

    m = min(⌈n / K⌉, T − 1)

(K = 6 as in the paper, K ≈ |z| / (|z| − c)), and they are the last m positions of z. The
special tokens are always placed first in z, so they are context for every target and never
targets, and every target has at least one token before it. ``span=True`` chooses the targets
as the paper's code does instead (``_sample_mask``): spans of ℓ consecutive tokens, ℓ drawn with
p(ℓ) ∝ 1/ℓ for ℓ ≤ ``max_span``, each within a window of ℓ·K tokens, until about n/K tokens are
chosen (spans of tokens here, where the original counts whole words); the order then puts the
context first and the span tokens last, in random orders of their own, so the targets are again
exactly the last tokens of z. Padding is never visible and never a target.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch
from torch import nn

from ..datasets.specials import SpecialIds
from ..zoo.config import ConfigError, EncoderConfig
from ..zoo.model_config import ModelConfig
from ..zoo.layers import select_rows
from .base import Loss, Objective, register_objective
from .batching import IGNORE, encoder_inputs, frame_sentences, language_index, languages_known, unwrap
from .examples import ExampleError, as_sentence, require_nonempty
from .mlm import token_prediction_loss


def factorisation_ranks(real: torch.Tensor, first: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """A random factorisation order z per row, as ranks: ``rank[b, i] = z⁻¹(i)``. The real
    positions of ``first`` come first and those of ``last`` last, each group in a uniformly
    random order; padding ranks after every real token."""
    keys = torch.rand(real.shape) - 2.0 * first.float() + 2.0 * last.float() + 8.0 * (~real).float()
    return keys.argsort(dim=1).argsort(dim=1)


def permutation_visibility(rank: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """[B, L, L] bool: position i may read position j iff both are real and z⁻¹(j) < z⁻¹(i)."""
    return real[:, :, None] & real[:, None, :] & (rank[:, None, :] < rank[:, :, None])


def last_of_order(rank: torch.Tensor, real: torch.Tensor, candidates: torch.Tensor, k: int) -> torch.Tensor:
    """Partial prediction: bool [B, L], the last m = min(⌈n/K⌉, T − 1) real positions of each
    order (n: the row's candidates, T: its real tokens). With the non-candidates ranked first,
    these are candidates only."""
    count = candidates.sum(dim=1)
    total = real.sum(dim=1)
    m = torch.minimum(torch.div(count + k - 1, k, rounding_mode="floor"), (total - 1).clamp(min=0))
    return real & (rank >= (total - m)[:, None])


def span_targets(candidates: torch.Tensor, k: int, max_span: int) -> torch.Tensor:
    """The paper's span sampler per row: walk the candidate positions; draw ℓ with p(ℓ) ∝ 1/ℓ
    (ℓ ≤ ``max_span``), skip a random part of the ℓ·K − ℓ context tokens, take ℓ tokens, skip the
    rest of the context; stop after ⌈n/K⌉ tokens. A row with candidates gets at least one target."""
    lengths = torch.arange(1, max_span + 1, dtype=torch.float)
    weights = 1.0 / lengths
    out = torch.zeros_like(candidates)
    for row in range(candidates.shape[0]):
        positions = candidates[row].nonzero().flatten()
        n = len(positions)
        if n == 0:
            continue
        budget, chosen, begin = math.ceil(n / k), 0, 0
        while chosen < budget and begin < n:
            span = int(torch.multinomial(weights, 1)) + 1
            context = span * k - span
            left = int(torch.randint(context, ())) if context > 0 else 0
            begin += left
            if begin >= n:
                break
            end = min(begin + span, n, begin + budget - chosen)
            out[row, positions[begin:end]] = True
            chosen += end - begin
            begin = end + context - left
        if chosen == 0:
            out[row, positions[int(torch.randint(n, ()))]] = True
    return out


@register_objective
class PLM(Objective):
    """Permutation LM over single sentences ``[CLS] X [SEP]``, for models with two-stream
    attention (the ``xlnet`` family). ``k``: the paper's K (about 1/K of each order's tokens
    are predicted); ``span``: choose the targets as spans (``max_span`` tokens at most) instead
    of the last ⌈n/K⌉ of a uniformly random order. Language ids reach models that have
    language embeddings, as in MLM."""

    name = "plm"
    consumes = "sentence"

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *, k: int = 6,
                 span: bool = False, max_span: int = 5, max_length: int = 128, use_language_ids: bool = True):
        super().__init__()
        text = config.text if isinstance(config, ModelConfig) else config
        if type(text).family != "xlnet":
            raise ConfigError(f"plm: permutation LM needs a model with two-stream attention (family 'xlnet'); "
                              f"this model's text encoder is of family {type(text).family!r}")
        for option, value, low in (("k", k, 1), ("max_span", max_span, 1), ("max_length", max_length, 3)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigError(f"plm: {option}={value!r} must be an integer >= {low}")
        self.specials = specials
        self.k = k
        self.span = span
        self.max_span = max_span
        self.max_length = max_length
        self.use_language_ids = use_language_ids

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        require_nonempty(examples, self.name)
        sentences = [as_sentence(x, i) for i, x in enumerate(examples)]
        s = self.specials
        input_ids, real, truncated = frame_sentences(sentences, s, self.max_length)
        framing = (input_ids == s.cls) | (input_ids == s.sep)
        candidates = real & ~framing
        if self.span:
            targets = span_targets(candidates, self.k, self.max_span)
            rank = factorisation_ranks(real, framing, targets)
        else:
            rank = factorisation_ranks(real, framing, torch.zeros_like(real))
            targets = last_of_order(rank, real, candidates, self.k)
        if not bool(targets.any()):
            raise ExampleError(f"{self.name}: no example of the batch has a token to predict (all are empty)")
        index, valid = select_rows(targets)
        target_mapping = torch.zeros(len(sentences), index.shape[1], input_ids.shape[1])
        target_mapping.scatter_(2, index[..., None], valid[..., None].float())
        labels = torch.where(valid, input_ids.gather(1, index), torch.full_like(index, IGNORE))
        batch = {"input_ids": input_ids, "attention_mask": real.long(), "visible": permutation_visibility(rank, real),
                 "target_mapping": target_mapping, "labels": labels, "truncated": torch.tensor(truncated)}
        if self.use_language_ids and languages_known([x.lang for x in sentences], self.name):
            lang = torch.tensor([language_index(s, x.lang, f"example {i}") for i, x in enumerate(sentences)])
            batch["language_ids"] = lang[:, None] * real.long()
        return batch

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        core = unwrap(model)
        inputs = encoder_inputs(model, batch, self.use_language_ids)
        x = core.embeddings(inputs["input_ids"], language_ids=inputs.get("language_ids"))
        _, query = core.encoder.two_stream(x, batch["visible"], batch["target_mapping"], inputs["attention_mask"],
                                           inputs.get("segment_ids"))
        # −(1/|targets|) Σ_t log p(x_{z_t} | x_{z<t}): the query stream through the tied LM head
        loss, metrics = token_prediction_loss(model, query, batch["labels"])
        metrics["truncated"] = batch["truncated"]
        return Loss(loss, metrics, batch["attention_mask"].sum())
