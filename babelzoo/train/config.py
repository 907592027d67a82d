"""Training configuration: one typed dataclass (its optimisation, checkpoint and logging settings
in groups of their own), and YAML recipes that map onto it 1:1.

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
    optim: {lr: 1.0e-3}

``load_recipe("mlm_tiny.yaml", ["optim.lr=5e-4", "model_overrides.dropout=0.0"])`` reads it, applies
``--set``-style overrides (values parsed as YAML; dotted keys reach into dict fields) and
validates every value. An unknown key is an error naming the file, the line, a close match and
every valid key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import InitVar, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Mapping, Optional, Sequence

from .._files import inside_folder
from ..config_files import Loaded, load_config, read_mapping, set_keys
from ..options import read_options
from ..typed import Seed, Where, build, check_fields, coerce, unknown_key
from ..zoo.config import ConfigError
from .settings import MOVED, CheckpointConfig, LoggingConfig, OptimConfig, at_least_one, nest_flat_keys, one_of

PRECISIONS = ("fp32", "bf16", "fp16")
STRATEGIES = ("auto", "none", "ddp", "fsdp")
DEVICES = ("auto", "cpu", "cuda")
MIXTURES = ("sum", "sample")


@dataclass
class TrainConfig:
    """Everything a pre-training run needs, with defaults that train a tiny model on a CPU.

    Batches: ``batch_size`` examples per micro-batch on each rank, ``grad_accum`` micro-batches
    per optimizer step; the global batch is ``batch_size * grad_accum * world_size``. Training
    length is ``max_steps`` optimizer steps; each dataset cycles through seeded epochs. How
    parameters move is ``optim`` (:class:`OptimConfig`), when checkpoints are written and whether
    a run resumes from them ``checkpoints`` (:class:`CheckpointConfig`), what it reports
    ``logging`` (:class:`LoggingConfig`); the flat names of earlier versions (``lr``,
    ``checkpoint_every``, ...) are read into them (:data:`MOVED`).

    The ``model``/``model_overrides``/``init``/``tokenizer``/``objectives``/``mixture``/``data`` fields
    are read by ``babelzoo pretrain`` to build the run (see :mod:`babelzoo.train.run` for their
    layout); :class:`~babelzoo.train.Trainer` itself takes those parts as Python objects and
    ignores them. ``knowledge``, ``init``, ``tokenizer``, ``objectives`` and ``data`` are kept as
    written (what ``--set`` reaches into and a run's identity holds) and read once, whenever a
    TrainConfig is built, into ``parts`` (:class:`RecipeParts`: :class:`KnowledgeSpec`,
    :class:`InitSpec`, :class:`TokenizerSpec`, an :class:`ObjectiveSpec` and an
    :class:`ObjectiveData` per objective), so that a mistake in them is named with its file and
    line when the recipe is loaded; the run's builders read ``parts``. Change a section with
    :meth:`replace`, which reads it again.
    """

    # --- what to train (used by the command line) ---------------------------------------------
    model: str = "xlmr_tiny"
    model_overrides: dict = field(default_factory=dict)
    knowledge: dict = field(default_factory=dict)
    # start from pretrained weights: {pretrained: true | DIR, layers: [0, 2, ...]} (InitSpec)
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
    # a user's own translation pairs, DIR/<code>.tsv, for every source that reads them
    # (``adaptation_pairs``), e.g. ``--set pairs_dir=my_pairs``
    pairs_dir: Optional[str] = None
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
    # --- optimisation, checkpoints, logging -----------------------------------------------------
    optim: OptimConfig = field(default_factory=OptimConfig)
    checkpoints: CheckpointConfig = field(default_factory=CheckpointConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    # --- evaluation and model selection (a Trainer given an evaluator) --------------------------
    eval_every: int = 0        # evaluate every N steps, and always at the end (0: only at the end)
    patience: int = 0          # stop after N evaluations without a new best (0: never stop early)
    # --- precision and distribution -------------------------------------------------------------
    precision: str = "fp32"
    distributed: str = "auto"
    find_unused_parameters: bool = True
    # --- runtime --------------------------------------------------------------------------------
    # CPU: keep large freed buffers in the process between steps (babelzoo.train.allocator), for
    # the run only: glibc's malloc options are set when it starts and put back when it ends. Off
    # unless a recipe, --set or the caller turns it on.
    keep_cpu_buffers: bool = False
    # torch.compile the model's forward from the second step on (the first runs eagerly and counts
    # the FLOPs); a compile takes tens of seconds, and repays it on GPUs, not on a 2-core CPU
    compile: bool = False
    # CPU intra-op threads for the run (null: as many as make a product of the model's width
    # fastest on the cores this process gets, at most torch's setting; babelzoo._threads)
    threads: Optional[int] = None
    # where the recipe was read (file, line of each key): the errors of its sections name them
    where: InitVar[Optional[Where]] = None

    def __post_init__(self, where: Optional[Where] = None) -> None:
        check_fields(self)
        self.parts = RecipeParts.read(self, where or Where(label="TrainConfig."))
        one_of(self, "TrainConfig", precision=PRECISIONS, distributed=STRATEGIES, device=DEVICES, mixture=MIXTURES,
                budget_clock=("wall", "cpu"))
        at_least_one(self, "TrainConfig", "max_steps", "batch_size", "grad_accum")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"TrainConfig.threads={self.threads!r} must be at least 1 (or null: chosen per run)")
        for name in ("num_workers", "eval_every", "patience"):
            if getattr(self, name) < 0:
                raise ConfigError(f"TrainConfig.{name}={getattr(self, name)!r} must be non-negative")
        if self.max_seconds is not None and not self.max_seconds > 0:
            raise ConfigError(f"TrainConfig.max_seconds={self.max_seconds!r} must be positive (or null: no budget)")
        if self.model_dir and not inside_folder(self.model_dir):
            raise ConfigError(f"TrainConfig.model_dir={self.model_dir!r} must name a folder inside output_dir, "
                              "where the final model is written (a relative path without '..', e.g. model)")

    # --- the flat layout of earlier versions ------------------------------------------------------
    moved_keys: ClassVar[Mapping[str, str]] = MOVED

    @staticmethod
    def nest_flat_keys(data: Mapping[str, Any], lines: Optional[Mapping[str, int]] = None, path: str = ""
                       ) -> tuple[dict[str, Any], Optional[dict[str, int]]]:
        return nest_flat_keys(data, lines, path)

    # --- round trip -----------------------------------------------------------------------------
    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["optim"]["betas"] = list(self.optim.betas)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "", lines: Optional[Mapping[str, int]] = None
                  ) -> "TrainConfig":
        """From a recipe mapping (or a saved config, in the flat layout of earlier versions too);
        ``where`` (the file) and ``lines`` (:func:`babelzoo.yaml_files.key_lines`) put the file and
        line in every error."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where or 'recipe'}: expected a mapping of TrainConfig keys, got {type(data).__name__}")
        return build(cls, data, Where(file=where or None, lines=lines, label="TrainConfig."), what="TrainConfig")

    def replace(self, **changes: Any) -> "TrainConfig":
        """A copy with ``changes``; a mapping given for a group changes only the settings it names
        (``cfg.replace(optim={"lr": 1e-4}, logging={"progress": False})``)."""
        for key in changes:
            if key not in self.field_names():
                raise ConfigError(unknown_key_message(key, self.field_names()))
        for group in ("optim", "checkpoints", "logging"):
            if isinstance(changes.get(group), Mapping):
                current = getattr(self, group)
                unknown = [k for k in changes[group] if k not in {f.name for f in fields(current)}]
                if unknown:
                    raise ConfigError(unknown_key(unknown[0], [f.name for f in fields(current)],
                                                  f"TrainConfig.{group}"))
                changes[group] = dataclasses.replace(current, **changes[group])
        return dataclasses.replace(self, **changes)


