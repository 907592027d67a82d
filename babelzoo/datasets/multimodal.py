"""Image–text and speech–text examples: a dataset over manifest records and the collation of
its examples into batches. The parts live in their own modules and are re-exported here:

- :mod:`.multimodal_manifest`: JSONL manifests (:func:`read_manifest`), :class:`MediaError`;
- :mod:`.multimodal_media`: image loading, fbank / CMVN / SpecAugment speech features.

Emoji images and espeak-ng speech made from installed packages are offline sources
(:mod:`babelzoo.offline.emoji`, :mod:`babelzoo.offline.espeak`).

Error policy. An unreadable image or audio file raises :class:`MediaError` naming the file and
its manifest line (also from inside a DataLoader worker). With ``on_error="skip"`` the example is
left out of its batch, logged once per file, kept in ``dataset.skipped`` and counted in
``batch["skipped"]``; a batch whose every example was unreadable is an error.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Callable, Optional, Protocol, Sequence

import torch

from ..errors import ConfigError
from .multimodal_manifest import KINDS, MediaError, MediaRecord, read_manifest, write_manifest
from .multimodal_media import (
    AudioSettings,
    SpecAugment,
    VisionSettings,
    fbank_features,
    image_normalization,
    load_image,
    read_audio,
    speech_features,
    utterance_cmvn,
)
from .specials import SpecialIds



class MediaConfig(Protocol):
    """What the data layer reads of a model's config (the zoo's ``ModelConfig`` is one; this layer
    reads it and never imports the zoo): its towers' settings, each None for a model without it."""

    vision: Optional[VisionSettings]
    audio: Optional[AudioSettings]

__all__ = ["KINDS", "ON_ERROR", "MediaError", "MediaRecord", "MultimodalDataset", "SpecAugment", "collate_multimodal",
           "fbank_features", "group_key", "load_image", "read_audio", "read_manifest", "speech_features",
           "utterance_cmvn", "write_manifest"]

logger = logging.getLogger(__name__)

ON_ERROR = ("raise", "skip")


class MultimodalDataset(torch.utils.data.Dataset):
    """Map-style dataset of manifest records → ``{"input_ids", "pixel_values" | "audio_features",
    "lang", "group", "source"}``.

    ``encode(text, lang)`` gives token ids without special tokens (e.g.
    ``lambda text, lang: tokenizer.encode(text, lang, add_special_tokens=False)``); collation
    frames them as ``[CLS] X [SEP]``.
    ``on_error="raise"`` raises :class:`MediaError` for an unreadable file; ``"skip"`` returns
    None for it (collation leaves it out and counts it) and logs the file once.
    """

    def __init__(self, records: Sequence[MediaRecord], encode: Callable[[str, Optional[str]], list[int]],
                 image_size: Optional[int] = None, mean: Sequence[float] = (0.5, 0.5, 0.5),
                 std: Sequence[float] = (0.5, 0.5, 0.5), audio: Optional[AudioSettings] = None,
                 on_error: str = "raise"):
        if on_error not in ON_ERROR:
            raise ConfigError(f"on_error={on_error!r} must be one of {', '.join(ON_ERROR)}")
        kinds = {r.kind for r in records}
        if "image" in kinds and image_size is None:
            raise ConfigError("the manifest has images: give image_size (and the model's mean/std)")
        if "audio" in kinds and audio is None:
            raise ConfigError("the manifest has audio: give the model's AudioConfig as audio=")
        self.records, self.encode = list(records), encode
        self.image_size, self.mean, self.std, self.audio = image_size, tuple(mean), tuple(std), audio
        self.on_error = on_error
        self.skipped: set[str] = set()

    @classmethod
    def from_manifest(cls, path: str | Path, encode, config: MediaConfig, **kwargs) -> "MultimodalDataset":
        """Image size, normalisation and speech settings taken from a model's config."""
        return cls.from_records(read_manifest(path), encode, config, **kwargs)

    @classmethod
    def from_records(cls, records: Sequence[MediaRecord], encode, config: MediaConfig,
                     **kwargs) -> "MultimodalDataset":
        """Like :meth:`from_manifest`, from records already read."""
        if config.vision is not None:
            mean, std = image_normalization(config.vision)
            kwargs = {"image_size": config.vision.image_size, "mean": mean, "std": std, **kwargs}
        if config.audio is not None:
            kwargs = {"audio": config.audio, **kwargs}
        return cls(records, encode, **kwargs)

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> Optional[dict]:
        record = self.records[index]
        try:
            if record.kind == "image":
                media = {"pixel_values": load_image(record.path, self.image_size, self.mean, self.std)}
            else:
                media = {"audio_features": speech_features(record.path, self.audio)}
        except MediaError as err:
            if self.on_error == "raise":
                raise MediaError(f"{err} (listed at {record.where})") from None
            if str(record.path) not in self.skipped:
                logger.warning("skipping %s (listed at %s): %s", record.path, record.where, err)
                self.skipped.add(str(record.path))
            return None
        ids = [int(i) for i in self.encode(record.text, record.lang)]
        return {"input_ids": ids, **media, "lang": record.lang, "group": record.group, "source": str(record.path)}


