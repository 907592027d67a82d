"""The position-wise feed-forward networks."""

import pytest
import torch

from babelzoo.zoo.layers.ffn import FeedForward
from babelzoo.zoo.layers.linear import cpu_gemm


@pytest.mark.parametrize("act", ["gelu", "gelu_tanh", "relu"])
def test_feed_forward_without_autograd_equals_the_autograd_pass(act, monkeypatch):
    """Without autograd GELU runs in place on up(x): the output is identical to the pass that
    records a graph, and equals down(σ(up(x))) written out (both on ATen's matrix product, which
    the autograd pass always takes)."""
    torch.manual_seed(0)
    ffn = FeedForward(8, 32, act).eval()
    x = torch.randn(5, 8)
    inplace = []
    real = torch.ops.aten.gelu_
    monkeypatch.setattr(torch.ops.aten, "gelu_", lambda h, **k: inplace.append(h.shape) or real(h, **k))
    with_grad = ffn(x)
    assert with_grad.requires_grad and not inplace
    with torch.no_grad(), cpu_gemm("aten"):
        without = ffn(x)
    assert torch.equal(without, with_grad.detach())
    assert inplace == ([(5, 32)] if act.startswith("gelu") else [])
    sigma = {"gelu": torch.nn.GELU(), "gelu_tanh": torch.nn.GELU(approximate="tanh"), "relu": torch.relu}[act]
    torch.testing.assert_close(without, ffn.down(sigma(ffn.up(x))).detach(), rtol=0, atol=0)