def unknown_key_message(key: str, valid: Sequence[str]) -> str:
    return unknown_key(key, valid, "TrainConfig")


# --- the typed sections of a recipe -----------------------------------------------------------

@dataclass(frozen=True)
class InitSpec:
    """A recipe's ``init``: the model starts from pretrained weights rather than random ones.

    ``pretrained``: ``true`` for the ``model`` entry's published weights, or a checkpoint (a
    directory or Hub id) that fits ``model`` with ``model_overrides`` (its ``vocab_size``
    included: the weights fix the vocabulary), loaded as
    ``create_model(model, pretrained=..., **model_overrides)`` loads it; ``layers``: keep only
    these encoder layers, in order (:func:`~babelzoo.compression.prune_layers`; DistilBERT
    initialises its student with one teacher layer in two); ``intermediate_size``: narrow every
    feed-forward layer to this many neurons, those of largest weight magnitude
    (:func:`~babelzoo.compression.prune_ffn`); ``freeze``: parameter names (shell
    patterns, as ``model.named_parameters()`` spells them) that keep their initial values, with no
    gradient and no optimizer state (a student that keeps its teacher's word embeddings);
    ``freeze_pieces_of``: languages (as the run's sources name them, e.g. ``[en]``) whose pieces
    keep their word-embedding rows: every piece the run's text of these languages uses gets no
    gradient (with ``weight_decay: 0`` its row stays exactly as it was), so training moves only
    the pieces of the other languages; ``train_rows_from``: an id from which on the word-embedding
    rows train while every row before it keeps its value (the pieces a vocabulary extension
    appended, :func:`~babelzoo.compression.add_pieces`, learn; the model's own stay as they were)::

        model: multilingual_e5_small
        init: {pretrained: true, layers: [0, 2, 4, 6, 8, 10], freeze: [embeddings.word.*]}

    A resumed run takes its weights from the checkpoint; ``init`` is part of the run's identity.
    """

    pretrained: bool | str = True
    layers: Optional[list[int]] = None
    intermediate_size: Optional[int] = None
    freeze: list[str] = field(default_factory=list)
    freeze_pieces_of: list[str] = field(default_factory=list)
    train_rows_from: Optional[int] = None

    def __post_init__(self) -> None:
        check_fields(self, "init")
        if self.pretrained is False:
            raise ConfigError("init.pretrained=False starts from nothing: remove init for random weights")
        if self.train_rows_from is not None and self.train_rows_from < 1:
            raise ConfigError(f"init.train_rows_from={self.train_rows_from}: an id of at least 1 (rows before it "
                              "stay fixed)")


