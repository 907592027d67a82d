"""Real speech–text pairs from an installed package: any text spoken by espeak-ng
(``espeakng-loader`` ships libespeak-ng and its voices for ~100 languages)."""

from __future__ import annotations

import ctypes
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Iterable, Optional

import numpy as np

from ..datasets.multimodal import MultimodalDataset
from ..datasets.multimodal_manifest import write_manifest
from ..datasets.sources import Split, register_source
from ..errors import BabelzooError, ConfigError
from ..evaluation.tasks import TASKS, Result, TaskContext, TaskSkipped
from ..evaluation.tasks.multimodal import encode_fn, languages, model_with, retrieval_results
from .emoji import HELDOUT_EMOJI, SPEECH_LANGS, RenderedEmoji, emoji_key, emoji_names, heldout_emoji


class SpeechSynthesisError(BabelzooError, RuntimeError):
    """espeak-ng could not start, or could not speak a text."""


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
                    raise SpeechSynthesisError("espeak-ng failed to initialise; reinstall espeakng-loader")
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
                raise ConfigError(f"espeak-ng has no voice for language {lang!r}")
            lib.espeak_SetSynthCallback(self._callback)
            self._chunks = []
            # position 0, POS_CHARACTER, no end, espeakCHARS_UTF8
            status = lib.espeak_Synth(data, len(data), 0, 1, 0, 1, None, None)
            lib.espeak_Synchronize()
            chunks, self._chunks = self._chunks, []
        if status != 0 or not chunks:
            raise SpeechSynthesisError(f"espeak-ng could not speak {text!r} in {lang!r} (status {status})")
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


# --- the data source and the task ---------------------------------------------------------------

@register_source
@dataclass
class EmojiSpeech(RenderedEmoji):
    """``{kind: emoji_speech, langs: [en, de]}``: emoji names spoken by espeak-ng
    (this module), synthesised once into the run's cache; the
    held-out emoji are left out unless ``split: heldout``. ``limit`` keeps the first N emoji."""

    kind: ClassVar[str] = "emoji_speech"
    modality: ClassVar[str] = "audio"
    langs: list[str] = field(default_factory=lambda: ["en"])
    limit: Optional[int] = None
    split: Split = "train"

    def render(self, folder: Path) -> None:
        held = heldout_emoji()
        names = [(c, n) for c, n in sorted(emoji_names(self.langs).items())
                 if (emoji_key(c) in held) == (self.split == "heldout")][:self.limit]
        build_speech_manifest(folder, [(n[lang], lang, emoji_key(c)) for c, n in names for lang in self.langs],
                              Espeak())


@TASKS.register
def speech_text_retrieval(encoder, context: TaskContext) -> list[Result]:
    """espeak-ng utterance ↔ CLDR name, 300 held-out emoji × 6 languages, R@1/5/10 both directions."""
    model, tokenizer = model_with(encoder, "audio", "a speech")
    langs = languages(context, SPEECH_LANGS)
    keys = heldout_emoji()
    names = {emoji_key(c): n for c, n in emoji_names(SPEECH_LANGS).items() if emoji_key(c) in keys}
    chosen = sorted(names)[:context.limit] if context.limit else sorted(names)
    items = [(names[key][lang], lang, key) for key in chosen for lang in langs]
    try:
        speaker = Espeak()
    except (ImportError, OSError, RuntimeError) as err:
        raise TaskSkipped(f"speech↔text retrieval needs espeak-ng (`pip install espeakng-loader`): {err}") from None
    with tempfile.TemporaryDirectory() as tmp:
        manifest = build_speech_manifest(Path(tmp), items, speaker)
        dataset = MultimodalDataset.from_manifest(manifest, encode_fn(tokenizer), model.config)
        examples = [dataset[i] for i in range(len(dataset))]
    protocol = {"split": f"held-out emoji ({HELDOUT_EMOJI}, seed 0)", "speech": "espeak-ng, 16 kHz",
                "features": f"{model.config.audio.num_mel_bins}-bin log-mel fbank, utterance CMVN",
                "embeddings": "unimodal projections", "similarity": "cosine", "ties": "random, in expectation"}
    return retrieval_results("speech_text_retrieval", encoder.name, "speech", model, examples,
                             tokenizer.specials, langs, protocol, context.log)
