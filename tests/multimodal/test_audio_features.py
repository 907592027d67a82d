"""Speech features in the data pipeline (fbank, CMVN, SpecAugment, resampling) and the model's
convolutional subsampler."""

import math

import numpy as np
import pytest
import soundfile
import torch

from babelzoo.datasets.multimodal_media import (SpecAugment, fbank_features, read_audio, speech_features,
                                                utterance_cmvn)
from babelzoo.zoo.audio import ConvSubsampler
from babelzoo.zoo.model_config import AudioConfig


def sine(freq=440.0, rate=16000, seconds=0.5, amplitude=0.3):
    t = np.arange(int(rate * seconds)) / rate
    return (amplitude * np.sin(2 * math.pi * freq * t)).astype(np.float32)


def test_pipeline_features_equal_torchaudio_fbank_plus_cmvn(tmp_path):
    from torchaudio.compliance import kaldi

    # a chirp from 200 Hz to 3 kHz plus a little seeded noise: every mel bin varies over time
    t = np.arange(8000) / 16000
    noise = np.random.default_rng(0).normal(0.0, 0.01, t.shape)
    wave = (0.3 * np.sin(2 * math.pi * (200 * t + 2800 * t ** 2)) + noise).astype(np.float32)
    path = tmp_path / "chirp.wav"
    soundfile.write(path, wave, 16000, subtype="FLOAT")
    ours = speech_features(path, AudioConfig())
    raw = kaldi.fbank(torch.from_numpy(wave)[None] * 32768, num_mel_bins=80, dither=0.0, sample_frequency=16000)
    x = raw.double().numpy()
    mean = x.mean(axis=0)
    std = np.sqrt((x ** 2).mean(axis=0) - mean ** 2)
    np.testing.assert_allclose(ours.numpy(), (x - mean) / std, atol=1e-4, rtol=1e-4)
    assert ours.shape == (1 + (8000 - 400) // 160, 80)  # Kaldi framing: 25 ms windows every 10 ms


def test_a_pure_tone_peaks_in_the_mel_bin_around_its_frequency():
    feats = fbank_features(torch.from_numpy(sine(440.0)), 16000, 80)
    mel = lambda f: 1127.0 * math.log(1.0 + f / 700.0)  # noqa: E731  (Kaldi's mel scale)
    low, high = mel(20.0), mel(8000.0)
    centres = [low + (i + 1) * (high - low) / 81 for i in range(80)]
    expected = min(range(80), key=lambda i: abs(centres[i] - mel(440.0)))
    assert int(feats.mean(dim=0).argmax()) == expected


def test_cmvn_gives_zero_mean_unit_variance_per_bin():
    feats = torch.randn(200, 80) * 3 + 7
    out = utterance_cmvn(feats)
    torch.testing.assert_close(out.mean(dim=0), torch.zeros(80), atol=1e-4, rtol=0)
    torch.testing.assert_close(out.std(dim=0, unbiased=False), torch.ones(80), atol=1e-4, rtol=0)


def test_resampling_and_channel_mixing(tmp_path):
    import torchaudio

    wave = sine(rate=8000)
    path = tmp_path / "stereo8k.wav"
    soundfile.write(path, np.stack([wave, 0.5 * wave], axis=1), 8000, subtype="FLOAT")
    out = read_audio(path, 16000)
    expected = torchaudio.functional.resample(torch.from_numpy(0.75 * wave), 8000, 16000)
    assert out.shape == (8000,)
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=1e-5)


def test_spec_augment_masks_whole_bands_within_limits():
    augment = SpecAugment(freq_masks=2, freq_width=10, time_masks=2, time_width=20, value=0.0)
    feats = torch.randn(300, 80) + 5.0  # never 0 by chance
    g = torch.Generator().manual_seed(1)
    masked_bins, masked_frames = [], []
    for _ in range(300):
        out = augment(feats, generator=g)
        zero = out == 0
        bins = zero.all(dim=0)
        frames = zero.all(dim=1)
        # every zero lies in a masked bin or a masked frame: masks are whole bands
        assert bool((zero == (bins[None, :] | frames[:, None])).all())
        assert int(bins.sum()) <= 20 and int(frames.sum()) <= 40
        masked_bins.append(int(bins.sum()))
        masked_frames.append(int(frames.sum()))
    # two widths ~ U{0..10}: 10 on average, a little less where the bands overlap
    assert 8.0 < np.mean(masked_bins) <= 10.5
    assert 16.0 < np.mean(masked_frames) <= 20.5
    a = augment(feats, generator=torch.Generator().manual_seed(5))
    b = augment(feats, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b)


def test_subsampler_lengths_follow_the_convolution_formula():
    config = AudioConfig(conv_channels=32, conv_kernel=5, conv_stride=2, conv_layers=2, max_frames=400)
    sub = ConvSubsampler(config, hidden_size=16)
    # (100 + 4 - 5) // 2 + 1 = 50, then (50 + 4 - 5) // 2 + 1 = 25; and 61 → 31 → 16
    assert sub.output_lengths(torch.tensor([100, 61])).tolist() == [25, 16]
    tokens, mask = sub(torch.randn(2, 100, 80), torch.tensor([[1] * 100, [1] * 61 + [0] * 39]))
    assert tokens.shape == (2, 25, 16)
    assert mask.sum(dim=1).tolist() == [25, 16]


def test_subsampler_padding_does_not_change_real_tokens():
    sub = ConvSubsampler(AudioConfig(conv_channels=32, conv_kernel=3, max_frames=400), hidden_size=16)
    short = torch.randn(1, 61, 80)
    alone, alone_mask = sub(short)
    padded = torch.cat([short, torch.randn(1, 39, 80)], dim=1)
    batched, mask = sub(padded, torch.tensor([[1] * 61 + [0] * 39]))
    n = int(alone_mask.sum())
    assert int(mask.sum()) == n
    torch.testing.assert_close(batched[:, :n], alone[:, :n])


def test_subsampler_rejects_bad_shapes():
    sub = ConvSubsampler(AudioConfig(conv_channels=32, max_frames=100), hidden_size=16)
    with pytest.raises(ValueError, match=r"\[batch, frames, 80\]"):
        sub(torch.randn(1, 50, 40))
    with pytest.raises(ValueError, match="max_frames=100"):
        sub(torch.randn(1, 101, 80))