def read_init(value: Mapping[str, Any], where: Where) -> Optional[InitSpec]:
    """The recipe's ``init`` as an :class:`InitSpec` (None when the recipe has none)."""
    return build(InitSpec, value, where, what="init") if value else None


@dataclass(frozen=True)
class TokenizerSpec:
    """A recipe's ``tokenizer``: ``{from_model: NAME}``, the tokenizer of a zoo entry with
    pretrained weights; ``{path: DIR}``, a saved tokenizer; or sentencepiece training options
    (``{vocab_size: 8000, model_type: unigram, alpha: 0.3}``, read as the typed options of
    :meth:`~babelzoo.datasets.spm.SentencePieceTokenizer.train`), held in ``train``."""

    from_model: Optional[str] = None
    path: Optional[str] = None
    train: dict = field(default_factory=dict)


def read_tokenizer(value: Mapping[str, Any], where: Where) -> TokenizerSpec:
    """The recipe's ``tokenizer`` as a :class:`TokenizerSpec`; errors name ``where`` and the key."""
    for key in ("from_model", "path"):
        if key in value:
            extra = sorted(set(value) - {key})
            if extra:
                use = "no other option is used" if key == "from_model" else "no training options are used"
                raise ConfigError(f"{where}: with {key}, {use}; remove {extra}")
            return build(TokenizerSpec, {key: value[key]}, where, what="tokenizer")
    if not value:
        return TokenizerSpec()
    from ..datasets.spm import SentencePieceTokenizer

    return TokenizerSpec(train=read_options(SentencePieceTokenizer.train, value, where, "sentencepiece",
                                            skip=("corpus",)))


