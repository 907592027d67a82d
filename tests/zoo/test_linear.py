"""``Linear``: the same products as ``nn.Linear`` on either CPU kernel, oneDNN only where no
gradient is recorded and no autocast is active, and ``"auto"``'s processor rule."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import profile

from babelzoo.errors import InputError
from babelzoo.zoo.layers import linear as linear_module
from babelzoo.zoo.layers.linear import Linear, cpu_gemm

onednn = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="PyTorch built without oneDNN")


def ops_run(fn) -> set[str]:
    with profile() as prof:
        fn()
    return {event.key for event in prof.key_averages()}


def reference(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    bias = None if layer.bias is None else layer.bias.double()
    return F.linear(x.double(), layer.weight.double(), bias)


@onednn
@pytest.mark.parametrize("kind", ["onednn", "aten"])
@pytest.mark.parametrize("shape,bias", [((37, 64), True), ((3, 11, 64), True), ((5, 64), False), ((0, 64), True)])
def test_both_kernels_compute_the_linear_map_in_fp32(kind, shape, bias):
    torch.manual_seed(0)
    layer = Linear(64, 48, bias=bias)
    x = torch.randn(*shape)
    with torch.no_grad(), cpu_gemm(kind):
        out = layer(x)
    assert out.shape == (*shape[:-1], 48) and out.dtype == torch.float32
    assert torch.allclose(out.double(), reference(layer, x), atol=1e-5, rtol=1e-5)


@onednn
def test_onednn_runs_only_where_chosen_and_no_gradient_is_recorded():
    layer = Linear(32, 16)
    x = torch.randn(8, 32)
    with cpu_gemm("onednn"):
        with torch.no_grad():
            assert "mkldnn::_linear_pointwise" in ops_run(lambda: layer(x))
        with torch.inference_mode():
            assert "mkldnn::_linear_pointwise" in ops_run(lambda: layer(x))
        # autograd on (trainable weights): the ATen product, which has a backward
        assert "mkldnn::_linear_pointwise" not in ops_run(lambda: layer(x))
        layer.requires_grad_(False)
        assert "mkldnn::_linear_pointwise" in ops_run(lambda: layer(x))  # frozen layer, plain input
        leaf = x.clone().requires_grad_()
        out = layer(leaf)
        out.sum().backward()
        assert torch.allclose(leaf.grad, layer.weight.sum(0).expand(8, 32))
    with torch.no_grad(), cpu_gemm("aten"):
        assert "mkldnn::_linear_pointwise" not in ops_run(lambda: layer(x))


@onednn
def test_autocast_keeps_its_dtype():
    layer = Linear(32, 16)
    with torch.no_grad(), cpu_gemm("onednn"), torch.autocast("cpu", dtype=torch.bfloat16):
        assert layer(torch.randn(4, 32)).dtype == torch.bfloat16


def test_the_auto_rule_follows_the_processor(monkeypatch):
    layer = Linear(16, 8)
    x = torch.randn(2, 16)
    for amd_avx512 in (True, False):
        monkeypatch.setattr(linear_module, "_amd_avx512", lambda value=amd_avx512: value)
        with torch.no_grad():
            chosen = "mkldnn::_linear_pointwise" in ops_run(lambda: layer(x))
        assert chosen == (amd_avx512 and torch.backends.mkldnn.is_available())
    with pytest.raises(InputError, match="unknown CPU matrix product 'blas'"):
        with cpu_gemm("blas"):
            pass
    assert linear_module._choice == "auto"


def test_is_an_nn_linear_with_the_same_state_dict():
    layer = Linear(4, 3)
    plain = nn.Linear(4, 3)
    plain.load_state_dict(layer.state_dict())
    assert isinstance(layer, nn.Linear) and list(layer.state_dict()) == ["weight", "bias"]
