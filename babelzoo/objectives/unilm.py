"""UniLM: one Transformer, four language models, chosen by the self-attention mask.

Dong et al. 2019, "Unified Language Model Pre-training for Natural Language Understanding and
Generation", §2. Every LM is the same cloze task — tokens chosen as BERT chooses them (15 %,
replaced 80/10/10 by [MASK] / a random token / themselves) are predicted by the tied LM head —
and the LMs differ only in the mask M added to the attention scores (§2.2)::

    A_l = softmax(Q Kᵀ / √d_k + M) V,    M_ij = 0 if token i may attend to j, −∞ otherwise

* ``bidirectional``: every token sees every token (BERT), over ``[CLS] S1 [SEP] S2 [SEP]``;
* ``left_to_right``: token i sees j ≤ i (a masked token sees its left context and itself),
  over one segment ``[CLS] S [SEP]``;
* ``right_to_left``: token i sees j ≥ i, over one segment;
* ``seq2seq``: over ``[CLS] S1 [SEP] S2 [SEP]``, source tokens (through the first [SEP]) see the
  whole source; target tokens see the source and the target up to themselves. Masks fall in the
  target only (S2), so the model learns to generate S2 from S1.

One mode is drawn per batch, by default with the paper's shares (§3.1): 1/3 bidirectional,
1/3 seq2seq, 1/6 left-to-right, 1/6 right-to-left (``modes`` sets other weights).

**Examples are documents** (sequences of sentences, as ``catalog_documents`` or ``documents``
give them): the paper trains on contiguous text, the pairs (S1, S2) are consecutive text
segments, and a unidirectional LM reads one contiguous segment. A document yields
S1, S2 as NSP/SOP build them (consecutive sentences filling ``max_length``, split at a random
sentence boundary, the longer side cut at random) and a single segment as consecutive
sentences from a random start. Translation pairs as seq2seq (a cross-lingual UniLM) would need
``pair`` examples, and one objective consumes one example type; such a variant is its own
objective.

Segment ids: 0 for ``[CLS] S1 [SEP]``, 1 for ``S2 [SEP]``, 0 for a single segment. The paper
also uses segment embeddings "as the LM identifier"; with ``lm_segments=True`` (a model with at
least six segment embeddings) the ids are bidirectional 0/1, left-to-right 2, right-to-left 3,
seq2seq 4/5.

Not reproduced here: the paper's n-gram masking (20 % of the masked units are bigrams or
trigrams; ``masking={"unit": "span", ...}`` gives SpanBERT-style spans instead), and the NSP
loss it adds to the bidirectional LM (the ``nsp`` objective, mixed in with
:class:`~babelzoo.objectives.Mixture`).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import torch
from torch import nn

from ..datasets.specials import SpecialIds
from ..zoo.config import ConfigError, EncoderConfig
from ..zoo.model_config import ModelConfig
from ..zoo.layers.masks import causal_visibility, prefix_visibility
from ..zoo.model import BabelModel
from .base import Loss, register_objective
from .batching import IGNORE, check_vocab, encoder_inputs, language_index, languages_known, pad, truncate, unwrap
from .examples import ExampleError, Sentence, as_document, require_nonempty
from .masking import MaskingConfig
from .mlm import MaskingObjective, token_prediction_loss
from .sop import frame_pair, sentence_tokens, split_chunk, truncate_pair_at_random

MODES = ("bidirectional", "left_to_right", "right_to_left", "seq2seq")
PAPER_MODES = {"bidirectional": 1 / 3, "left_to_right": 1 / 6, "right_to_left": 1 / 6, "seq2seq": 1 / 3}
PAIRED = ("bidirectional", "seq2seq")  # the modes that read two segments
LM_SEGMENTS = {"bidirectional": (0, 1), "left_to_right": (2, 2), "right_to_left": (3, 3), "seq2seq": (4, 5)}


def resolve_max_length(max_length: Optional[int], text: EncoderConfig, objective: str) -> int:
    """An objective's input length: 128 capped at the model's ``max_positions`` when not given;
    a given length past ``max_positions`` is refused (its position ids would not exist)."""
    if max_length is None:
        return min(128, text.max_positions)
    if max_length > text.max_positions:
        raise ConfigError(f"{objective}: max_length={max_length} exceeds the model's max_positions="
                          f"{text.max_positions}; lower max_length")
    return max_length


def unilm_visibility(mode: str, lengths: torch.Tensor, source_lengths: torch.Tensor, width: int) -> torch.Tensor:
    """[B, L, L] bool, True where token i may attend to token j, for rows of ``lengths`` real
    tokens padded to ``width`` (padding neither sees nor is seen). ``source_lengths``: the
    length of ``[CLS] S1 [SEP]`` (read by ``seq2seq`` only)."""
    if mode == "bidirectional":
        rule = torch.ones(1, width, width, dtype=torch.bool)
    elif mode == "left_to_right":
        rule = causal_visibility(width)[None]
    elif mode == "right_to_left":
        rule = causal_visibility(width).T[None]
    elif mode == "seq2seq":
        rule = prefix_visibility(source_lengths, width)
    else:
        raise ConfigError(f"UniLM mode {mode!r} must be one of {', '.join(MODES)}")
    real = torch.arange(width)[None] < lengths[:, None]
    return rule & real[:, :, None] & real[:, None, :]


def mode_weights(modes: Optional[Mapping[str, float]]) -> torch.Tensor:
    """The sampling weights of :data:`MODES` (the paper's shares when ``modes`` is None; a mode
    left out of ``modes`` is never drawn)."""
    modes = dict(PAPER_MODES if modes is None else modes)
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        raise ConfigError(f"unilm: unknown mode(s) {unknown} in modes; modes are {', '.join(MODES)}")
    for name, weight in modes.items():
        if not isinstance(weight, (int, float)) or weight < 0:
            raise ConfigError(f"unilm: modes.{name}={weight!r} must be a non-negative number")
    weights = torch.tensor([float(modes.get(name, 0.0)) for name in MODES], dtype=torch.float64)
    if not weights.sum() > 0:
        raise ConfigError("unilm: modes gives every mode weight 0; at least one must be positive")
    return weights


def single_segment(document: list[Sentence], budget: int) -> list[Sentence]:
    """Consecutive sentences from a random start, while they fit ``budget`` tokens (at least one)."""
    start = int(torch.randint(len(document), (1,)))
    segment, total = [], 0
    for sentence in document[start:]:
        if segment and total + len(sentence.ids) > budget:
            break
        segment.append(sentence)
        total += len(sentence.ids)
    return segment


@register_objective
class UniLM(MaskingObjective):
    """UniLM's four cloze LMs over documents, one mode per batch (see the module docstring).

    ``modes``: sampling weights by mode name; ``masking``/``word_starts``: as for MLM;
    ``max_length``: the whole input, framing included (default 128, at most the model's
    ``max_positions``; cut tokens are counted as ``truncated``); ``lm_segments``: the paper's
    per-mode segment ids (needs six segment embeddings). The prepared batch holds ``visible`` [B, L, L] and ``mode`` (an index into
    :data:`MODES`)."""

    name = "unilm"
    consumes = "document"

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *,
                 modes: Optional[Mapping[str, float]] = None, masking: MaskingConfig | Mapping | None = None,
                 word_starts: Optional[torch.Tensor] = None, max_length: Optional[int] = None,
                 lm_segments: bool = False, use_language_ids: bool = True):
        text = config.text if isinstance(config, ModelConfig) else config
        max_length = resolve_max_length(max_length, text, self.name)
        if max_length < 5:
            raise ConfigError(f"unilm: max_length={max_length} leaves no room for two segments")
        super().__init__(specials, masking=masking, word_starts=word_starts, max_length=max_length,
                         use_language_ids=use_language_ids)
        if lm_segments and text.segment_vocab_size < 6:
            raise ConfigError(f"unilm: lm_segments=True needs 6 segment embeddings; the model has "
                              f"segment_vocab_size={text.segment_vocab_size}")
        self.mode_weights = mode_weights(modes)
        self.lm_segments = lm_segments

    def draw_mode(self) -> str:
        return MODES[int(torch.multinomial(self.mode_weights, 1))]

    def prepare(self, examples: Sequence[Any], mode: Optional[str] = None) -> dict[str, torch.Tensor]:
        """Collate documents under ``mode`` (drawn by weight when None)."""
        require_nonempty(examples, self.name)
        documents = [as_document(x, i) for i, x in enumerate(examples)]
        mode = self.draw_mode() if mode is None else mode
        if mode not in MODES:
            raise ConfigError(f"unilm: mode {mode!r} must be one of {', '.join(MODES)}")
        for i, document in enumerate(documents):
            empty = [j for j, sentence in enumerate(document) if not sentence.ids]
            if empty:  # (an empty document is no document: as_document refuses it)
                raise ExampleError(f"unilm: example {i} has an empty sentence ({empty[0]})")
            if mode in PAIRED and len(document) < 2:
                raise ExampleError(f"unilm: example {i} has 1 sentence; the {mode} LM reads two segments, "
                                   "so documents need at least two")
        s = self.specials
        first, second = LM_SEGMENTS[mode] if self.lm_segments else (0, 1)
        rows, segments, langs, sources, truncated = [], [], [], [], 0
        for document in documents:
            if mode in PAIRED:
                a, b = split_chunk(document, self.max_length - 3)
                ta, tb, cut = truncate_pair_at_random(sentence_tokens(a), sentence_tokens(b), self.max_length - 3)
                ids, segment, lang = frame_pair(ta, tb, a[0].lang, b[0].lang, s)
                segment = [first if g == 0 else second for g in segment]
                sources.append(len(ta) + 2)
            else:
                part = single_segment(document, self.max_length - 2)
                tokens, cut = truncate(sentence_tokens(part), self.max_length - 2)
                ids = [s.cls, *(t for t, _ in tokens), s.sep]
                segment = [first] * len(ids)
                lang = [part[0].lang, *(g for _, g in tokens), part[-1].lang]
                sources.append(len(ids))
            rows.append(ids)
            segments.append(segment)
            langs.append(lang)
            truncated += cut
        input_ids = pad(rows, s.pad)
        check_vocab(input_ids, s, "document")
        width = input_ids.shape[1]
        lengths, source_lengths = torch.tensor([len(r) for r in rows]), torch.tensor(sources)
        position = torch.arange(width)[None]
        attention_mask = (position < lengths[:, None]).long()
        # seq2seq predicts target tokens only; the other LMs mask anywhere in the text
        candidates = position >= source_lengths[:, None] if mode == "seq2seq" else None
        masked = self.masker(input_ids, candidates)
        batch = {"input_ids": masked.input_ids, "attention_mask": attention_mask, "labels": masked.labels,
                 "segment_ids": pad(segments, 0, width),
                 "visible": unilm_visibility(mode, lengths, source_lengths, width),
                 "mode": torch.tensor(MODES.index(mode)), "truncated": torch.tensor(truncated)}
        if self.use_language_ids and languages_known([g for row in langs for g in row], self.name):
            ids = [[language_index(s, g, f"example {i}") for g in row] for i, row in enumerate(langs)]
            batch["language_ids"] = pad(ids, 0, width)
        return batch

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        return visible_token_loss(model, encoder_inputs(model, batch, self.use_language_ids), batch)


def visible_token_loss(model: nn.Module, inputs: dict[str, torch.Tensor], batch: dict[str, torch.Tensor]) -> Loss:
    """The tied-head cross-entropy at ``batch["labels"]`` of a model run under
    ``batch["visible"]`` (a BabelModel computes its last layer at the labelled positions only)."""
    labels = batch["labels"]
    if isinstance(unwrap(model), BabelModel):
        out = model(**inputs, visible=batch["visible"], output_positions=labels.ne(IGNORE))
        loss, metrics = token_prediction_loss(model, out.last_hidden, labels, selected=True)
    else:
        out = model(**inputs, visible=batch["visible"])
        loss, metrics = token_prediction_loss(model, out.last_hidden, labels)
    metrics["truncated"] = batch["truncated"]
    return Loss(loss, metrics, batch["attention_mask"].sum())
