"""Image towers: position interpolation (exact at the native grid, timm parity elsewhere), the
ViLT patch embedding at other image sizes, and the timm backbone adapter."""

import pytest
import torch
import torch.nn.functional as F

from babelzoo.zoo.model_config import VisionConfig
from babelzoo.zoo.vision import PatchEmbedding, TimmBackbone, image_normalization, interpolate_positions


def test_interpolation_is_exact_at_the_native_grid():
    table = torch.randn(16, 8)
    assert torch.equal(interpolate_positions(table, (4, 4), (4, 4)), table)


@pytest.mark.parametrize("new_grid", [(6, 6), (3, 5), (8, 2)])
def test_interpolation_shapes_and_parity_with_timm(new_grid):
    from timm.layers import resample_abs_pos_embed

    table = torch.randn(16, 8)
    ours = interpolate_positions(table, (4, 4), new_grid)
    assert ours.shape == (new_grid[0] * new_grid[1], 8)
    reference = resample_abs_pos_embed(table[None], list(new_grid), [4, 4], num_prefix_tokens=0)[0]
    torch.testing.assert_close(ours, reference)


def test_interpolation_keeps_a_constant_table_constant():
    table = torch.full((16, 3), 0.25)
    torch.testing.assert_close(interpolate_positions(table, (4, 4), (7, 5)), torch.full((35, 3), 0.25))


def test_interpolation_rejects_a_table_of_the_wrong_size():
    with pytest.raises(ValueError, match="expected 4x4=16"):
        interpolate_positions(torch.randn(15, 8), (4, 4), (5, 5))


def test_patch_embedding_at_native_size_is_conv_plus_positions():
    embed = PatchEmbedding(VisionConfig(image_size=32, patch_size=8), hidden_size=12)
    pixels = torch.randn(2, 3, 32, 32)
    expected = F.conv2d(pixels, embed.proj.weight, embed.proj.bias, stride=8).flatten(2).transpose(1, 2)
    torch.testing.assert_close(embed(pixels), expected + embed.position)


def test_patch_embedding_other_sizes_and_errors():
    embed = PatchEmbedding(VisionConfig(image_size=32, patch_size=8), hidden_size=12)
    assert embed(torch.randn(1, 3, 48, 40)).shape == (1, 6 * 5, 12)
    with pytest.raises(ValueError, match="patch_size=8"):
        embed(torch.randn(1, 3, 30, 32))
    with pytest.raises(ValueError, match=r"\[batch, 3, height, width\]"):
        embed(torch.randn(1, 1, 32, 32))


def test_timm_cnn_backbone_tokens_start_with_its_pooled_feature():
    tower = TimmBackbone(VisionConfig(backbone="test_resnet", image_size=64), hidden_size=16).eval()
    pixels = torch.randn(2, 3, 64, 64)
    tokens = tower(pixels)
    feature_map = tower.model.forward_features(pixels)  # [B, C, h, w]
    cells = feature_map.shape[-2] * feature_map.shape[-1]
    assert tokens.shape == (2, 1 + cells, 16)
    pooled = feature_map.mean(dim=(2, 3))  # a ResNet's pre-logits: global average pooling
    torch.testing.assert_close(tokens[:, 0], tower.project(pooled))
    torch.testing.assert_close(tokens[:, 1], tower.project(feature_map[:, :, 0, 0]))


def test_timm_vit_backbone_and_pooled_features():
    tokens = TimmBackbone(VisionConfig(backbone="test_vit", image_size=64), hidden_size=16)(torch.randn(2, 3, 64, 64))
    assert tokens.shape == (2, 1 + 1 + 16, 16)  # pooled, [class], 4x4 patches
    pooled = TimmBackbone(VisionConfig(backbone="test_vit", features="pooled"), hidden_size=16)
    assert pooled(torch.randn(2, 3, 64, 64)).shape == (2, 1, 16)


def test_unknown_timm_model_suggests_close_names():
    with pytest.raises(ValueError, match="did you mean 'resnet18'"):
        TimmBackbone(VisionConfig(backbone="resnet18x"), hidden_size=8)


def test_image_normalization_follows_the_backbone():
    assert image_normalization(VisionConfig()) == ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
    mean, std = image_normalization(VisionConfig(backbone="resnet50"))
    assert mean == pytest.approx((0.485, 0.456, 0.406)) and std == pytest.approx((0.229, 0.224, 0.225))
