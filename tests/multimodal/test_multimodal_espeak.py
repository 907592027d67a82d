"""Real speech–text pairs: espeak-ng speaks text in many languages into a manifest."""

import numpy as np
import pytest

from babelzoo.datasets.multimodal import MultimodalDataset
from babelzoo.datasets.multimodal_manifest import read_manifest
from babelzoo.offline.espeak import Espeak, build_speech_manifest
from babelzoo.zoo.model_config import AudioConfig


def utf8_ids(text, lang):
    return [5 + b for b in text.encode("utf-8")]


def test_espeak_speech(tmp_path):
    pytest.importorskip("espeakng_loader")
    speaker = Espeak()
    hello = speaker.synthesize("hello world", "en")
    longer = speaker.synthesize("hello world, this is a much longer sentence to say", "en")
    assert hello.dtype == np.int16 and 0.4 < len(hello) / speaker.sample_rate < 3.0
    assert len(longer) > 2 * len(hello) and np.abs(hello).max() > 3000
    with pytest.raises(ValueError, match="no voice for language 'xx-nowhere'"):
        speaker.synthesize("x", "xx-nowhere")
    manifest = build_speech_manifest(tmp_path, [("guten Tag", "de", "g1"), ("你好", "zh", None)], speaker)
    data = MultimodalDataset(read_manifest(manifest), utf8_ids, audio=AudioConfig())
    example = data[1]
    assert example["audio_features"].shape[1] == 80 and example["audio_features"].shape[0] > 30
