"""Head importance against the gradient of an explicit head mask, physical head, feed-forward
neuron and layer removal against masked/skipped originals, LayerDrop's rate, and the errors."""

from __future__ import annotations

import pytest
import torch

import babelzoo
from babelzoo.compression import head_importance, lowest_heads, neuron_magnitudes, prune_ffn, prune_heads, prune_layers
from babelzoo.errors import InputError

HEADS, WIDTH, LAYERS = 4, 64, 3
D = WIDTH // HEADS


@pytest.fixture
def model():
    torch.manual_seed(0)
    return babelzoo.create_model("xlmr_tiny", vocab_size=200, hidden_size=WIDTH, num_heads=HEADS,
                                 intermediate_size=96, num_layers=LAYERS, dropout=0.0, attention_dropout=0.0).eval()


def batches(n=3):
    torch.manual_seed(1)
    return [torch.randint(5, 200, (4, 10)) for _ in range(n)]


def mlm_loss(model, ids):
    out = model(ids)
    return torch.nn.functional.cross_entropy(model.mlm_logits(out.last_hidden).flatten(0, 1), ids.flatten())


def scale_heads(model, factors):
    """Hooks multiplying each head's context by ``factors[layer][head]`` (an explicit head mask)."""
    hooks = []
    for i, block in enumerate(model.encoder.layers):
        def hook(module, inputs, i=i):
            return (inputs[0] * factors[i].repeat_interleave(D),)
        hooks.append(block.attention.out.register_forward_pre_hook(hook))
    return hooks


def test_head_importance_is_the_mean_absolute_gradient_of_a_head_mask(model):
    expected = torch.zeros(LAYERS, HEADS)
    for ids in batches():
        xi = torch.ones(LAYERS, HEADS, requires_grad=True)
        hooks = scale_heads(model, xi)
        (grad,) = torch.autograd.grad(mlm_loss(model, ids), xi)
        for hook in hooks:
            hook.remove()
        expected += grad.abs()
    expected /= 3
    scores = head_importance(model, batches(), mlm_loss, normalize=False)
    torch.testing.assert_close(scores, expected, rtol=1e-4, atol=1e-7)
    normalised = head_importance(model, batches(), mlm_loss)
    torch.testing.assert_close(normalised.norm(dim=1), torch.ones(LAYERS))
    assert all(p.grad is None for p in model.parameters())  # nothing left behind


def test_pruned_heads_compute_what_the_masked_original_computes(model, tmp_path):
    ids = batches(1)[0]
    drop = {0: [1, 3], 2: [0]}
    small = prune_heads(model, drop)
    assert small.config.text.layer_heads == (2, 4, 3)
    per_head = 3 * D * WIDTH + 3 * D + D * WIDTH  # q, k, v rows and biases, output columns
    assert small.num_parameters() == model.num_parameters() - 3 * per_head
    mask = torch.ones(LAYERS, HEADS)
    for layer, heads in drop.items():
        mask[layer, heads] = 0
    hooks = scale_heads(model, mask)
    with torch.no_grad():
        expected = model(ids).last_hidden
    for hook in hooks:
        hook.remove()
    with torch.no_grad():
        got = small(ids).last_hidden
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    small.save_pretrained(tmp_path / "pruned")
    again = babelzoo.from_pretrained(tmp_path / "pruned").eval()
    with torch.no_grad():
        torch.testing.assert_close(again(ids).last_hidden, got, rtol=0, atol=0)
    # pruning again counts heads among those the layer has now
    smaller = prune_heads(small, {0: [0]})
    assert smaller.config.text.layer_heads == (1, 4, 3)
    # the FLOP count follows the kept heads: a pruned head saves 2·4·H·d + 4·L·d per token
    text, pruned = model.config.text, small.config.text
    saved = 3 * (2 * 4 * WIDTH * D + 4 * 10 * D)
    assert text.encoder_flops_per_token(10) - pruned.encoder_flops_per_token(10) == saved


def test_pruned_layers_are_the_original_without_them(model):
    ids = batches(1)[0]
    small = prune_layers(model, [0, 2])
    assert small.config.text.num_layers == 2
    with torch.no_grad():
        x = model.embeddings(ids)
        state = model.encoder.prepare(None, ids.shape[1])
        x = model.encoder.run(x, state, 0, 1)
        expected = model.encoder.finish(model.encoder.run(x, state, 2, 3))
        torch.testing.assert_close(small(ids).last_hidden, expected, rtol=0, atol=1e-6)
    both = prune_layers(prune_heads(model, {2: [1]}), [1, 2])
    assert both.config.text.layer_heads == (4, 3)


