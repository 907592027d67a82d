"""Manifests, media loading with clear errors (raise or skip-and-count) and collation."""

import json

import numpy as np
import pytest
import soundfile
import torch
from PIL import Image

from babelzoo.datasets.multimodal import MultimodalDataset, collate_multimodal
from babelzoo.datasets.multimodal_manifest import MediaError, read_manifest, write_manifest
from babelzoo.datasets.multimodal_media import load_image
from babelzoo.datasets.specials import SpecialIds
from babelzoo.zoo.model_config import AudioConfig

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


def test_dataset_settings_come_from_the_model_config(image_manifest):
    from babelzoo.zoo.factory import model_config

    data = MultimodalDataset.from_manifest(image_manifest, utf8_ids, model_config("vl_dual_tiny"), on_error="skip")
    assert data[0]["pixel_values"].shape == (3, 64, 64) and data[2] is None
    with pytest.raises(ValueError, match="give the model's AudioConfig"):
        MultimodalDataset(read_manifest(write_manifest(image_manifest.parent / "a.jsonl", [
            {"audio": "x.wav", "text": "x", "lang": "en"}])), utf8_ids)


def test_the_parts_stay_importable_from_the_multimodal_module():
    import babelzoo.datasets.multimodal as multimodal
    from babelzoo.datasets import multimodal_manifest, multimodal_media

    parts = {"read_manifest": multimodal_manifest, "MediaError": multimodal_manifest, "load_image": multimodal_media,
             "SpecAugment": multimodal_media, "speech_features": multimodal_media}
    for name, module in parts.items():
        assert getattr(multimodal, name) is getattr(module, name) and name in multimodal.__all__


def test_unusable_audio_raises_naming_the_file_or_is_skipped_and_counted(tmp_path):
    rate = 16000
    soundfile.write(tmp_path / "ok.wav", (0.1 * np.ones(4000)).astype(np.float32), rate, subtype="FLOAT")
    bad = np.zeros(4000, dtype=np.float32)
    bad[100] = np.nan
    soundfile.write(tmp_path / "nan.wav", bad, rate, subtype="FLOAT")
    soundfile.write(tmp_path / "long.wav", np.zeros(rate, dtype=np.float32), rate)  # 98 frames
    (tmp_path / "missing.wav").unlink(missing_ok=True)
    rows = [{"audio": n, "text": n, "lang": "en"} for n in ("ok.wav", "nan.wav", "long.wav", "missing.wav")]
    records = read_manifest(write_manifest(tmp_path / "m.jsonl", rows))
    config = AudioConfig(max_frames=50)
    data = MultimodalDataset(records, utf8_ids, audio=config)
    assert data[0]["audio_features"].shape == (1 + (4000 - 400) // 160, 80)
    with pytest.raises(MediaError, match=r"nan.wav: audio has non-finite samples .*m.jsonl:2"):
        data[1]
    with pytest.raises(MediaError, match=r"long.wav: audio of 98 frames \(1.0 s\) is longer than "
                                         r"AudioConfig.max_frames=50.*m.jsonl:3"):
        data[2]
    with pytest.raises(MediaError, match=r"missing.wav: cannot read audio .*m.jsonl:4"):
        data[3]
    skipping = MultimodalDataset(records, utf8_ids, audio=config, on_error="skip")
    batch = collate_multimodal([skipping[i] for i in range(4)], SPECIALS)
    assert int(batch["skipped"]) == 3 and batch["audio_features"].shape[0] == 1
    assert sorted(p.rsplit("/", 1)[1] for p in skipping.skipped) == ["long.wav", "missing.wav", "nan.wav"]