def group_key(group: Optional[str], fallback: str) -> int:
    """A stable int64 for a group name, equal on every rank and process (for gathered negatives)."""
    digest = hashlib.blake2b((group if group is not None else "\0" + fallback).encode("utf-8"), digest_size=8)
    return int.from_bytes(digest.digest(), "little", signed=True)


def collate_multimodal(examples: Sequence[Optional[dict]], specials: SpecialIds, max_length: int = 128,
                       spec_augment: Optional[SpecAugment] = None) -> dict[str, torch.Tensor]:
    """Frame, pad and stack examples into ``input_ids``/``attention_mask`` [B, L] (``[CLS] X
    [SEP]``, cut to ``max_length``), ``pixel_values`` [B, C, H, W] or ``audio_features``
    [B, T, F] + ``audio_mask`` [B, T], ``group_ids`` [B], ``language_ids`` [B, L] when every
    example's language has an id in ``specials.languages``, and the counts ``skipped`` (examples
    left out as unreadable) and ``truncated`` (tokens cut). SpecAugment, when given, draws from
    the torch RNG (which the trainer seeds per batch)."""
    if max_length < 3:
        raise ConfigError(f"max_length={max_length} leaves no room for tokens")
    kept = [e for e in examples if e is not None]
    if not kept:
        raise MediaError(f"all {len(examples)} examples of a batch were unreadable; see the skipped files logged")
    rows, truncated = [], 0
    for e in kept:
        content = list(e["input_ids"])
        truncated += max(0, len(content) - (max_length - 2))
        rows.append([specials.cls, *content[: max_length - 2], specials.sep])
    ids = torch.full((len(rows), max(len(r) for r in rows)), specials.pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.as_tensor(row, dtype=torch.long)
        mask[i, : len(row)] = 1
    batch = {"input_ids": ids, "attention_mask": mask,
             "group_ids": torch.tensor([group_key(e.get("group"), e.get("source", str(i)))
                                        for i, e in enumerate(kept)], dtype=torch.long),
             "skipped": torch.tensor(len(examples) - len(kept)), "truncated": torch.tensor(truncated)}
    langs = [e.get("lang") for e in kept]
    if all(lang in specials.languages for lang in langs):
        batch["language_ids"] = torch.tensor([specials.languages[lang] for lang in langs])[:, None] * mask
    kinds = {"pixel_values" in e for e in kept}
    if len(kinds) != 1:
        raise MediaError("a batch mixes image and audio examples; use one dataset per modality")
    if kinds == {True}:
        batch["pixel_values"] = torch.stack([e["pixel_values"] for e in kept])
        return batch
    feats = [e["audio_features"] for e in kept]
    if spec_augment is not None:
        feats = [spec_augment(f) for f in feats]
    frames = max(f.shape[0] for f in feats)
    audio = feats[0].new_zeros(len(feats), frames, feats[0].shape[1])
    audio_mask = torch.zeros(len(feats), frames, dtype=torch.long)
    for i, f in enumerate(feats):
        audio[i, : f.shape[0]] = f
        audio_mask[i, : f.shape[0]] = 1
    batch.update(audio_features=audio, audio_mask=audio_mask)
    return batch