def test_neuron_magnitudes_by_hand_and_pruned_neurons_are_those_of_least_weight(model, tmp_path):
    ids = batches(1)[0]
    blocks = model.encoder.layers
    with torch.no_grad():
        blocks[1].ffn.up.weight[5] = 0.0   # neuron 5 of layer 1 contributes nothing
        blocks[2].ffn.down.weight[:, 7] = 0.0
        up, down = blocks[0].ffn.up.weight, blocks[0].ffn.down.weight
        j = 11
        by_hand = up[j].pow(2).sum().sqrt() * down[:, j].pow(2).sum().sqrt()
    scores = neuron_magnitudes(model)
    assert scores.shape == (LAYERS, 96)
    torch.testing.assert_close(scores[0, j], by_hand)
    assert scores[1, 5] == 0 and scores[2, 7] == 0
    # every layer loses its weakest neurons; with the lost ones silenced, the output is unchanged
    small = prune_ffn(model, 90)
    assert small.config.text.intermediate_size == 90
    assert small.num_parameters() == model.num_parameters() - LAYERS * 6 * (2 * WIDTH + 1)
    dropped = [scores[layer].argsort()[:6] for layer in range(LAYERS)]
    assert 5 in dropped[1].tolist() and 7 in dropped[2].tolist()
    with torch.no_grad():
        for block, lost in zip(model.encoder.layers, dropped):
            block.ffn.down.weight[:, lost] = 0.0
        torch.testing.assert_close(small(ids).last_hidden, model(ids).last_hidden, rtol=0, atol=1e-5)
    small.save_pretrained(tmp_path / "narrow")
    again = babelzoo.from_pretrained(tmp_path / "narrow").eval()
    with torch.no_grad():
        torch.testing.assert_close(again(ids).last_hidden, small(ids).last_hidden, rtol=0, atol=0)
    # explicit scores choose the neurons: keep 0..9 of every layer
    first = prune_ffn(model, 10, scores=-torch.arange(96.0).expand(LAYERS, 96))
    assert torch.equal(first.encoder.layers[2].ffn.up.weight, model.encoder.layers[2].ffn.up.weight[:10])
    assert torch.equal(first.encoder.layers[2].ffn.down.weight, model.encoder.layers[2].ffn.down.weight[:, :10])


def test_layerdrop_skips_layers_at_its_rate_in_training_only(model):
    dropping = babelzoo.create_model("xlmr_tiny", vocab_size=200, num_layers=4, layerdrop=0.3)
    calls = []
    for block in dropping.encoder.layers:
        block.register_forward_hook(lambda *_: calls.append(1))
    ids = torch.randint(5, 200, (2, 6))
    torch.manual_seed(0)
    dropping.train()
    for _ in range(500):
        dropping(ids)
    rate = 1 - len(calls) / (500 * 4)
    assert abs(rate - 0.3) < 4 * (0.3 * 0.7 / 2000) ** 0.5
    calls.clear()
    dropping.eval()
    dropping(ids)
    assert len(calls) == 4


def test_pruning_refuses_what_does_not_exist(model):
    with pytest.raises(InputError, match="layer 3 does not exist"):
        prune_heads(model, {3: [0]})
    with pytest.raises(InputError, match=r"layer 1 has 4 heads; cannot prune \[4\]"):
        prune_heads(model, {1: [4]})
    with pytest.raises(InputError, match="all 4 heads of layer 0"):
        prune_heads(model, {0: [0, 1, 2, 3]})
    with pytest.raises(InputError, match="distinct ascending layers"):
        prune_layers(model, [2, 0])
    with pytest.raises(InputError, match=r"size must be an integer in 1..96 \(the model's intermediate_size\), got 97"):
        prune_ffn(model, 97)
    with pytest.raises(InputError, match=r"got 0"):
        prune_ffn(model, 0)
    with pytest.raises(InputError, match=r"scores must be \[3, 96\] \(layers, neurons\), got \[3, 95\]"):
        prune_ffn(model, 10, scores=torch.zeros(3, 95))
    with pytest.raises(InputError, match="Transformer-family"):
        prune_heads(babelzoo.create_model("bilstm_tiny"), {0: [0]})
    with pytest.raises(babelzoo.zoo.config.ConfigError, match="layer_heads"):
        babelzoo.create_model("xlmr_tiny", layer_heads=(4, 5))


def test_lowest_heads_prunes_globally_but_leaves_every_layer_a_head():
    scores = torch.tensor([[0.1, 0.2, 0.9, 0.8], [0.05, 0.06, 0.07, 0.08]])
    assert lowest_heads(scores, 0.5) == {0: [0], 1: [0, 1, 2]}  # global order; layer 1 keeps head 3
    assert lowest_heads(scores, 0.75) == {0: [0, 1, 3], 1: [0, 1, 2]}  # layer 1 keeps its best head
    assert lowest_heads(scores, 0.25, layer_heads=(4, 2)) == {0: [0], 1: [0]}
