"""Mixture: weighted sums, sampling frequencies, per-objective metrics, spec building."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import pytest
import torch

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives import MLM, TLM, Mixture, Pair, build_objective
from babelzoo.objectives.base import Loss, Objective
from babelzoo.typed import Range

S = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=64, languages={"en": 0, "de": 1})
SENTENCES = [([10, 11, 12, 13, 14, 15], "en"), ([20, 21, 22, 23], "de")]
PAIRS = [Pair([10, 11, 12, 13], [20, 21, 22], "en", "de"), Pair([14, 15], [23, 24, 25], "en", "de")]


def test_sum_mode_weights_losses_and_reports_each_objective():
    model = babelzoo.create_model("xlm_tiny", vocab_size=64).eval()
    mix = Mixture({"mlm": MLM(S), "tlm": TLM(S)}, {"mlm": 1.0, "tlm": 0.5})
    torch.manual_seed(0)
    batch = mix.prepare({"mlm": SENTENCES, "tlm": PAIRS})
    assert {k.split(".")[0] for k in batch} == {"mlm", "tlm"}
    loss = mix(model, batch)
    parts = {name: mix.objectives[name](model, {k.split(".", 1)[1]: v for k, v in batch.items()
                                                  if k.startswith(name + ".")}) for name in ("mlm", "tlm")}
    expected = parts["mlm"].value + 0.5 * parts["tlm"].value
    assert torch.allclose(loss.value, expected, atol=1e-6)
    for name, part in parts.items():
        assert loss.metrics[f"{name}/loss"] == pytest.approx(part.metrics["loss"])
        assert loss.metrics[f"{name}/accuracy"] == pytest.approx(part.metrics["accuracy"])
    assert loss.metrics["loss"] == pytest.approx(float(expected.detach()))
    assert loss.tokens == parts["mlm"].tokens + parts["tlm"].tokens


def test_sample_mode_draws_objectives_by_weight():
    mix = Mixture({"mlm": MLM(S), "tlm": TLM(S)}, {"mlm": 3.0, "tlm": 1.0}, mode="sample")
    torch.manual_seed(1)
    picks = [mix.choose() for _ in range(4000)]
    assert abs(picks.count("mlm") / 4000 - 0.75) < 0.03
    model = babelzoo.create_model("xlm_tiny", vocab_size=64).eval()
    batch = mix.prepare({"mlm": SENTENCES, "tlm": PAIRS})
    names = {k.split(".")[0] for k in batch}
    assert len(names) == 1
    (name,) = names
    loss = mix(model, batch)
    assert set(loss.metrics) >= {f"{name}/loss", f"{name}/accuracy", "loss"}
    assert loss.metrics["loss"] == pytest.approx(loss.metrics[f"{name}/loss"])  # sampled losses are not reweighted


def test_from_spec_and_errors():
    config = babelzoo.model_config("xlm_tiny", vocab_size=64)
    mix = Mixture.from_spec({"mlm": {"weight": 2.0}, "pairs": {"objective": "tlm", "max_length": 32},
                             "clwr": {}}, S, config)
    assert mix.weights == {"mlm": 2.0, "pairs": 1.0, "clwr": 1.0}
    assert mix.objectives["pairs"].max_length == 32
    with pytest.raises(ValueError, match=r"^objectives.mlm.temperature: unknown mlm option key 'temperature' Valid keys: "
                                         r"masking, word_starts, max_length, use_language_ids$"):
        build_objective("mlm", S, config, temperature=1.0)
    with pytest.raises(ValueError, match="config=model.config"):
        build_objective("clwr", S)
    with pytest.raises(ValueError, match=r"objectives.distill_sentence: give teacher \(objective 'distill_sentence' "
                                         r"has no default for it\)"):
        build_objective("distill_sentence", S, config)
    with pytest.raises(KeyError, match="did you mean 'tlm'"):
        build_objective("tlmm", S)
    with pytest.raises(ValueError, match="missing"):
        mix.prepare({"mlm": SENTENCES})
    with pytest.raises(ValueError, match="positive"):
        Mixture({"mlm": MLM(S)}, {"mlm": 0.0})


class Quiet(Objective):
    """An objective that reports no "loss" metric of its own."""

    name = "quiet"

    def prepare(self, examples):
        return {"x": torch.tensor(examples, dtype=torch.float)}

    def forward(self, model, batch):
        return Loss(batch["x"].mean(), {"count": float(len(batch["x"]))}, len(batch["x"]))


def test_every_objective_of_a_mixture_reports_its_loss():
    mix = Mixture({"a": Quiet(), "b": Quiet()}, {"a": 1.0, "b": 2.0})
    loss = mix(None, mix.prepare({"a": [1.0, 3.0], "b": [5.0]}))
    assert float(loss.metrics["a/loss"]) == 2.0 and float(loss.metrics["b/loss"]) == 5.0
    assert float(loss.metrics["loss"]) == 12.0 and loss.metrics["a/count"] == 2.0


def test_an_objectives_options_are_a_dataclass_made_once_from_its_constructor():
    from babelzoo.objectives.mixture import objective_class

    options = objective_class("mlm").options()
    assert options is objective_class("mlm").options() and options.__name__ == "mlmOptions"
    assert [(f.name, f.default) for f in dataclasses.fields(options)] == [
        ("masking", None), ("word_starts", None), ("max_length", 128), ("use_language_ids", True)]
    teacher, *_ = dataclasses.fields(objective_class("distill_sentence").options())
    assert (teacher.name, teacher.default) == ("teacher", dataclasses.MISSING)  # required: no default
    with pytest.raises(ValueError, match=r"^objectives.pairs.max_length='long' must be an integer, got str$"):
        Mixture.from_spec({"pairs": {"objective": "tlm", "max_length": "long"}}, S)
    with pytest.raises(ValueError, match=r"^objectives.tlm.max_lenght: unknown tlm option key 'max_lenght'; did you "
                                         r"mean 'max_length'\?"):
        build_objective("tlm", S, max_lenght=3)


@dataclasses.dataclass(frozen=True)
class Declared:
    """Options an objective declares itself (its annotations resolve in this module)."""

    max_length: Annotated[int, Range(8, 512)] = 128


def test_an_objective_may_declare_its_options(monkeypatch):
    from babelzoo.objectives.mixture import objective_options

    monkeypatch.setattr(MLM, "options", classmethod(lambda cls: Declared))
    assert objective_options("mlm", {"max_length": 64.0}) == {"max_length": 64}
    with pytest.raises(ValueError, match=r"^objectives.mlm.max_length=4 must be in \[8, 512\]$"):
        objective_options("mlm", {"max_length": 4})
    with pytest.raises(ValueError, match=r"^objectives.mlm.masking: unknown mlm option key 'masking' Valid keys: "
                                         r"max_length$"):
        objective_options("mlm", {"masking": {}})