@dataclass(frozen=True)
class ObjectiveSpec:
    """One entry of a recipe's ``objectives``: the registered ``objective`` (by default the
    entry's own name), its ``weight`` in a mixture and its ``options``, read as the objective's
    typed options (:meth:`~babelzoo.objectives.base.Objective.options`)."""

    objective: str
    weight: float = 1.0
    options: dict = field(default_factory=dict)


def read_objectives(value: Mapping[str, Any], where: Where) -> dict[str, ObjectiveSpec]:
    """The recipe's ``objectives`` as ``{name: ObjectiveSpec}``: each objective exists, its
    weight is positive and its options are its typed options, each error naming ``where``, the
    entry and the option."""
    from ..objectives.mixture import POSITIVE, objective_options

    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected a mapping of objectives, got {type(value).__name__}")
    out = {}
    for name, entry in value.items():
        at = where.key(str(name))
        if entry is not None and not isinstance(entry, Mapping):
            raise ConfigError(f"{at}={entry!r} must be a mapping of options")
        options = dict(entry or {})
        weight = coerce(options.pop("weight", 1.0), POSITIVE, at.key("weight"))
        kind = coerce(options.pop("objective", str(name)), str, at.key("objective"))
        out[str(name)] = ObjectiveSpec(kind, weight, objective_options(kind, options, at))
    return out


@dataclass
class ObjectiveData:
    """One objective's entry in a recipe's ``data``: its ``sources`` (data sources of
    :mod:`babelzoo.datasets.sources`, parsed), sampled with XLM's q ∝ p^α when ``alpha`` is
    given, else uniformly over all their examples. Written as a list of sources, or as
    ``{alpha: a, sources: [...]}``."""

    sources: list
    alpha: Optional[float] = None


def read_data(value: Mapping[str, Any], where: Where) -> dict[str, ObjectiveData]:
    """The recipe's ``data`` as ``{objective: ObjectiveData}``, every source parsed (nothing is
    read yet); errors name ``where``, the objective and the source."""
    from ..datasets.sources import parse_source

    out = {}
    for name, entry in value.items():
        at, alpha = where.key(str(name)), None
        if isinstance(entry, Mapping):
            unknown = sorted(set(entry) - {"sources", "alpha"})
            if unknown or "sources" not in entry:
                raise ConfigError(f"{at}: expected a list of sources or {{alpha: a, sources: [...]}}, "
                                  f"got keys {sorted(entry)}")
            alpha, entry, at = coerce(entry.get("alpha"), Optional[float], at.key("alpha")), entry["sources"], \
                at.key("sources")
        if not isinstance(entry, list) or not entry:
            raise ConfigError(f"{at}: expected a non-empty list of sources, got {entry!r}")
        out[str(name)] = ObjectiveData([parse_source(spec, at.key(i)) for i, spec in enumerate(entry)], alpha)
    return out


@dataclass(frozen=True)
class KnowledgeSpec:
    """A recipe's ``knowledge:`` part: ERNIE fusion over ``kb`` in ``fusion_layers`` (default:
    the upper half of the encoder), an entity table of width ``entity_dim``, initialised from
    ``entity_embeddings`` (a folder written by ``babelzoo kb train-kge --out``) when given."""

    kb: str
    fusion_layers: Optional[list[int]] = None
    entity_dim: Optional[int] = None
    entity_embeddings: Optional[str] = None
    freeze_entities: bool = True
    languages: Optional[list[str]] = None

    def __post_init__(self) -> None:
        check_fields(self, "knowledge")


