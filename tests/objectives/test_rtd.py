"""ELECTRA's RTD: generator size, shared embeddings, sampled replacements, λ = 50."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives import RTD
from babelzoo.objectives.batching import IGNORE
from babelzoo.objectives.rtd import generator_config

S = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=64, languages={"en": 0})


def test_generator_is_a_quarter_wide_with_the_same_depth():
    text = babelzoo.model_config("xlm_base").text
    gen = generator_config(text, 0.25)
    assert (gen.hidden_size, gen.num_heads, gen.intermediate_size, gen.num_layers) == (256, 4, 1024, 12)
    tiny = generator_config(babelzoo.model_config("xlm_tiny").text, 0.25)
    assert (tiny.hidden_size, tiny.num_heads, tiny.intermediate_size) == (32, 1, 128)


def test_generator_owns_no_embeddings():
    rtd = RTD(S, babelzoo.model_config("albert_tiny", vocab_size=64))
    assert not any(isinstance(m, nn.Embedding) for m in rtd.modules())
    # ALBERT's factorised embeddings (E=64) feed the generator's own projection E → 32.
    assert rtd.generator_project.in_features == 64 and rtd.generator_project.out_features == 32


def test_sampled_original_counts_as_original_and_loss_is_gen_plus_50_disc():
    model = babelzoo.create_model("xlm_tiny", vocab_size=64).eval()
    rtd = RTD(S, model.config).eval()
    target = 20
    with torch.no_grad():  # make the generator sample token 20 with certainty
        rtd.generator_head.bias.fill_(-1e4)
        rtd.generator_head.bias[target] = 1e4
    torch.manual_seed(0)
    batch = rtd.prepare([[20, 21, 20, 22, 20, 23, 20, 24] * 3, [20, 25, 26, 20] * 4])
    chosen = batch["labels"].ne(IGNORE)
    assert bool(batch["input_ids"][chosen].eq(S.mask).all()), "ELECTRA feeds [MASK] at every chosen position"
    loss = rtd(model, batch)
    original = torch.where(chosen, batch["labels"], batch["input_ids"])
    corrupted = torch.where(chosen, torch.full_like(original, target), original)
    replaced = chosen & original.ne(target)
    real = batch["attention_mask"].bool()
    assert loss.metrics["replaced"] == float(replaced[real].float().mean())
    scores = rtd.discriminator(model(corrupted, attention_mask=batch["attention_mask"]).last_hidden).squeeze(-1)
    disc = F.binary_cross_entropy_with_logits(scores[real], replaced[real].float())
    assert abs(loss.metrics["discriminator_loss"] - float(disc.detach())) < 1e-5
    assert abs(float(loss.value.detach()) - (loss.metrics["generator_loss"] + 50 * float(disc.detach()))) < 1e-3


def test_generator_logits_use_the_shared_word_embeddings():
    model = babelzoo.create_model("xlm_tiny", vocab_size=64).eval()
    rtd = RTD(S, model.config).eval()
    batch = rtd.prepare([[10, 11, 12, 13, 14, 15, 16]])
    logits, positions = rtd.generate(model, batch)
    with torch.no_grad():
        # (a shift of every dimension alike would cancel against the LayerNorm-ed hidden state)
        model.embeddings.word.weight[30] += torch.randn(128)
    changed, _ = rtd.generate(model, batch)
    assert not torch.allclose(logits[:, 30], changed[:, 30])
    assert logits.shape == (int(positions.sum()), 64)
