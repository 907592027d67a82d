"""What every pre-training objective is: an ``nn.Module`` that owns its heads, prepares its
batches from raw examples (in DataLoader workers) and computes a :class:`Loss`."""

from __future__ import annotations

import abc
import inspect
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

import torch
from torch import nn

from ..errors import InputError
from ..registry import Registry
from ..options import options_class


@dataclass
class Loss:
    """``value``: the scalar to minimise; ``metrics``: values to log (accuracy, counts), as
    detached 0-dim tensors or numbers; ``tokens``: how many input tokens the step processed (for
    throughput), a tensor or an int. The trainer reads tensors back only at its logging interval,
    so an objective should not call ``.item()`` or ``float()`` on device values."""

    value: torch.Tensor
    metrics: dict[str, torch.Tensor | float] = field(default_factory=dict)
    tokens: torch.Tensor | int = 0


class Objective(nn.Module, abc.ABC):
    """Base class. Subclasses set ``name`` and implement :meth:`prepare` and :meth:`forward`.

    ``prepare(examples)`` turns a list of raw examples (token-id lists, translation pairs...)
    into a dict of tensors; it runs in DataLoader workers and must be deterministic given the
    torch RNG state. ``forward(model, batch)`` runs the encoder and the objective's heads.
    ``consumes`` names the example type of :data:`babelzoo.datasets.sources.EXAMPLE_TYPES` it
    prepares, so a recipe's data sources are checked against it before training.
    """

    name: ClassVar[str] = ""
    consumes: ClassVar[str] = ""
    # What the run gives this objective besides the recipe's options, by the option each goes
    # to (RUN_INPUTS); ``babelzoo pretrain`` gives exactly these and nothing else.
    from_run: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def options(cls) -> type:
        """The dataclass of this objective's options (what a recipe's ``objectives.<name>`` may
        set): one field per keyword-only parameter of its constructor, typed by its annotation,
        with its default; made once (:func:`babelzoo.options.options_class`). An objective may
        declare its own by overriding this."""
        return options_class(cls.__init__, cls.name or cls.__name__)

    @abc.abstractmethod
    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        """Collate raw examples into a batch of tensors."""

    @abc.abstractmethod
    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        """Compute the loss of ``model`` on ``batch``."""


# this layer's objectives are its built-in entry points, each found in its module when first named
# (the path an installed package's objective takes); those of the layers above (the knowledge
# objectives) and of installed packages register through the entry-point group
BUILTIN_OBJECTIVES = {name: f"babelzoo.objectives.{module}" for name, module in {
    "clm": "clm", "clmlm": "clmlm", "clpc": "clpc", "clwr": "clwr", "distill_mlm": "distill_mlm",
    "distill_sentence": "distill_sentence", "glm": "glm", "infersent": "infersent", "itc": "itc", "itm": "itm",
    "mass": "mass", "mbart_denoising": "mbart_denoising", "mlm": "mlm", "mlm_conditioned": "mlm_conditioned",
    "mmlm": "mlm", "nsp": "sop", "plm": "plm", "quick_thoughts": "quick_thoughts", "rtd": "rtd", "sbo": "sbo",
    "segment_clm": "segment_clm", "segment_mlm": "segment_mlm", "sequence_classification": "classification",
    "skip_thoughts": "skip_thoughts", "sop": "sop", "span_corruption": "span_corruption",
    "text_infilling": "text_infilling", "tlm": "tlm", "token_classification": "classification",
    "translation": "translation", "translation_ranking": "translation_ranking", "unilm": "unilm", "xae": "xae",
    "xlco": "xlco"
}.items()}
OBJECTIVES: Registry[type[Objective]] = Registry("objective", group="babelzoo.objectives",
                                                 builtin=BUILTIN_OBJECTIVES, listed_by="babelzoo list objectives")

# What a run can give an objective that declares it in ``from_run``.
RUN_INPUTS = {
    "word_starts": "the tokenizer's word-start table (whole-word and span masking count words), unless the "
                   "recipe sets word_starts",
    "teacher": "the model the teacher option names, when it names a zoo entry: loaded once for the run, shared "
               "with the run's tokenizer and initial weights when they come from the same model",
}


def register_objective(cls: type[Objective]) -> type[Objective]:
    """Class decorator: register under ``cls.name``."""
    if not cls.name:
        raise InputError(f"{cls.__name__} must set a non-empty `name` to be registered")
    if not cls.consumes:
        raise InputError(f"{cls.__name__} must set `consumes`, the example type it prepares, to be registered")
    options = inspect.signature(cls.__init__).parameters
    for item in cls.from_run:
        if item not in RUN_INPUTS:
            raise InputError(f"{cls.__name__}.from_run: {item!r} is not something a run gives; it gives "
                             f"{', '.join(RUN_INPUTS)}")
        if getattr(options.get(item), "kind", None) is not inspect.Parameter.KEYWORD_ONLY:
            raise InputError(f"{cls.__name__}.from_run names {item!r}, which is not a keyword-only parameter of "
                             "its constructor")
    OBJECTIVES.register(cls, name=cls.name)
    return cls