def read_knowledge(value: Mapping[str, Any], where: Where) -> Optional[KnowledgeSpec]:
    """The recipe's ``knowledge`` as a :class:`KnowledgeSpec` (None when the recipe has none);
    the knowledge layer attaches it (:func:`babelzoo.knowledge.attach.attach_from_recipe`)."""
    return build(KnowledgeSpec, value, where, what="knowledge") if value else None


@dataclass(frozen=True)
class RecipeParts:
    """A recipe's sections, typed once when its :class:`TrainConfig` is built (a mistake in one
    is named with its file and line then) and handed as these objects to whatever builds the
    run; the TrainConfig keeps the mappings as written, which ``--set`` reaches into and a run's
    identity holds. ``data``'s sources are parsed, not read: a build works on its own copy.
    ``where`` is where the recipe was read, for the build's own errors."""

    init: Optional[InitSpec]
    tokenizer: TokenizerSpec
    knowledge: Optional[KnowledgeSpec]
    objectives: dict[str, ObjectiveSpec]
    data: dict[str, ObjectiveData]
    where: Where = Where()  # where the recipe was read: the build's own errors name the line too

    @classmethod
    def read(cls, cfg: TrainConfig, where: Where) -> "RecipeParts":
        return cls(where=where, init=read_init(cfg.init, where.key("init")),
                   tokenizer=read_tokenizer(cfg.tokenizer, where.key("tokenizer")),
                   knowledge=read_knowledge(cfg.knowledge, where.key("knowledge")),
                   objectives=read_objectives(cfg.objectives, where.key("objectives")),
                   data=read_data(cfg.data, where.key("data")))


# --- recipes -----------------------------------------------------------------------------------

def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Apply ``key=value`` strings to a recipe mapping (:func:`babelzoo.config_files.set_keys`): values
    parsed as YAML (``lr=5e-4``, ``betas=[0.9,0.98]``, ``progress=false``); ``a.b.c=v`` sets a
    key inside the section ``a`` (``model_overrides.hidden_size=64``,
    ``objectives.mlm.masking.probability=0.2``)."""
    return set_keys(TrainConfig, data, overrides, "TrainConfig")


def read_recipe(path: str | Path) -> tuple[dict[str, Any], dict[str, int]]:
    """The raw mapping of a YAML recipe and the line of each key path (:func:`babelzoo.yaml_files.read_yaml`:
    plain, bounded data in UTF-8)."""
    return read_mapping(path, "TrainConfig", "recipe")


def load_recipe(path: str | Path, overrides: Sequence[str] = ()) -> TrainConfig:
    """Read a YAML recipe, apply ``key=value`` overrides, validate, return a TrainConfig."""
    return read_recipe_config(path, overrides).config


def read_recipe_config(path: str | Path, overrides: Sequence[str] = ()) -> Loaded:
    """:func:`load_recipe`'s TrainConfig, and where each of its keys was read, for the sections
    an upper layer reads (a fine-tuning ``task``): the recipe read by
    :func:`babelzoo.config_files.load_config`, the loader of every config file."""
    return load_config(TrainConfig, path, overrides, what="TrainConfig", kind="recipe")


def recipe_path(name: str | Path) -> Path:
    """A recipe file path, or the name of a recipe shipped in ``babelzoo/recipes``."""
    from ..registry import choices_hint

    path = Path(name)
    if path.is_file():
        return path
    if path.is_dir():
        raise ConfigError(f"{name}: a folder; a recipe is a YAML file (or the name of a shipped recipe)")
    if len(path.parts) > 1:
        raise ConfigError(f"{name}: no such recipe file")
    shipped = Path(__file__).resolve().parents[1] / "recipes"
    candidate = shipped / (path.name if path.suffix else f"{path.name}.yaml")
    if candidate.is_file():
        return candidate
    known = sorted(p.stem for p in shipped.glob("*.yaml"))
    hint = choices_hint(path.stem if path.suffix in (".yaml", ".yml") else path.name, known, "shipped recipe",
                        listed_by="babelzoo list recipes")
    raise ConfigError(f"unknown recipe {str(name)!r}: no such file, nor a shipped recipe{hint}")
