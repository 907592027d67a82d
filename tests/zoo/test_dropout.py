"""babelzoo's CPU dropout: the Bernoulli statistics, the formula, gradients, reproducibility,
and attention dropout through the explicit softmax."""

import math

import pytest
import torch
import torch.nn.functional as F

from babelzoo.zoo.layers import attend
from babelzoo.zoo.layers.dropout import Dropout, dropout, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.5, 0.03])
def test_keep_mask_is_bernoulli_with_the_right_rate_and_independent_neighbours(p):
    torch.manual_seed(0)
    n = 2_000_001  # odd: the last int64 word is only half used
    keep = keep_mask((n,), p).double()
    sigma = math.sqrt(p * (1 - p) / n)
    assert abs(float(keep.mean()) - (1 - p)) < 5 * sigma
    # Adjacent elements come from the two halves of one 64-bit draw, or from consecutive draws.
    both = float((keep[:-1] * keep[1:]).mean())
    assert abs(both - (1 - p) ** 2) < 5 * math.sqrt((1 - p) ** 2 * (1 - (1 - p) ** 2) / n) * 2
    # Blocks of 64 elements: their kept counts are Binomial(64, 1 - p).
    counts = keep[: n - n % 64].view(-1, 64).sum(dim=1)
    assert abs(float(counts.var()) - 64 * p * (1 - p)) < 0.05 * 64 * p * (1 - p)


def test_keep_mask_follows_the_global_generator():
    torch.manual_seed(7)
    a = keep_mask((3, 1000), 0.1)
    b = keep_mask((3, 1000), 0.1)
    torch.manual_seed(7)
    assert torch.equal(keep_mask((3, 1000), 0.1), a)
    assert not torch.equal(a, b)
    state = torch.get_rng_state()
    c = keep_mask((5, 7), 0.2)
    torch.set_rng_state(state)
    assert torch.equal(keep_mask((5, 7), 0.2), c)
    assert a.dtype == torch.bool and a.shape == (3, 1000)


def test_dropout_is_x_times_mask_over_keep_probability_with_that_gradient():
    p = 0.25
    x = torch.randn(4, 33, 17, requires_grad=True)
    torch.manual_seed(3)
    y = dropout(x, p)
    torch.manual_seed(3)
    keep = keep_mask(x.shape, p)
    torch.testing.assert_close(y, x.detach() * keep / (1 - p), rtol=0, atol=1e-6)
    weights = torch.randn_like(x)
    (y * weights).sum().backward()
    torch.testing.assert_close(x.grad, weights * keep / (1 - p), rtol=0, atol=1e-6)


def test_dropout_preserves_the_expectation():
    torch.manual_seed(0)
    y = dropout(torch.full((1_000_000,), 3.0), 0.1)
    assert torch.unique(y).tolist() == [0.0, pytest.approx(3.0 / 0.9)]
    assert abs(float(y.mean()) - 3.0) < 5 * 3.0 / 0.9 * math.sqrt(0.1 * 0.9 / 1e6)


def test_dropout_edge_cases_and_module():
    x = torch.randn(10, 10)
    assert dropout(x, 0.1, training=False) is x
    assert dropout(x, 0.0) is x
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        dropout(x, 1.5)
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        Dropout(-0.1)
    module = Dropout(0.3)
    assert list(module.state_dict()) == [] and repr(module) == "Dropout(p=0.3)"
    assert module.eval()(x) is x
    torch.manual_seed(1)
    a = module.train()(x)
    torch.manual_seed(1)
    assert torch.equal(a, dropout(x, 0.3))


def _reference_attention(q, k, v, mask, keep, p):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~mask, float("-inf"))
    return (scores.softmax(-1) * keep / (1 - p)) @ v


def test_attention_dropout_on_cpu_drops_probabilities_as_the_formula_says():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, dtype=torch.float64) for _ in range(3))
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)[:, None, None, :]
    torch.manual_seed(11)
    out = attend(q, k, v, mask=mask, dropout=0.2)
    torch.manual_seed(11)
    keep = keep_mask((2, 3, 5, 5), 0.2)
    # float64 stays float64 throughout (the softmax accumulates in fp32 only for bf16/fp16).
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, _reference_attention(q, k, v, mask, keep, 0.2), rtol=1e-12, atol=1e-12)


def test_attention_dropout_averages_to_sdpa_without_dropout():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 6, 4, dtype=torch.float64) for _ in range(3))
    draws = 4000  # one batch row each: every row draws its own mask
    mean = attend(*(x.expand(draws, -1, -1, -1) for x in (q, k, v)), dropout=0.1).mean(0, keepdim=True)
    exact = F.scaled_dot_product_attention(q, k, v)
    assert float((mean - exact).abs().max()) < 0.03
    assert float((attend(q, k, v, dropout=0.1) - exact).abs().max()) > 0.05  # a single draw is not exact


def test_attention_dropout_under_bf16_autocast_matches_the_fp32_formula():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 16, 32) for _ in range(3))
    mask = torch.ones(2, 1, 1, 16, dtype=torch.bool)
    mask[1, ..., 12:] = False
    torch.manual_seed(5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = attend(q, k, v, mask=mask, dropout=0.1)
    torch.manual_seed(5)
    keep = keep_mask((2, 4, 16, 16), 0.1)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), _reference_attention(q, k, v, mask, keep, 0.1), atol=0.05, rtol=0.02)
