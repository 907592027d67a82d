"""Media files → tensors: images for the vision tower, and the speech features of the data
pipeline (not the model): 80-bin log-mel filterbanks (Kaldi's ``fbank`` through
``torchaudio.compliance.kaldi``), utterance mean/variance normalisation, and SpecAugment
(Park et al. 2019). An unreadable or unusable file raises :class:`MediaError` naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Protocol, Sequence

import numpy as np
import torch

from .multimodal_manifest import MediaError



class VisionSettings(Protocol):
    """What the data layer reads of a model's image tower config (the zoo's ``VisionConfig``;
    this layer reads it and never imports the zoo)."""

    backbone: str
    num_channels: int
    image_size: int


class AudioSettings(Protocol):
    """What the data layer reads of a model's speech tower config (the zoo's ``AudioConfig``)."""

    sample_rate: int
    num_mel_bins: int
    max_frames: int

# ViLT and CLIP-style patch models see images scaled to [-1, 1].
PATCH_MEAN = (0.5, 0.5, 0.5)
PATCH_STD = (0.5, 0.5, 0.5)


def image_normalization(config: VisionSettings) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The (mean, std) per channel that a vision tower expects pixels to be normalised with:
    timm's pretrained statistics for a timm backbone, [-1, 1] scaling for raw patches."""
    if config.backbone == "patch":
        return PATCH_MEAN[: config.num_channels], PATCH_STD[: config.num_channels]
    import timm

    cfg = timm.get_pretrained_cfg(config.backbone)
    if cfg is None:
        return PATCH_MEAN, PATCH_STD
    return tuple(cfg.mean), tuple(cfg.std)

KALDI_SCALE = 32768.0  # Kaldi computes fbank on 16-bit sample values


# PIL modes that convert("RGB") maps correctly (8 bits per channel, palettes, other colour spaces)
EIGHT_BIT_MODES = frozenset({"1", "L", "P", "PA", "LA", "La", "RGB", "RGBA", "RGBa", "RGBX", "CMYK", "YCbCr",
                             "LAB", "HSV"})
WIDE_MODES = frozenset({"I;16", "I;16L", "I;16B", "I;16N", "I", "F"})  # one wide grey channel


def _wide_to_grey(image, path):
    """A 16-bit, 32-bit integer or float grey image as 8-bit grey, scaled by the range its mode
    implies (``convert("RGB")`` would clip it: a 16-bit scan comes out all white, a float one in
    [0, 1] all black). A range the mode does not imply is an error, not a guess."""
    from PIL import Image

    values = np.asarray(image, dtype=np.float64)
    if not np.isfinite(values).all():
        raise MediaError(f"{path}: image has non-finite pixel values (mode {image.mode})")
    low, high = (float(values.min()), float(values.max())) if values.size else (0.0, 0.0)
    if image.mode.startswith("I;16"):
        scale = 65535.0
    elif image.mode == "F" and low >= 0.0 and high <= 1.0:
        scale = 1.0
    elif low >= 0.0 and high <= 255.0:
        scale = 255.0
    elif image.mode == "I" and low >= 0.0 and high <= 65535.0:
        scale = 65535.0
    else:
        raise MediaError(f"{path}: mode {image.mode} image with values in [{low:g}, {high:g}]: no known range "
                         f"to map to 8 bits (expected [0, 1] floats or 8/16-bit integers)")
    return Image.fromarray(np.round(values / scale * 255.0).astype(np.uint8), mode="L")


def load_image(path: str | Path, size: int, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """An RGB ``[3, size, size]`` float tensor, normalised per channel. Transparency is composited
    on white (emoji and icons are drawn on transparent canvases); 16-bit, 32-bit and float grey
    images are scaled to 8 bits by their range, other modes are an error."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            image.load()
            if image.mode in WIDE_MODES:
                image = _wide_to_grey(image, path)
            elif image.mode not in EIGHT_BIT_MODES:
                raise MediaError(f"{path}: image mode {image.mode!r} is not supported; save it as 8-bit RGB, "
                                 f"grey or 16-bit grey")
            if image.mode in ("RGBA", "LA", "P", "PA", "La", "RGBa"):
                image = image.convert("RGBA")
                canvas = Image.new("RGBA", image.size, (255, 255, 255, 255))
                image = Image.alpha_composite(canvas, image)
            image = image.convert("RGB").resize((size, size), Image.Resampling.BICUBIC)
    except MediaError:
        raise
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
        raise MediaError(f"{path}: cannot read image ({type(err).__name__}: {err})") from None
    pixels = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0).permute(2, 0, 1)
    return (pixels - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]


# --- speech ------------------------------------------------------------------------------------

def read_audio(path: str | Path, sample_rate: int) -> torch.Tensor:
    """Mono float waveform in [-1, 1] at ``sample_rate`` (read with soundfile, channels averaged,
    resampled with torchaudio's windowed-sinc resampler)."""
    import soundfile

    _check_wav_length(Path(path))
    try:
        data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except (RuntimeError, OSError, ValueError, TypeError) as err:
        raise MediaError(f"{path}: cannot read audio ({type(err).__name__}: {err})") from None
    if not np.isfinite(data).all():
        # A float WAV can store NaN or inf; fbank would turn them into NaN features and a NaN loss.
        raise MediaError(f"{path}: audio has non-finite samples (NaN or inf)")
    waveform = torch.from_numpy(data.mean(axis=1))
    if rate != sample_rate:
        import torchaudio

        waveform = torchaudio.functional.resample(waveform, rate, sample_rate)
    return waveform


def _check_wav_length(path: Path) -> None:
    """A RIFF/WAVE file whose ``data`` chunk promises more bytes than the file holds is cut short
    (an interrupted copy): libsndfile would read what is there without a word."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(12)
            if len(header) < 12 or header[:4] != b"RIFF" or header[8:12] != b"WAVE":
                return
            size = path.stat().st_size
            offset = 12
            while offset + 8 <= size:
                handle.seek(offset)
                chunk = handle.read(8)
                name, length = chunk[:4], int.from_bytes(chunk[4:8], "little")
                if name == b"data":
                    held = size - offset - 8
                    if length not in (0, 0xFFFFFFFF) and length > held:  # 0 / all-ones: a streamed file
                        raise MediaError(f"{path}: truncated WAV: the header promises {length} bytes of samples, "
                                         f"the file holds {held}")
                    return
                offset += 8 + length + (length & 1)
    except OSError as err:
        raise MediaError(f"{path}: cannot read audio ({err.strerror})") from None


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


def speech_features(path: str | Path, config: AudioSettings, cmvn: bool = True) -> torch.Tensor:
    """File → ``[frames, num_mel_bins]`` normalised fbank features for a model's audio config.

    An utterance shorter than one frame or longer than ``config.max_frames`` is a
    :class:`MediaError` naming the file here, in the data pipeline, rather than a shape error
    inside the model."""
    waveform = read_audio(path, config.sample_rate)
    if waveform.numel() < config.sample_rate * 25 // 1000:
        raise MediaError(f"{path}: audio is shorter than one 25 ms frame ({waveform.numel()} samples)")
    features = fbank_features(waveform, config.sample_rate, config.num_mel_bins)
    if features.shape[0] > config.max_frames:
        raise MediaError(f"{path}: audio of {features.shape[0]} frames ({waveform.numel() / config.sample_rate:.1f} s)"
                         f" is longer than AudioConfig.max_frames={config.max_frames}; cut it or raise max_frames")
    return utterance_cmvn(features) if cmvn else features
