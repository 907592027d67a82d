"""Combining objectives: a weighted sum every step, or one objective sampled per step.

``mode="sum"``: L = Σ_k w_k · L_k over every objective's batch (UER-py, ERNIE and Unicoder
train several targets at once). ``mode="sample"``: each step trains one objective, drawn with
probability w_k / Σ w (XLM alternates MLM and TLM steps this way); its loss is not reweighted.

A mixture's batch holds each objective's tensors under ``"<name>.<key>"``; its metrics report
``"<name>/loss"``, ``"<name>/accuracy"`` (and the objective's other metrics) plus the total
``"loss"``.

    mix = Mixture.from_spec({"mlm": {"weight": 1.0}, "tlm": {"weight": 0.5}}, specials)
    batch = mix.prepare({"mlm": sentences, "tlm": pairs})
    loss = mix(model, batch)
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Annotated, Any, Mapping, Optional, Sequence

import torch
from torch import nn

from ..datasets.specials import SpecialIds
from ..typed import Range, Where, build, coerce
from ..zoo.config import ConfigError, EncoderConfig
from ..zoo.model_config import ModelConfig
from .base import OBJECTIVES, Loss, Objective
from .examples import ExampleError

MODES = ("sum", "sample")
POSITIVE = Annotated[float, Range(0, low_open=True)]  # an objective's weight


def objective_class(name: str) -> type[Objective]:
    """The registered objective class ``name`` (the knowledge objectives, found through the
    ``babelzoo.objectives`` entry points, imported on demand)."""
    return OBJECTIVES.get(name)


def all_objectives() -> list[str]:
    """Every objective name, the knowledge objectives included."""
    return OBJECTIVES.list()


def build_objective(name: str, specials: SpecialIds, config: EncoderConfig | ModelConfig | None = None,
                    **options: Any) -> Objective:
    """Instantiate a registered objective. Objectives that own heads sized by the model (CLWR,
    CLPC, SOP/NSP, RTD) need the model's ``config``; the others ignore it."""
    cls = objective_class(name)
    options = objective_options(name, options)
    if "config" in inspect.signature(cls.__init__).parameters:
        if config is None:
            raise ConfigError(f"objective {name!r} owns heads sized by the model: pass config=model.config")
        return cls(specials, config, **options)
    return cls(specials, **options)


def objective_options(name: str, options: Mapping[str, Any], where: Optional[Where] = None) -> dict[str, Any]:
    """The options of objective ``name`` read as its typed options (:meth:`Objective.options`,
    made from its constructor's keyword-only parameters): an unknown option (with a close match),
    a wrong type, NaN or an infinite number, a missing required option, each an error naming
    ``where`` (by default ``objectives.<name>``) and the option."""
    cls = objective_class(name)
    where = where or Where(label="objectives.").key(name)
    fields = dataclasses.fields(cls.options())
    missing = [f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
               and f.name not in options]
    if missing:
        raise ConfigError(f"{where}: give {', '.join(missing)} (objective {name!r} has no default for "
                          f"{'it' if len(missing) == 1 else 'them'})")
    built = build(cls.options(), options, where, what=f"{name} option")
    return {key: getattr(built, key) for key in options}


class Mixture(Objective):
    """Several named objectives trained together (``mode="sum"``) or in turn (``"sample"``)."""

    name = "mixture"

    def __init__(self, objectives: Mapping[str, Objective], weights: Optional[Mapping[str, float]] = None,
                 mode: str = "sum"):
        super().__init__()
        if not objectives:
            raise ConfigError("a Mixture needs at least one objective")
        if mode not in MODES:
            raise ConfigError(f"Mixture mode={mode!r} must be one of {', '.join(MODES)}")
        for key in objectives:
            if "." in key or "/" in key or not key:
                raise ConfigError(f"objective name {key!r} must be non-empty and contain no '.' or '/'")
        weights = dict(weights or {})
        unknown = sorted(set(weights) - set(objectives))
        if unknown:
            raise ConfigError(f"weights given for unknown objective(s) {unknown}; objectives: {', '.join(objectives)}")
        self.weights = {key: coerce(weights.get(key, 1.0), POSITIVE, Where(label="objectives.").key(key).key("weight"))
                        for key in objectives}
        self.objectives = nn.ModuleDict(dict(objectives))
        self.mode = mode

    @classmethod
    def from_spec(cls, spec: Mapping[str, Mapping[str, Any]], specials: SpecialIds,
                  config: EncoderConfig | ModelConfig | None = None, mode: str = "sum") -> "Mixture":
        """Build from ``{name: {"weight": w, "objective": registered_name, **options}}``; the
        registered name defaults to ``name`` (so ``{"mlm": {}, "tlm": {"weight": 2}}`` works)."""
        objectives, weights = {}, {}
        for key, options in spec.items():
            options = dict(options or {})
            weights[key] = options.pop("weight", 1.0)
            kind = options.pop("objective", key)
            options = objective_options(kind, options, Where(label="objectives.").key(key))  # errors name the key
            objectives[key] = build_objective(kind, specials, config, **options)
        return cls(objectives, weights, mode)

    def choose(self, names: Optional[Sequence[str]] = None, generator: Optional[torch.Generator] = None) -> str:
        """Draw one objective name with probability ∝ its weight (among ``names`` if given)."""
        names = list(names or self.weights)
        probs = torch.tensor([self.weights[n] for n in names], dtype=torch.float64)
        return names[int(torch.multinomial(probs, 1, generator=generator))]

    def prepare(self, examples: Mapping[str, Sequence[Any]]) -> dict[str, torch.Tensor]:
        """``examples`` maps objective names to their raw examples. Sum mode prepares all of
        them (each must be present); sample mode prepares one, drawn by weight among those
        given (a loader may call :meth:`choose` first and pass only that one)."""
        unknown = sorted(set(examples) - set(self.weights))
        if unknown:
            raise ExampleError(f"examples for unknown objective(s) {unknown}; objectives: {', '.join(self.weights)}")
        if self.mode == "sum":
            missing = [n for n in self.weights if n not in examples]
            if missing:
                raise ExampleError(f"Mixture(mode='sum') needs examples for every objective; missing: {missing}")
            names = list(self.weights)
        else:
            if not examples:
                raise ExampleError("Mixture.prepare got no examples")
            names = [self.choose(list(examples))]
        batch = {}
        for name in names:
            for key, value in self.objectives[name].prepare(examples[name]).items():
                batch[f"{name}.{key}"] = value
        return batch

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        parts: dict[str, dict[str, torch.Tensor]] = {}
        for key, value in batch.items():
            name, _, sub = key.partition(".")
            if name not in self.objectives:
                raise ExampleError(f"batch key {key!r} belongs to no objective of this mixture "
                                   f"({', '.join(self.weights)})")
            parts.setdefault(name, {})[sub] = value
        if not parts:
            raise ExampleError("Mixture.forward got an empty batch")
        total, metrics, tokens = None, {}, 0
        for name, sub in parts.items():
            loss = self.objectives[name](model, sub)
            weighted = loss.value * (self.weights[name] if self.mode == "sum" else 1.0)
            total = weighted if total is None else total + weighted
            metrics.update({f"{name}/{k}": v for k, v in loss.metrics.items()})
            metrics.setdefault(f"{name}/loss", loss.value.detach())  # which objective a step drew, and its loss
            tokens += loss.tokens
        metrics["loss"] = total.detach()
        return Loss(total, metrics, tokens)
