"""Pruning a Transformer's attention heads, feed-forward neurons and layers.

Michel et al. 2019, "Are Sixteen Heads Really Better than One?": give every head h a mask
variable ξ_h multiplying its output, Att(x) = Σ_h ξ_h · Att_h(x); the importance of a head is

    I_h = E_x | ∂L(x) / ∂ξ_h |,   ∂L/∂ξ_h at ξ = 1 = Σ_positions ⟨ctx_h, ∂L/∂ctx_h⟩

where ctx_h is the head's slice of the attention context (the input of the output projection).
:func:`head_importance` computes it from that identity (a hook on each layer's output
projection; the model's own forward is unchanged), per batch, optionally ℓ2-normalised per
layer as the paper does before pruning globally. :func:`prune_heads` then removes heads
physically: each layer's fused QKV projection loses the heads' rows of q, k and v, its output
projection the matching columns, and the config records how many heads each layer keeps
(``layer_heads``), so the smaller model saves and loads as any other. :func:`prune_ffn`
narrows every feed-forward layer to the ``size`` hidden neurons of largest weight magnitude,
s_j = ‖W_up[j, :]‖ · ‖W_down[:, j]‖ (a neuron's output is W_down[:, j] · σ(W_up[j, :] x + b_j)),
the narrow student a distillation then trains (TinyBERT's students are narrower than their
teachers). :func:`prune_layers` keeps a subset of the layers (as a model trained with LayerDrop,
Fan et al. 2020, allows; ``layerdrop`` in the Transformer config trains one).

    scores = head_importance(model, batches, loss)            # [layers, heads]
    small = prune_heads(model, lowest_heads(scores, 0.25))   # a quarter of the heads gone
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, Optional, Sequence

import torch
from torch import nn

from ..errors import InputError
from ..zoo.factory import build_model
from ..zoo.checkpoint_io import load_state_strict
from ..zoo.sentences import share_tokenizer


def _check_transformer(model) -> None:
    text = model.config.text
    if type(text).family != "transformer" or model.config.fusion is not None:
        raise InputError(f"pruning works on Transformer-family text encoders; {model.config.architecture!r} is "
                         f"{type(text).family!r}{' with a fusion part' if model.config.fusion else ''}")
    if text.share_layers or text.relative_attention != "none" or text.memory_layers:
        raise InputError("pruning needs distinct layers without relative attention or memory layers "
                         "(shared blocks, T5/NEZHA positions and kNN memories tie heads across layers)")
    if model.config.knowledge is not None:
        raise InputError("pruning a model with a knowledge part is not supported (its fusion layers are indexed)")


def head_importance(model, batches: Iterable, loss: Callable[[nn.Module, object], torch.Tensor],
                    normalize: bool = True) -> torch.Tensor:
    """[num_layers, num_heads] importance I_h (module docstring), averaged over ``batches``;
    ``loss(model, batch)`` returns the scalar to differentiate (a masked-LM or task loss).
    Heads already pruned away score 0. ``normalize``: divide each layer by its ℓ2 norm."""
    _check_transformer(model)
    text = model.config.text
    scores = torch.zeros(text.num_layers, text.num_heads)
    captured: dict[int, torch.Tensor] = {}
    hooks = []
    for i, block in enumerate(model.encoder.layers):
        def keep(module, inputs, i=i):
            context = inputs[0]
            if context.requires_grad:
                context.retain_grad()
            captured[i] = context
        hooks.append(block.attention.out.register_forward_pre_hook(keep))
    count = 0
    was_training = model.training
    model.eval()  # no dropout: the derivative of the model as it will be used
    try:
        for batch in batches:
            model.zero_grad(set_to_none=True)
            captured.clear()
            value = loss(model, batch)
            value.backward()
            for i, context in captured.items():
                if context.grad is None:
                    raise InputError(f"head_importance: the loss does not depend on layer {i}'s attention")
                heads = text.heads_in(i)
                per_head = (context * context.grad).reshape(-1, heads, text.head_dim).sum(dim=(0, 2))
                scores[i, :heads] += per_head.abs().detach().float().cpu()
            count += 1
    finally:
        for hook in hooks:
            hook.remove()
        model.zero_grad(set_to_none=True)
        model.train(was_training)
    if count == 0:
        raise InputError("head_importance: no batches given")
    scores /= count
    if normalize:
        scores /= scores.norm(dim=1, keepdim=True).clamp(min=1e-20)
    return scores


def lowest_heads(scores: torch.Tensor, fraction: float, layer_heads: Sequence[int] = ()) -> dict[int, list[int]]:
    """The ``fraction`` of all heads with the lowest scores, as ``{layer: [heads]}``, never
    every head of a layer (each keeps its best one). ``layer_heads``: heads per layer when some
    were pruned before (their scores beyond that count are ignored)."""
    if not 0 <= fraction < 1:
        raise InputError(f"fraction={fraction} must be in [0, 1)")
    layers, heads = scores.shape
    alive = [(layer_heads[i] if layer_heads else heads) for i in range(layers)]
    candidates = sorted((float(scores[i, h]), i, h) for i in range(layers) for h in range(alive[i]))
    budget = int(round(fraction * len(candidates)))
    chosen: dict[int, list[int]] = {}
    for _, i, h in candidates:
        if budget == 0:
            break
        if len(chosen.get(i, [])) + 1 < alive[i]:
            chosen.setdefault(i, []).append(h)
            budget -= 1
    return {i: sorted(hs) for i, hs in sorted(chosen.items())}


def prune_heads(model, heads: Mapping[int, Sequence[int]]):
    """A copy of ``model`` without the attention heads ``{layer: [head indices]}`` (indices
    among the heads that layer has now). The other heads compute exactly what they computed."""
    _check_transformer(model)
    text = model.config.text
    counts = [text.heads_in(i) for i in range(text.num_layers)]
    state = model.state_dict()
    d = text.head_dim
    for layer, drop in heads.items():
        if not isinstance(layer, int) or not 0 <= layer < text.num_layers:
            raise InputError(f"prune_heads: layer {layer!r} does not exist (the model has {text.num_layers} layers)")
        drop = sorted(set(drop))
        bad = [h for h in drop if not isinstance(h, int) or not 0 <= h < counts[layer]]
        if bad:
            raise InputError(f"prune_heads: layer {layer} has {counts[layer]} heads; cannot prune {bad}")
        if len(drop) == counts[layer]:
            raise InputError(f"prune_heads: pruning all {counts[layer]} heads of layer {layer} would leave it no "
                             f"attention; remove the layer instead (prune_layers)")
        keep = [h for h in range(counts[layer]) if h not in drop]
        inner = counts[layer] * d
        cols = torch.cat([torch.arange(h * d, (h + 1) * d) for h in keep])
        rows = torch.cat([cols + part * inner for part in range(3)])  # q, k and v
        prefix = f"encoder.layers.{layer}.attention."
        state[prefix + "qkv.weight"] = state[prefix + "qkv.weight"][rows]
        if prefix + "qkv.bias" in state:
            state[prefix + "qkv.bias"] = state[prefix + "qkv.bias"][rows]
        state[prefix + "out.weight"] = state[prefix + "out.weight"][:, cols]
        counts[layer] = len(keep)
    return _rebuilt(model, model.config.override(layer_heads=tuple(counts)), state)


def neuron_magnitudes(model) -> torch.Tensor:
    """[num_layers, intermediate_size] s_j = ‖W_up[j, :]‖ · ‖W_down[:, j]‖ of every feed-forward
    neuron."""
    _check_transformer(model)
    state = model.state_dict()
    return torch.stack([state[f"encoder.layers.{i}.ffn.up.weight"].norm(dim=1)
                        * state[f"encoder.layers.{i}.ffn.down.weight"].norm(dim=0)
                        for i in range(model.config.text.num_layers)])


def prune_ffn(model, size: int, scores: Optional[torch.Tensor] = None):
    """A copy of ``model`` whose feed-forward layers keep ``size`` hidden neurons each: the
    highest ``scores`` ([num_layers, intermediate_size]; default :func:`neuron_magnitudes`), in
    their original order. Every kept neuron computes exactly what it computed."""
    _check_transformer(model)
    text = model.config.text
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= text.intermediate_size:
        raise InputError(f"prune_ffn: size must be an integer in 1..{text.intermediate_size} (the model's "
                         f"intermediate_size), got {size!r}")
    scores = neuron_magnitudes(model) if scores is None else scores
    if tuple(scores.shape) != (text.num_layers, text.intermediate_size):
        raise InputError(f"prune_ffn: scores must be [{text.num_layers}, {text.intermediate_size}] (layers, "
                         f"neurons), got {list(scores.shape)}")
    state = model.state_dict()
    for layer in range(text.num_layers):
        keep = scores[layer].topk(size).indices.sort().values
        prefix = f"encoder.layers.{layer}.ffn."
        for name in ("up.weight", "up.bias"):
            if prefix + name in state:
                state[prefix + name] = state[prefix + name][keep]
        state[prefix + "down.weight"] = state[prefix + "down.weight"][:, keep]
    return _rebuilt(model, model.config.override(intermediate_size=size), state)


def prune_layers(model, keep: Sequence[int]):
    """A copy of ``model`` with the encoder layers ``keep`` (in order), renumbered 0..k−1."""
    _check_transformer(model)
    text = model.config.text
    keep = list(keep)
    if not keep or sorted(set(keep)) != keep or not all(0 <= i < text.num_layers for i in keep):
        raise InputError(f"prune_layers: keep must list distinct ascending layers of 0..{text.num_layers - 1}, "
                         f"got {keep}")
    state = {}
    for key, value in model.state_dict().items():
        if key.startswith("encoder.layers."):
            index, _, rest = key[len("encoder.layers."):].partition(".")
            if int(index) not in keep:
                continue
            key = f"encoder.layers.{keep.index(int(index))}.{rest}"
        state[key] = value
    heads = tuple(text.heads_in(i) for i in keep) if text.layer_heads else ()
    return _rebuilt(model, model.config.override(num_layers=len(keep), layer_heads=heads), state)


def _rebuilt(model, config, state):
    with torch.random.fork_rng(devices=[]):
        small = build_model(config)  # every weight is overwritten below
    load_state_strict(small, state, "the pruned model")
    share_tokenizer(model, small)
    return small.train(model.training)
