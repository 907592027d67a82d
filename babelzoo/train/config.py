"""Training configuration: one typed dataclass, and YAML recipes that map onto it 1:1.

A recipe is a YAML mapping whose keys are :class:`TrainConfig` fields::

    # babelzoo/recipes/mlm_tiny.yaml
    model: xlmr_tiny
    tokenizer: {vocab_size: 4000}
    objectives: {mlm: {}}
    data:
      mlm:
        - {kind: text, path: corpus/de.txt, lang: de}
        - {kind: text, path: corpus/fr.txt, lang: fr}
    batch_size: 32
    lr: 1.0e-3

``load_recipe("mlm_tiny.yaml", ["lr=5e-4", "model_overrides.dropout=0.0"])`` reads it, applies
``--set``-style overrides (values parsed as YAML; dotted keys reach into dict fields) and
validates every value. An unknown key is an error naming the file, the line, a close match and
every valid key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from ..typed import Loaded, Seed, Where, build, check_fields, load_config, read_options, read_mapping, set_keys, unknown_key
from ..zoo.config import ConfigError

OPTIMIZERS = ("lamb", "adamw")
SCHEDULES = ("linear", "cosine", "inverse_sqrt", "constant")
PRECISIONS = ("fp32", "bf16", "fp16")
STRATEGIES = ("auto", "none", "ddp", "fsdp")
DEVICES = ("auto", "cpu", "cuda")
MIXTURES = ("sum", "sample")
CHECKPOINT_FORMATS = ("full", "sharded")


@dataclass
class TrainConfig:
    """Everything a pre-training run needs, with defaults that train a tiny model on a CPU.

    Batches: ``batch_size`` examples per micro-batch on each rank, ``grad_accum`` micro-batches
    per optimizer step; the global batch is ``batch_size * grad_accum * world_size``. Training
    length is ``max_steps`` optimizer steps; each dataset cycles through seeded epochs.
    ``resume``: continue from the newest valid checkpoint in ``output_dir`` (a fresh directory
    simply starts); with ``resume: false`` a directory that already holds checkpoints is an
    error rather than silently mixed with a new run.

    The ``model``/``model_overrides``/``init``/``tokenizer``/``objectives``/``mixture``/``data`` fields
    are read by ``babelzoo pretrain`` to build the run (see :mod:`babelzoo.train.cli` for their
    layout); :class:`~babelzoo.train.Trainer` itself takes those parts as Python objects and
    ignores them.
    """

    # --- what to train (used by the command line) ---------------------------------------------
    model: str = "xlmr_tiny"
    model_overrides: dict = field(default_factory=dict)
    knowledge: dict = field(default_factory=dict)
    # start from pretrained weights: {pretrained: true | DIR, layers: [0, 2, ...]} (babelzoo.train.cli.InitSpec)
    init: dict = field(default_factory=dict)
    tokenizer: dict = field(default_factory=dict)
    objectives: dict = field(default_factory=dict)
    mixture: str = "sum"
    data: dict = field(default_factory=dict)
    # the fine-tuning task of `babelzoo finetune` (babelzoo.finetune.recipe.TaskSpec)
    task: dict = field(default_factory=dict)
    # the languages the run is for: a data source that picks its own (``languages: auto``, as
    # ``adaptation_pairs`` does) takes these instead, e.g. ``--set languages=[bre,eus]``
    languages: Optional[list[str]] = None
    # after training, write the final model and its tokenizer to output_dir/<model_dir>, loadable
    # by babelzoo.from_pretrained, with a model card (README.md) and what each source records
    model_dir: Optional[str] = None
    # --- run ------------------------------------------------------------------------------------
    output_dir: str = "runs/default"
    seed: Seed = 0
    max_steps: int = 1000
    # a time budget besides max_steps (None: none), on ``budget_clock``: "wall", or "cpu" (the
    # process's CPU time over all threads, which a busy machine does not shrink); when it runs
    # out, the run evaluates (given an evaluator), checkpoints and stops
    max_seconds: Optional[float] = None
    budget_clock: str = "wall"
    device: str = "auto"
    # --- batches --------------------------------------------------------------------------------
    batch_size: int = 32
    grad_accum: int = 1
    num_workers: int = 0
    # --- optimisation ---------------------------------------------------------------------------
    optimizer: str = "lamb"
    lr: float = 1e-3
    weight_decay: float = 0.01
    betas: tuple[float, ...] = (0.9, 0.999)
    eps: float = 1e-6
    schedule: str = "linear"
    warmup_steps: int = 0
    min_lr_ratio: float = 0.0
    max_grad_norm: float = 1.0
    # layer-wise learning-rate decay (ELECTRA, Clark et al. 2020): layer l of L gets
    # lr · decay^(L + 1 − l), the embeddings (l = 0) the smallest, the heads (l = L + 1) lr itself
    layer_lr_decay: float = 1.0
    # --- evaluation and model selection (a Trainer given an evaluator) --------------------------
    eval_every: int = 0        # evaluate every N steps, and always at the end (0: only at the end)
    patience: int = 0          # stop after N evaluations without a new best (0: never stop early)
    # --- precision and distribution -------------------------------------------------------------
    precision: str = "fp32"
    distributed: str = "auto"
    find_unused_parameters: bool = True
    # --- checkpoints ----------------------------------------------------------------------------
    checkpoint_every: int = 500
    keep_checkpoints: int = 3
    resume: bool = True
    # full: rank 0 gathers the model and optimizer into one safetensors file each; sharded: every
    # rank writes its own slices through torch.distributed.checkpoint (no gathering, no pickle),
    # and a run of any number of processes resumes from them (babelzoo.train.checkpoint)
    checkpoint_format: str = "full"
    # --- logging --------------------------------------------------------------------------------
    log_every: int = 10
    progress: bool = True
    tensorboard: bool = True
    # experiment trackers (babelzoo.train.trackers): tensorboard, mlflow, wandb; when given, they
    # replace the tensorboard switch, and a tracker whose package is missing is an error
    loggers: Optional[list[str]] = None
    measure_mfu: bool = True
    peak_flops: Optional[float] = None
    # --- runtime --------------------------------------------------------------------------------
    # CPU: keep large freed buffers in the process between steps (babelzoo.train.allocator). It
    # sets glibc's malloc options for the whole process, so it is off unless a recipe, --set or
    # the caller turns it on.
    keep_cpu_buffers: bool = False
    # torch.compile the model's forward from the second step on (the first runs eagerly and counts
    # the FLOPs); a compile takes tens of seconds, and repays it on GPUs, not on a 2-core CPU
    compile: bool = False
    # CPU intra-op threads for the run (null: as many as make a product of the model's width
    # fastest on the cores this process gets, at most torch's setting; babelzoo._threads)
    threads: Optional[int] = None

    def __post_init__(self) -> None:
        check_fields(self)
        choices = {"optimizer": OPTIMIZERS, "schedule": SCHEDULES, "precision": PRECISIONS,
                   "distributed": STRATEGIES, "device": DEVICES, "mixture": MIXTURES, "budget_clock": ("wall", "cpu"),
                   "checkpoint_format": CHECKPOINT_FORMATS}
        for name, options in choices.items():
            if getattr(self, name) not in options:
                raise ConfigError(f"TrainConfig.{name}={getattr(self, name)!r} must be one of "
                                  f"{', '.join(map(repr, options))}")
        for name in ("max_steps", "batch_size", "grad_accum", "checkpoint_every", "keep_checkpoints", "log_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"TrainConfig.{name}={getattr(self, name)!r} must be at least 1")
        if self.loggers is not None:
            from .trackers import TRACKERS

            unknown = [name for name in self.loggers if name not in TRACKERS]
            if unknown:
                raise ConfigError(f"TrainConfig.loggers: unknown logger(s) {unknown}; known: {', '.join(sorted(TRACKERS))}")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"TrainConfig.threads={self.threads!r} must be at least 1 (or null: chosen per run)")
        for name in ("num_workers", "warmup_steps", "eval_every", "patience"):
            if getattr(self, name) < 0:
                raise ConfigError(f"TrainConfig.{name}={getattr(self, name)!r} must be non-negative")
        if self.max_seconds is not None and not self.max_seconds > 0:
            raise ConfigError(f"TrainConfig.max_seconds={self.max_seconds!r} must be positive (or null: no budget)")
        for name in ("lr", "eps"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"TrainConfig.{name}={getattr(self, name)!r} must be positive")
        if self.weight_decay < 0 or self.max_grad_norm < 0:
            raise ConfigError("TrainConfig.weight_decay and max_grad_norm must be non-negative "
                              "(max_grad_norm=0 disables clipping)")
        if not 0.0 < self.layer_lr_decay <= 1.0:
            raise ConfigError(f"TrainConfig.layer_lr_decay={self.layer_lr_decay!r} must be in (0, 1] (1: no decay)")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ConfigError(f"TrainConfig.min_lr_ratio={self.min_lr_ratio!r} must be in [0, 1]")
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise ConfigError(f"TrainConfig.betas={self.betas!r} must be two numbers in [0, 1)")
        if self.peak_flops is not None and not self.peak_flops > 0:
            raise ConfigError(f"TrainConfig.peak_flops={self.peak_flops!r} must be positive (FLOP/s) or null")

    # --- round trip -----------------------------------------------------------------------------
    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["betas"] = list(self.betas)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "", lines: Optional[Mapping[str, int]] = None
                  ) -> "TrainConfig":
        """From a recipe mapping; ``where`` (the file) and ``lines`` (:func:`babelzoo.typed.key_lines`)
        put the file and line in every error."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where or 'recipe'}: expected a mapping of TrainConfig keys, got {type(data).__name__}")
        return build(cls, data, Where(file=where or None, lines=lines, label="TrainConfig."), what="TrainConfig")

    def replace(self, **changes: Any) -> "TrainConfig":
        for key in changes:
            if key not in self.field_names():
                raise ConfigError(unknown_key_message(key, self.field_names()))
        return dataclasses.replace(self, **changes)


