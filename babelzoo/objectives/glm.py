"""GLM: autoregressive blank infilling with 2-D positions.

Du et al. 2022, "GLM: General Language Model Pretraining with Autoregressive Blank Infilling",
§2.1. Spans s_1..s_m of the text x are each replaced by one [MASK] (Part A, x_corrupt); the
spans are then generated one after another in a random order z, each token from Part A, the
spans before it and its own earlier tokens (Part B)::

    max_θ E_z [ Σ_{i=1..m} log p_θ(s_{z_i} | x_corrupt, s_{z_<i}) ]
    p_θ(s_i | x_corrupt, s_{z_<i}) = Π_{j=1..ℓ_i} p(s_{i,j} | x_corrupt, s_{z_<i}, s_{i,<j})

Spans (§2.2): lengths ℓ ~ Poisson(λ = 3), here P(ℓ) ∝ λ^ℓ e^{−λ} / ℓ! over ℓ = 1..``span_max``
(a span is never empty; :func:`~babelzoo.objectives.noising.poisson_span_lengths`), are drawn until they cover at least 15 % of the tokens, then placed at
random in the text, never overlapping or touching (so every [MASK] stands for one span).

Layout of one example (the paper's Figure 2)::

    Part A   [CLS] x1 x2 [MASK] x4 [MASK] x6 [SEP]
    Part B   [START] x5 | [START] x3          (a span's inputs: [START] s_1 .. s_ℓ)
    targets            x5 [END] | x3 [END]    (a span's targets: s_1 .. s_ℓ [END])

* attention: Part A sees all of Part A only; a Part B token sees Part A and the Part B tokens up
  to itself (a prefix mask, :func:`~babelzoo.zoo.layers.masks.prefix_visibility`, with Part A
  as the prefix);
* position ids: position 1 is the position in Part A (for Part B tokens, the position of their
  span's [MASK]) and goes through the model's own positions (``position_ids``); position 2 is 0
  in Part A and 1..ℓ+1 along a span's inputs, through this objective's learned
  ``block_position`` table, added to the word embeddings that reach the model as
  ``inputs_embeds`` (the model then adds its positions, segments and norm on top);
* loss: cross-entropy of the Part B targets through the tied LM head.

[START] and [END] are the vocabulary's own [CLS] (``<s>``) and [SEP] (``</s>``) ids, in their
literal begin/end sense. [END] is a prediction target, so it must be a class of the tied head,
that is a vocabulary entry; babelzoo's tokenizers fix their five specials and put language tags
right after them, and imported vocabularies (WordPiece, XLM-R) have no free ids, so a sixth
special would change every tokenizer. A Part B [CLS] is told apart from Part A's by its block
position (≥ 1) and by what it attends to. GLM's released models add dedicated
``<|startofpiece|>``/``<|endofpiece|>`` tokens instead; the objective is otherwise the same.

Examples are sentences (token ids, optionally with a language). ``max_length`` bounds Part A
(the text is cut to ``max_length − 2`` tokens, the cut counted as ``truncated``), so position 1
stays below it; Part B adds Σℓ + m tokens.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import torch
from torch import nn

from ..datasets.specials import SpecialIds
from ..errors import InputError
from ..zoo.config import ConfigError, EncoderConfig
from ..zoo.model_config import ModelConfig
from ..zoo.layers.masks import prefix_visibility
from .base import Loss, Objective, register_objective
from .batching import IGNORE, check_vocab, encoder_inputs, language_index, languages_known, pad, truncate, unwrap
from .examples import ExampleError, Sentence, as_sentence, require_nonempty
from .noising import poisson_span_lengths
from .unilm import resolve_max_length, visible_token_loss


def sample_spans(n: int, coverage: float, lengths: torch.Tensor,
                 generator: Optional[torch.Generator] = None) -> list[tuple[int, int]]:
    """(start, end) spans over a text of ``n`` tokens, in text order: lengths drawn from
    ``lengths`` (P(ℓ) for ℓ = 1, 2, ...) until they sum to at least ⌈coverage·n⌉, placed uniformly
    at random with at least one unmasked token between two spans. A draw whose spans cannot fit
    is drawn again."""
    budget = max(1, math.ceil(coverage * n - 1e-9))
    for _ in range(100):
        drawn, total = [], 0
        while total < budget:
            drawn.append(int(torch.multinomial(lengths, 1, generator=generator)) + 1)
            total += drawn[-1]
        slack = n - total - (len(drawn) - 1)  # free tokens beyond one between each two spans
        if slack >= 0:
            break
    else:  # a text too short for any draw to fit (n = 1, 2): one span of the budget
        drawn, slack = [budget], n - budget
    places = torch.randint(slack + 1, (len(drawn),), generator=generator).sort().values.tolist()
    spans, offset = [], 0
    for place, length in zip(places, drawn):
        spans.append((place + offset, place + offset + length))
        offset += length + 1
    return spans


def infill_layout(ids: Sequence[int], spans: Sequence[tuple[int, int]], specials: SpecialIds) -> dict[str, Any]:
    """One example's GLM input from its text ``ids`` and its ``spans`` ((start, end) over ``ids``,
    in the order Part B generates them): ``input_ids``, ``position_ids`` (position 1),
    ``block_position_ids`` (position 2), ``labels`` (the next token along each span, then
    [END]; -100 in Part A) and ``part_a`` (its length)."""
    s, ends = specials, dict(spans)
    previous = 0
    for start, end in sorted(spans):
        if not previous <= start < end <= len(ids):
            raise InputError(f"span ({start}, {end}) is empty, overlaps another or leaves the text of "
                             f"{len(ids)} tokens")
        previous = end
    part_a, mask_at, t = [s.cls], {}, 0
    while t < len(ids):
        if t in ends:
            mask_at[t] = len(part_a)
            part_a.append(s.mask)
            t = ends[t]
        else:
            part_a.append(ids[t])
            t += 1
    part_a.append(s.sep)
    tokens, positions = list(part_a), list(range(len(part_a)))
    blocks, labels = [0] * len(part_a), [IGNORE] * len(part_a)
    for start, end in spans:
        span = list(ids[start:end])
        tokens += [s.cls, *span]  # [START] s_1 .. s_ℓ
        positions += [mask_at[start]] * (len(span) + 1)
        blocks += list(range(1, len(span) + 2))
        labels += [*span, s.sep]  # s_1 .. s_ℓ [END]
    return {"input_ids": tokens, "position_ids": positions, "block_position_ids": blocks, "labels": labels,
            "part_a": len(part_a)}


@register_objective
class GLM(Objective):
    """GLM's blank infilling over sentences (see the module docstring).

    ``coverage``: the share of tokens the spans cover at least; ``poisson_lambda``/``span_max``:
    the span-length distribution; ``max_length``: Part A's length (default 128, at most the
    model's ``max_positions``). Owns ``block_position``
    (position 2, [max_length, E])."""

    name = "glm"
    consumes = "sentence"

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *, coverage: float = 0.15,
                 poisson_lambda: float = 3.0, span_max: int = 40, max_length: Optional[int] = None,
                 use_language_ids: bool = True):
        super().__init__()
        text = config.text if isinstance(config, ModelConfig) else config
        if not 0.0 < coverage < 1.0:
            raise ConfigError(f"glm: coverage={coverage!r} must be in (0, 1)")
        if not poisson_lambda > 0:
            raise ConfigError(f"glm: poisson_lambda={poisson_lambda!r} must be positive")
        if not (isinstance(span_max, int) and span_max >= 1):
            raise ConfigError(f"glm: span_max={span_max!r} must be a positive integer")
        max_length = resolve_max_length(max_length, text, self.name)
        if max_length < 3:
            raise ConfigError(f"glm: max_length={max_length} leaves no room for tokens")
        self.specials = specials
        self.coverage = coverage
        self.span_lengths = poisson_span_lengths(poisson_lambda, span_max)
        self.max_length = max_length
        self.use_language_ids = use_language_ids
        # position 2 runs 0..ℓ+1 ≤ max_length − 1: a span lies inside the cut text
        self.block_position = nn.Embedding(max_length, text.embedding_dim)
        nn.init.normal_(self.block_position.weight, std=text.init_std)

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        require_nonempty(examples, self.name)
        sentences, truncated = [], 0
        for i, example in enumerate(examples):
            sentence = as_sentence(example, i)
            if not sentence.ids:
                raise ExampleError(f"glm: example {i} is empty; blank infilling needs at least one token")
            ids, cut = truncate(sentence.ids, self.max_length - 2)
            sentences.append(Sentence(ids, sentence.lang))
            truncated += cut
        spans = []
        for sentence in sentences:
            drawn = sample_spans(len(sentence.ids), self.coverage, self.span_lengths)
            spans.append([drawn[k] for k in torch.randperm(len(drawn)).tolist()])  # Part B's order z
        batch = self.collate(sentences, spans)
        batch["truncated"] = torch.tensor(truncated)
        return batch

    def collate(self, sentences: Sequence[Sentence], spans: Sequence[Sequence[tuple[int, int]]]) -> dict[str, torch.Tensor]:
        """The batch of ``sentences`` with the given spans (in Part B order), padded."""
        s = self.specials
        layouts = [infill_layout(x.ids, z, s) for x, z in zip(sentences, spans)]
        input_ids = pad([x["input_ids"] for x in layouts], s.pad)
        check_vocab(input_ids, s, "sentence")
        width = input_ids.shape[1]
        lengths = torch.tensor([len(x["input_ids"]) for x in layouts])
        real = torch.arange(width)[None] < lengths[:, None]
        part_a = prefix_visibility(torch.tensor([x["part_a"] for x in layouts]), width)
        batch = {"input_ids": input_ids, "attention_mask": real.long(),
                 "position_ids": pad([x["position_ids"] for x in layouts], 0, width),
                 "block_position_ids": pad([x["block_position_ids"] for x in layouts], 0, width),
                 "labels": pad([x["labels"] for x in layouts], IGNORE, width),
                 "visible": part_a & real[:, :, None] & real[:, None, :],
                 "truncated": torch.tensor(0)}
        if self.use_language_ids and languages_known([x.lang for x in sentences], self.name):
            lang = torch.tensor([language_index(s, x.lang, f"example {i}") for i, x in enumerate(sentences)])
            batch["language_ids"] = lang[:, None] * real
        return batch

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        inputs = encoder_inputs(model, batch, self.use_language_ids)
        ids = inputs.pop("input_ids")
        inputs["inputs_embeds"] = unwrap(model).word_embeddings(ids) + self.block_position(batch["block_position_ids"])
        return visible_token_loss(model, inputs, batch)
