"""Images of every bit depth come out as the picture they hold (not all white or all black), and
a WAV cut short is an error, not fewer samples."""

import numpy as np
import pytest
import torch

from babelzoo.datasets.multimodal_manifest import MediaError
from babelzoo.datasets.multimodal_media import load_image, read_audio

IDENTITY = dict(size=4, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))


def ramp(height=4, width=4) -> np.ndarray:
    """Values 0, 1/15, ..., 1 across the image."""
    return np.arange(height * width, dtype=np.float64).reshape(height, width) / (height * width - 1)


def grey(tensor: torch.Tensor) -> np.ndarray:
    assert torch.equal(tensor[0], tensor[1]) and torch.equal(tensor[1], tensor[2])
    return tensor[0].numpy()


@pytest.mark.parametrize("mode, values", [
    ("I;16", lambda r: (r * 65535).astype(np.uint16)),
    ("F", lambda r: r.astype(np.float32)),
    ("I", lambda r: (r * 65535).astype(np.int32)),
])
def test_wide_grey_images_keep_their_contrast(tmp_path, mode, values):
    from PIL import Image

    path = tmp_path / f"scan.{'png' if mode == 'I;16' else 'tif'}"
    Image.fromarray(values(ramp())).save(path)
    with Image.open(path) as saved:
        assert saved.mode.startswith(mode[0])  # stored at its own depth
    pixels = grey(load_image(path, **IDENTITY))
    np.testing.assert_allclose(pixels, np.round(ramp() * 255) / 255, atol=1 / 255 + 1e-6)
    assert pixels.min() == 0.0 and pixels.max() == 1.0


def test_a_float_image_of_unknown_range_is_an_error(tmp_path):
    from PIL import Image

    path = tmp_path / "depth.tif"
    Image.fromarray((ramp() * 1000 - 3).astype(np.float32)).save(path)
    with pytest.raises(MediaError, match=rf"{path}: mode F image with values in \[-3, 997\]: no known range"):
        load_image(path, **IDENTITY)


def test_a_truncated_wav_is_an_error(tmp_path):
    soundfile = pytest.importorskip("soundfile")
    path = tmp_path / "speech.wav"
    soundfile.write(str(path), np.zeros(16000, dtype=np.float32), 16000, subtype="PCM_16")
    assert read_audio(path, 16000).numel() == 16000
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 10000])  # an interrupted copy
    with pytest.raises(MediaError, match=rf"{path}: truncated WAV: the header promises 32000 bytes of samples, "
                                         r"the file holds 22000"):
        read_audio(path, 16000)