def unknown_key_message(key: str, valid: Sequence[str]) -> str:
    return unknown_key(key, valid, "TrainConfig")


# --- recipes -----------------------------------------------------------------------------------

def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Apply ``key=value`` strings to a recipe mapping (:func:`babelzoo.typed.set_keys`): values
    parsed as YAML (``lr=5e-4``, ``betas=[0.9,0.98]``, ``progress=false``); ``a.b.c=v`` sets a
    key inside the section ``a`` (``model_overrides.hidden_size=64``,
    ``objectives.mlm.masking.probability=0.2``)."""
    return set_keys(TrainConfig, data, overrides, "TrainConfig")


def read_recipe(path: str | Path) -> tuple[dict[str, Any], dict[str, int]]:
    """The raw mapping of a YAML recipe and the line of each key path (:func:`babelzoo.typed.read_yaml`:
    plain, bounded data in UTF-8)."""
    return read_mapping(path, "TrainConfig", "recipe")


def load_recipe(path: str | Path, overrides: Sequence[str] = ()) -> TrainConfig:
    """Read a YAML recipe, apply ``key=value`` overrides, validate, return a TrainConfig."""
    return read_recipe_config(path, overrides).config


def read_recipe_config(path: str | Path, overrides: Sequence[str] = ()) -> Loaded:
    """:func:`load_recipe`'s TrainConfig, and where each of its keys was read, for the sections
    an upper layer reads (a fine-tuning ``task``): the recipe read by
    :func:`babelzoo.typed.load_config`, the loader of every config file."""
    cfg, where = load_config(TrainConfig, path, overrides, what="TrainConfig", kind="recipe")
    # the objectives' and the tokenizer's options too, before any data is read
    if cfg.objectives:
        from ..objectives.mixture import check_spec

        check_spec(cfg.objectives, where.key("objectives"))
    if "vocab_size" in cfg.tokenizer:  # sentencepiece training options
        from ..datasets.spm import SentencePieceTokenizer

        read_options(SentencePieceTokenizer.train, cfg.tokenizer, where.key("tokenizer"), "sentencepiece",
                     skip=("corpus",))
    return Loaded(cfg, where)


def recipe_path(name: str | Path) -> Path:
    """A recipe file path, or the name of a recipe shipped in ``babelzoo/recipes``."""
    path = Path(name)
    if path.is_file():
        return path
    if path.is_dir():
        raise ConfigError(f"{name}: a folder; a recipe is a YAML file (or the name of a shipped recipe)")
    shipped = Path(__file__).resolve().parents[1] / "recipes"
    candidate = shipped / (path.name if path.suffix else f"{path.name}.yaml")
    if candidate.is_file():
        return candidate
    known = sorted(p.stem for p in shipped.glob("*.yaml"))
    raise ConfigError(f"{name}: no such recipe file, and not a shipped recipe (shipped: {', '.join(known) or 'none'})")
