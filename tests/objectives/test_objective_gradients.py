"""Each objective trains exactly the parameters it should: the encoder, plus its own heads and
the model's heads it uses, and nothing else."""

from __future__ import annotations

import pytest
import torch

import babelzoo
from babelzoo.objectives import OBJECTIVES, build_objective

ENCODER = {"embeddings.", "encoder."}
LM_HEAD = {"lm_head."}
POOLER = {"pooler."}
EXPECTED = {
    "mlm": ENCODER | LM_HEAD, "mmlm": ENCODER | LM_HEAD, "tlm": ENCODER | LM_HEAD, "clmlm": ENCODER | LM_HEAD,
    "clm": ENCODER | LM_HEAD,
    "clwr": ENCODER | LM_HEAD | {"objective.attention."},
    "clpc": ENCODER | POOLER | {"objective.classifier."},
    "nsp": ENCODER | POOLER | {"objective.classifier."},
    "sop": ENCODER | POOLER | {"objective.classifier."},
    "rtd": ENCODER | {"objective.generator_project.", "objective.generator.", "objective.generator_head.",
                      "objective.discriminator."},
    "xlco": ENCODER, "translation_ranking": ENCODER,
    "unilm": ENCODER | LM_HEAD, "glm": ENCODER | LM_HEAD | {"objective.block_position."},
    "skip_thoughts": ENCODER | {"objective.decoders."},
    "quick_thoughts": ENCODER | {"objective.context_encoder."},
    "infersent": ENCODER | {"objective.classifier."},
}


def trained(model, objective, loss) -> tuple[set[str], set[str]]:
    loss.value.backward()
    params = {f"model.{n}": p for n, p in model.named_parameters()}
    params.update({f"objective.{n}": p for n, p in objective.named_parameters()})
    with_grad = {n for n, p in params.items() if p.grad is not None and bool(p.grad.abs().sum() > 0)}
    return with_grad, set(params)


def matches(name: str, prefixes: set[str]) -> bool:
    name = name.removeprefix("model.")
    return any(name.startswith(p) for p in prefixes)


TEXT_MODULES = {"mlm", "tlm", "clwr", "clpc", "clmlm", "clm", "sop", "rtd", "xlco", "translation_ranking", "unilm",
                "glm", "skip_thoughts", "quick_thoughts", "infersent"}


def test_every_registered_text_objective_is_covered():
    text = {name for name, cls in OBJECTIVES.items() if cls.__module__.rsplit(".", 1)[-1] in TEXT_MODULES}
    assert text == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_gradients_reach_exactly_the_trained_parameters(name, toy):
    specials, examples = toy
    torch.manual_seed(0)
    model = babelzoo.create_model("xlm_tiny", vocab_size=64)
    objective = build_objective(name, specials, model.config)
    loss = objective(model, objective.prepare(examples[name]))
    with_grad, every = trained(model, objective, loss)
    expected = {n for n in every if matches(n, EXPECTED[name])}
    assert with_grad == expected, (f"unexpected: {sorted(with_grad - expected)}; "
                                   f"missing: {sorted(expected - with_grad)}")
    # The word embeddings are trained by every objective (as input, and as tied LM decoder).
    assert "model.embeddings.word.weight" in with_grad


def test_xlco_on_an_inner_layer_leaves_the_layers_above_untouched(toy):
    specials, examples = toy
    model = babelzoo.create_model("xlm_tiny", vocab_size=64)
    objective = build_objective("xlco", specials, layer=1)
    with_grad, every = trained(model, objective, objective(model, objective.prepare(examples["xlco"])))
    assert with_grad == {n for n in every if matches(n, {"embeddings.", "encoder.layers.0."})}
