"""LAMB against a hand computation of You et al. 2020 (Algorithm 2), decay exclusions, and the
learning-rate schedules against their formulas."""

import math

import numpy as np
import pytest
import torch
from torch import nn

import babelzoo
from babelzoo.train.config import TrainConfig
from babelzoo.train.settings import OptimConfig
from babelzoo.train.optim import LAMB, Schedule, build_optimizer, param_groups


def lamb_by_hand(x, grads, lr, b1, b2, eps, wd, adapt):
    """The paper's update, written out in numpy float64."""
    x, m, v = x.copy(), np.zeros_like(x), np.zeros_like(x)
    for t, g in enumerate(grads, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        u = m_hat / (np.sqrt(v_hat) + eps) + wd * x
        ratio = np.linalg.norm(x) / np.linalg.norm(u) if adapt else 1.0
        x = x - lr * ratio * u
    return x


def test_lamb_two_steps_equal_the_paper_formulas():
    rng = np.random.default_rng(0)
    w0, b0 = rng.normal(size=(3, 4)), rng.normal(size=4)
    grads_w = [rng.normal(size=(3, 4)), rng.normal(size=(3, 4)) * 5]
    grads_b = [rng.normal(size=4), rng.normal(size=4)]
    w = nn.Parameter(torch.tensor(w0))
    b = nn.Parameter(torch.tensor(b0))
    lr, b1, b2, eps, wd = 0.1, 0.9, 0.99, 1e-6, 0.05
    opt = LAMB([dict(params=[w], weight_decay=wd, adapt=True), dict(params=[b], weight_decay=0.0, adapt=False)],
               lr=lr, betas=(b1, b2), eps=eps)
    for gw, gb in zip(grads_w, grads_b):
        w.grad, b.grad = torch.tensor(gw), torch.tensor(gb)
        opt.step()
    np.testing.assert_allclose(w.detach().numpy(), lamb_by_hand(w0, grads_w, lr, b1, b2, eps, wd, True), rtol=1e-12)
    np.testing.assert_allclose(b.detach().numpy(), lamb_by_hand(b0, grads_b, lr, b1, b2, eps, 0.0, False),
                               rtol=1e-12)
    # the trust ratio makes the step of an adapted layer lr·‖x‖ in norm, whatever the gradient scale
    w2 = nn.Parameter(torch.tensor(w0))
    opt2 = LAMB([w2], lr=lr, weight_decay=0.0)
    w2.grad = torch.tensor(grads_w[0]) * 1000
    opt2.step()
    assert float((w2.detach() - torch.tensor(w0)).norm()) == pytest.approx(lr * np.linalg.norm(w0), rel=1e-9)


def test_lamb_trust_ratio_is_one_for_zero_weights():
    w = nn.Parameter(torch.zeros(2, 2, dtype=torch.float64))
    opt = LAMB([w], lr=0.5, weight_decay=0.0, eps=1e-12)
    w.grad = torch.tensor([[1.0, -2.0], [0.5, 0.0]], dtype=torch.float64)
    opt.step()
    expected = -0.5 * np.sign([[1.0, -2.0], [0.5, 0.0]])
    np.testing.assert_allclose(w.detach().numpy(), expected, atol=1e-9)


def test_bias_and_layernorm_are_excluded_from_decay_and_adaptation():
    model = babelzoo.create_model("xlmr_tiny", vocab_size=100, hidden_size=32, num_heads=2, intermediate_size=64)
    names = {id(p): n for n, p in model.named_parameters()}
    decay, no_decay = param_groups(model, 0.01)
    assert decay["weight_decay"] == 0.01 and decay["adapt"] and no_decay["weight_decay"] == 0 and not no_decay["adapt"]
    excluded = {names[id(p)] for p in no_decay["params"]}
    included = {names[id(p)] for p in decay["params"]}
    assert "embeddings.norm.weight" in excluded and "encoder.layers.0.attention_norm.weight" in excluded
    assert "encoder.layers.0.attention.qkv.bias" in excluded and "lm_head.bias" in excluded
    assert "embeddings.word.weight" in included and "encoder.layers.1.ffn.up.weight" in included
    assert all(n.endswith("weight") and "norm" not in n for n in included)
    # the tied decoder is the word embedding: one tensor, optimised once
    assert len(decay["params"]) + len(no_decay["params"]) == len({id(p) for p in model.parameters()})
    opt = build_optimizer(model, TrainConfig(optim=OptimConfig(optimizer="adamw", weight_decay=0.1)))
    assert isinstance(opt, torch.optim.AdamW) and [g["weight_decay"] for g in opt.param_groups] == [0.1, 0.0]


@pytest.mark.parametrize("kind", ["linear", "cosine", "inverse_sqrt", "constant"])
def test_schedules_follow_their_formulas(kind):
    total, warm, floor = 100, 10, 0.1
    schedule = Schedule(kind, total, warm, floor)
    for step in range(0, 120, 7):
        s = step + 1
        if s <= warm:
            expected = s / warm
        elif kind == "linear":
            expected = floor + (1 - floor) * (1 - min((s - warm) / (total - warm), 1))
        elif kind == "cosine":
            expected = floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min((s - warm) / (total - warm), 1)))
        elif kind == "inverse_sqrt":
            expected = math.sqrt(warm / s)
        else:
            expected = 1.0
        assert schedule.factor(step) == pytest.approx(expected, abs=1e-12), step
    layer = nn.Linear(2, 2)
    opt = torch.optim.SGD(layer.parameters(), lr=0.5)
    assert schedule.apply(opt, 4) == pytest.approx(0.5 * 5 / warm)
    assert schedule.apply(opt, 99) == pytest.approx(0.5 * schedule.factor(99))  # base lr is kept, not compounded
