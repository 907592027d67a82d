"""Real speech–text pairs from an installed package: any text spoken by espeak-ng
(``espeakng-loader`` ships libespeak-ng and its voices for ~100 languages)."""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path
from typing import Iterable, Optional

import numpy as np

from ..errors import ConfigError
from .multimodal_manifest import write_manifest


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
                raise ConfigError(f"espeak-ng has no voice for language {lang!r}")
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
