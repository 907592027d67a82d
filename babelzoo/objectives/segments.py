"""Long documents read as consecutive segments with a memory, the training of Transformer-XL
(Dai et al. 2019, "Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context",
§3.2), shared by :mod:`~babelzoo.objectives.segment_mlm` and
:mod:`~babelzoo.objectives.segment_clm`.

A document becomes one token stream ``[CLS] s_1 [SEP] s_2 [SEP] … s_n [SEP]``, cut into
segments of ``segment_length`` (the last one right-padded); a batch is [B, S, L] (documents,
segments, positions), shorter documents padded with empty segments. The segments are encoded in
order, each after the memory the previous ones left (:func:`babelzoo.zoo.families.transformer_xl.model.encode_segment`),
so the loss of every segment back-propagates through its own segment only: the memory is
stop-gradient, the paper's truncation of the gradient at segment boundaries. ``mem_len=0``
encodes each segment alone through the model's ordinary forward, the same objective without
memory at equal tokens. A document longer than ``max_segments`` segments is read from a random
start (drawn anew each time it is prepared); the tokens left out are the ``truncated`` metric.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch
from torch import nn

from ..datasets.specials import SpecialIds
from ..errors import InputError
from ..zoo.config import ConfigError, EncoderConfig
from ..zoo.model_config import ModelConfig
from ..zoo.family import family_of
from ..zoo.families.transformer_xl.model import encode_segment
from .base import Objective
from .batching import check_vocab, encoder_inputs, language_index, languages_known, unwrap
from .examples import as_document, require_nonempty


def document_stream(sentences: Sequence[Any], specials: SpecialIds) -> list[int]:
    """``[CLS] s_1 [SEP] s_2 [SEP] …``: a document's sentences as one stream of ids."""
    stream = [specials.cls]
    for sentence in sentences:
        stream += [*sentence.ids, specials.sep]
    return stream


def cut_segments(streams: Sequence[Sequence[int]], segment_length: int, pad: int
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Streams cut into [B, S, L] ids and padding mask (1 = real), S the most segments of a
    stream; each stream's tail and the segments after its end are padding."""
    segments = max(1, max(-(-len(s) // segment_length) for s in streams))
    ids = torch.full((len(streams), segments * segment_length), pad, dtype=torch.long)
    for row, stream in enumerate(streams):
        if stream:
            ids[row, :len(stream)] = torch.as_tensor(stream, dtype=torch.long)
    lengths = torch.tensor([len(s) for s in streams])[:, None]
    mask = (torch.arange(ids.shape[1])[None] < lengths).long()
    shape = (len(streams), segments, segment_length)
    return ids.view(shape), mask.view(shape)


class SegmentObjective(Objective):
    """Common ground of the segment objectives: reading documents into windows of at most
    ``max_segments · segment_length`` stream tokens, and encoding a [B, S, L] batch segment by
    segment with ``mem_len`` positions of memory (None: the model config's ``mem_len``, 0 for
    a model without a memory)."""

    consumes = "document"

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *, segment_length: int = 64,
                 mem_len: Optional[int] = None, max_segments: int = 8, use_language_ids: bool = True):
        super().__init__()
        text = config.text if isinstance(config, ModelConfig) else config
        recurrent = family_of(text).segment_memory
        name = type(self).__name__
        if segment_length < 2:
            raise ConfigError(f"{name}: segment_length={segment_length} must be at least 2")
        if max_segments < 1:
            raise ConfigError(f"{name}: max_segments={max_segments} must be positive")
        mem_len = (text.mem_len if recurrent else 0) if mem_len is None else mem_len
        if mem_len < 0:
            raise ConfigError(f"{name}: mem_len={mem_len} must be zero or positive")
        if mem_len > 0 and not recurrent:
            raise ConfigError(f"{name}: mem_len={mem_len} needs a model with a segment memory (family "
                              f"'transformer_xl'); this model's family is {text.family!r}: use mem_len=0")
        self.specials = specials
        self.segment_length = segment_length
        self.mem_len = mem_len
        self.max_segments = max_segments
        self.use_language_ids = use_language_ids

    def read(self, examples: Sequence[Any], budget: int) -> tuple[list[list[int]], list, int]:
        """(streams of at most ``budget`` ids, each document's language, tokens cut)."""
        require_nonempty(examples, self.name)
        streams, langs, truncated = [], [], 0
        for i, example in enumerate(examples):
            document = as_document(example, i)
            stream = document_stream(document, self.specials)
            if len(stream) > budget:
                start = int(torch.randint(len(stream) - budget + 1, (1,)))
                truncated += len(stream) - budget
                stream = stream[start:start + budget]
            streams.append(stream)
            langs.append(document[0].lang)
        return streams, langs, truncated

    def cut(self, streams: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """:func:`cut_segments` with this objective's segment length, the ids checked."""
        ids, mask = cut_segments(streams, self.segment_length, self.specials.pad)
        check_vocab(ids.flatten(1), self.specials, "document")
        return ids, mask

    def finish(self, batch: dict[str, torch.Tensor], langs: list, truncated: int) -> dict[str, torch.Tensor]:
        """Add language ids (the document's language, on its real tokens) and the count of cut tokens."""
        batch["truncated"] = torch.tensor(truncated)
        if self.use_language_ids and languages_known(langs, self.name):
            lang = torch.tensor([language_index(self.specials, g, f"example {i}") for i, g in enumerate(langs)])
            batch["language_ids"] = lang[:, None, None] * batch["attention_mask"]
        return batch

    def encode(self, model: nn.Module, batch: dict[str, torch.Tensor], causal: bool) -> list[torch.Tensor]:
        """The last layer's states [B, L, H] of every segment, in order, the memory carried."""
        if self.mem_len > 0 and unwrap(model) is not model:
            raise InputError(f"{self.name}: with a memory (mem_len={self.mem_len}) the model runs segment by segment "
                             "through babelzoo.zoo.families.transformer_xl.model.encode_segment, which a (Distributed)DataParallel "
                             "wrapper does not see; train on one process or use mem_len=0")
        hidden, memory = [], None
        for s in range(batch["input_ids"].shape[1]):
            segment = {key: batch[key][:, s] for key in ("input_ids", "attention_mask", "language_ids") if key in batch}
            inputs = encoder_inputs(model, segment, self.use_language_ids)
            if self.mem_len == 0:
                hidden.append(model(**inputs, causal=causal).last_hidden)
                continue
            out = encode_segment(model, **inputs, memory=memory, mem_len=self.mem_len, causal=causal)
            hidden.append(out.last_hidden)
            memory = out.memory
        return hidden
