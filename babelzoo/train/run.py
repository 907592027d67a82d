"""A run built from a recipe: :func:`build_run` makes the :class:`Run` (model, objectives, data,
tokenizer and the sources read) that ``babelzoo pretrain`` (:mod:`babelzoo.train.cli`), the demo
and the benchmarks train with the :class:`~babelzoo.train.trainer.Trainer`.

A recipe is a :class:`~babelzoo.train.config.TrainConfig` in YAML, read by the one loader of
config files (:func:`babelzoo.config_files.load_config`). Besides the training settings, these fields
describe what to train; each is typed when the recipe loads (a wrong key or type is an error
naming the file, the line and the key):

``model`` / ``model_overrides``
    a registered architecture and changes to its config. ``vocab_size`` and ``pad_token_id``
    are set from the tokenizer unless given.
``knowledge``
    ``{kb: cldr, fusion_layers: [1], entity_dim: 32}``: ERNIE fusion over a knowledge base
    attached to the model (:func:`babelzoo.knowledge.attach_knowledge`), for objectives such as
    ``dea`` that read its entities (:class:`~babelzoo.train.config.KnowledgeSpec`).
``init``
    ``{pretrained: true, layers: [0, 2, 4, 6, 8, 10]}``: start ``model`` from its published
    weights (or ``pretrained: DIR``, a checkpoint that fits it), keeping only the listed encoder
    layers when ``layers`` is given and keeping the parameters ``freeze`` names fixed
    (:class:`~babelzoo.train.config.InitSpec`); a distilled student starts from its teacher.
``tokenizer``
    ``{from_model: NAME}`` for the tokenizer of a zoo entry with pretrained weights,
    ``{path: DIR}`` to load a saved tokenizer, or sentencepiece training options
    (``{vocab_size: 8000, model_type: unigram, alpha: 0.3}``) to train one on the text of every
    source; it is saved in ``<output_dir>/tokenizer`` and reused when the run resumes
    (:class:`~babelzoo.train.config.TokenizerSpec`).
``objectives`` / ``mixture``
    ``{name: {weight: w, objective: registered_name, **options}}``; several objectives form a
    :class:`~babelzoo.objectives.mixture.Mixture` trained by ``mixture: sum`` or ``sample``. The
    options are the objective's typed options (:meth:`~babelzoo.objectives.base.Objective.options`);
    what the run gives an objective besides them is what it declares in ``from_run``.
``data``
    ``{objective name: [source, ...]}``, each source a registered data source
    (:mod:`babelzoo.datasets.sources`: ``{kind: text, path: P, lang: de}``,
    ``{kind: parallel, ...}``, ``{kind: catalog_pairs, langs: [en, de]}``,
    ``{kind: kb_facts, kb: cldr, langs: [en]}``, ...; ``babelzoo list sources``). A source must
    provide the example type its objective consumes, which is checked before anything is read.
    Several sources of one objective are sampled with XLM's q ∝ p^α when the objective's entry
    is ``{alpha: 0.7, sources: [...]}``, else uniformly over all their examples
    (:class:`~babelzoo.train.config.ObjectiveData`).

Paths may use environment variables (``${BABELZOO_DATA_DIR}/multi30k/train.de.gz``, expanded by
:func:`babelzoo._files.expand_path`, the one expander of every recipe and config); relative
paths are relative to the current directory. Examples::

    babelzoo pretrain --config mlm_tiny --set max_steps=50 --set output_dir=runs/try
    babelzoo pretrain --config my.yaml --set "data.mlm=[{kind: text, path: de.txt, lang: de}]"
"""

from __future__ import annotations

import copy
import dataclasses
import fnmatch
import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from ..errors import InputError
from ..registry import Registry
from ..typed import Where
from ..zoo.config import ConfigError
from .config import ObjectiveSpec, TrainConfig, read_recipe

logger = logging.getLogger(__name__)

# What attaches a recipe section to the model, ``attach(model, spec, where) -> model``, by section
# name: the knowledge layer (above this one) attaches ``knowledge:`` through the entry-point group.
MODEL_ATTACHMENTS: Registry[Callable[..., Any]] = Registry("model attachment", group="babelzoo.model_attachments")


def parse_data(cfg: TrainConfig, where: Where = Where()) -> dict[str, tuple[list, Optional[float]]]:
    """``{objective: (sources, α)}`` from the recipe's ``data``, every source checked against
    the example type its objective consumes (nothing is read yet); equal sources are one object."""
    from ..datasets.sources import check_consumes
    from ..objectives.mixture import objective_class

    if not cfg.objectives:
        raise ConfigError("objectives: the recipe trains no objective; e.g. objectives: {mlm: {}}")
    missing, extra = sorted(set(cfg.objectives) - set(cfg.data)), sorted(set(cfg.data) - set(cfg.objectives))
    if missing or extra:
        raise ConfigError(f"data must have one entry per objective: no data for {missing}, data for no "
                          f"objective {extra}")
    out, shared, took_pairs = {}, {}, False
    data = copy.deepcopy(cfg.parts.data)  # sources take the run's languages and are read: this build's own
    for name, objective in cfg.parts.objectives.items():
        registered = objective.objective
        consumes = objective_class(registered).consumes
        sources = []
        for source in data[name].sources:
            if cfg.languages is not None and getattr(source, "languages", None) == "auto":
                source.languages = list(cfg.languages)  # the run's languages replace the source's rule
            if cfg.pairs_dir is not None and hasattr(source, "pairs_dir"):
                source.pairs_dir = cfg.pairs_dir
                took_pairs = True
            check_consumes(name if registered == name else f"{name} ({registered})", consumes, source)
            # a source several objectives name (a YAML anchor) is one object: read, tokenised once
            sources.append(shared.setdefault((source.kind, repr(asdict(source))), source))
        out[name] = (sources, data[name].alpha)
    if cfg.pairs_dir is not None and not took_pairs:
        raise ConfigError(f"{where.key('pairs_dir')}: no data source of this recipe reads a user's pairs (sources "
                          f"with pairs_dir: adaptation_pairs)")
    return out


def _fingerprint(directory: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.iterdir() if p.is_file()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


class PretrainedModels:
    """The pretrained models one run reads, each loaded once: a distilled student's tokenizer,
    initial weights and teacher often come from one model."""

    def __init__(self):
        self._loaded: dict[str, Any] = {}

    def get(self, name: str, pretrained: bool | str = True, **overrides: Any):
        """``create_model(name, pretrained=pretrained, **overrides)``, loaded on first use."""
        from ..zoo.factory import create_model

        key = json.dumps([name, pretrained, overrides], sort_keys=True, default=str)
        if key not in self._loaded:
            self._loaded[key] = create_model(name, pretrained=pretrained, **overrides)
        return self._loaded[key]


def pretrained_tokenizer(name: str, models: Optional[PretrainedModels] = None):
    """The tokenizer that comes with the pretrained weights of the zoo entry ``name``."""
    tokenizer = getattr((models or PretrainedModels()).get(name), "tokenizer", None)
    if tokenizer is None:
        raise ConfigError(f"tokenizer.from_model={name!r}: that model has no tokenizer")
    return tokenizer


def build_tokenizer(cfg: TrainConfig, texts, models: Optional[PretrainedModels] = None):
    """Load the recipe's tokenizer, or the one this run saved before, or train one on ``texts``:
    ``{lang: sentences}``, a zero-argument function returning them (called only when a tokenizer
    is trained), or a list of Monolingual/ParallelCorpus. ``models`` shares the pretrained
    models the rest of the run loads (``{from_model: NAME}``)."""
    from ..datasets.sources import texts_of
    from ..datasets.spm import SentencePieceTokenizer
    from ..datasets.tokenizer import load_tokenizer, saved_metadata

    saved = Path(cfg.output_dir) / "tokenizer"
    spec = cfg.parts.tokenizer
    if spec.from_model is not None:
        tokenizer, origin = pretrained_tokenizer(spec.from_model, models), f"model {spec.from_model}"
    elif spec.path is not None:
        tokenizer, origin = load_tokenizer(spec.path), spec.path
        if tokenizer is None:
            raise ConfigError(f"tokenizer.path={spec.path!r}: no tokenizer files in that directory")
    elif saved_metadata(saved) is not None:
        tokenizer, origin = load_tokenizer(saved), str(saved)
    elif (checkpoint := _checkpoint_with_tokenizer(cfg)) is not None:
        # the run's own tokenizer, saved with its weights: never train a new one for old weights
        tokenizer, origin = load_tokenizer(checkpoint), str(checkpoint)
    else:
        if "vocab_size" not in spec.train:
            raise ConfigError("tokenizer: give {path: DIR} or sentencepiece options with vocab_size "
                              "(e.g. {vocab_size: 8000, model_type: unigram, alpha: 0.3})")
        texts = texts() if callable(texts) else texts
        by_lang = dict(texts) if isinstance(texts, Mapping) else texts_of(texts)
        tokenizer = SentencePieceTokenizer.train(by_lang, **{"seed": cfg.seed, **spec.train})
        origin = f"trained on {sum(map(len, by_lang.values())):,} sentences ({', '.join(sorted(by_lang))})"
    logger.debug("tokenizer: %s pieces, %s", f"{tokenizer.specials.vocab_size:,}", origin)
    tokenizer.save(saved)
    return tokenizer, _fingerprint(saved)


def _checkpoint_with_tokenizer(cfg: TrainConfig) -> Optional[Path]:
    """The newest verified checkpoint of this run that holds a tokenizer (resume only). No
    collective: under torchrun only rank 0 builds the tokenizer, while the others wait."""
    from ..datasets.tokenizer import saved_metadata
    from .checkpoint import CheckpointManager

    if not cfg.checkpoints.resume:
        return None
    latest = CheckpointManager(Path(cfg.output_dir) / "checkpoints", cfg.checkpoints.keep).latest_here()
    return latest if latest is not None and saved_metadata(latest) is not None else None


def build_data(cfg: TrainConfig, tokenizer: Any, fingerprint: str, corpora: dict[str, list[Any]],
               alphas: dict[str, Optional[float]]) -> dict[str, Any]:
    """One tokenised dataset per objective from in-memory corpora (cached as memory-mapped
    arrays), α-sampled over its corpora when ``alphas`` gives α."""
    from ..datasets.loader import TokenizedCorpus

    cache = Path(cfg.output_dir) / "cache"
    datasets = {name: [TokenizedCorpus.from_corpus(c, tokenizer, cache_dir=cache, fingerprint=fingerprint)
                       for c in items] for name, items in corpora.items()}
    return combine(datasets, alphas, cfg.seed)


def combine(datasets: Mapping[str, list], alphas: Mapping[str, Optional[float]], seed: int) -> dict[str, Any]:
    """Each objective's datasets as one: itself, a :class:`CorpusMixture` (uniform over all
    examples), or with α a (mixture, :class:`EpochOrder`) pair sampling q ∝ p^α."""
    from ..datasets.loader import CorpusMixture, EpochOrder

    data = {}
    for name, parts in datasets.items():
        streamed = [getattr(part, "streamed", False) for part in parts]
        if any(streamed):
            if not all(streamed):
                raise ConfigError(f"data.{name}: streamed and tokenised sources cannot be mixed in one objective's "
                                  "data; stream them all (streaming: true) or none")
            from ..datasets.streaming import streamed_mixture

            data[name] = parts[0] if len(parts) == 1 else streamed_mixture(parts, alphas.get(name), seed)
            continue
        if len(parts) == 1 and alphas.get(name) is None:
            data[name] = parts[0]
            continue
        mixture = CorpusMixture(dict(enumerate(parts)))
        data[name] = mixture if alphas.get(name) is None else (
            mixture, EpochOrder(mixture.sizes, alpha=alphas[name], seed=seed))
    return data


def with_run_inputs(objectives: Mapping[str, ObjectiveSpec], tokenizer: Any, models: PretrainedModels
                    ) -> dict[str, dict]:
    """Each of the recipe's objectives' options with what it declares it takes from the run
    (:attr:`~babelzoo.objectives.base.Objective.from_run`, :data:`~babelzoo.objectives.base.RUN_INPUTS`),
    and nothing else: ``word_starts``, the tokenizer's word-start table, unless the recipe sets
    it; ``teacher``, the zoo model the option names, loaded through ``models`` (so a teacher that
    is also the run's tokenizer or initial weights is read once)."""
    from ..objectives.mixture import objective_class
    from ..zoo.factory import list_models

    table, out = None, {}
    for name, spec in objectives.items():
        options = dict(spec.options)
        wants = objective_class(spec.objective).from_run
        if "word_starts" in wants and "word_starts" not in options:
            table = tokenizer.word_starts() if table is None else table
            options["word_starts"] = table
        teacher = options.get("teacher")
        if "teacher" in wants and isinstance(teacher, str) and teacher in list_models():
            options["teacher"] = models.get(teacher)
        out[name] = options
    return out


def initial_model(cfg: TrainConfig, where: Where, models: PretrainedModels, specials, tokenizer=None,
                  texts: Optional[Callable[[], Mapping[str, list[str]]]] = None):
    """A fresh copy of the pretrained weights ``cfg.init`` names (see :class:`~babelzoo.train.config.InitSpec`), checked
    against the tokenizer's ``specials``; ``tokenizer`` and ``texts`` (the run's text by
    language) serve ``freeze_pieces_of``."""
    from ..compression import prune_ffn, prune_layers

    init = cfg.parts.init
    source = models.get(cfg.model, init.pretrained, **cfg.model_overrides)
    try:
        model = copy.deepcopy(source) if init.layers is None else prune_layers(source, init.layers)
    except InputError as err:
        raise ConfigError(f"{where.key('layers')}: {err}") from None
    if init.intermediate_size is not None:
        try:
            model = prune_ffn(model, init.intermediate_size)
        except InputError as err:
            raise ConfigError(f"{where.key('intermediate_size')}: {err}") from None
    text = model.config.text
    if specials.vocab_size > text.vocab_size:
        raise ConfigError(f"{where}: the tokenizer has {specials.vocab_size} pieces, but the weights of "
                          f"{cfg.model!r} embed {text.vocab_size}: use the model's tokenizer "
                          f"(tokenizer: {{from_model: {cfg.model}}})")
    model.requires_grad_(True)
    freeze_parameters(model, init.freeze, where.key("freeze"))
    if init.freeze_pieces_of:
        by_lang = texts() if texts is not None else {}
        missing = [lang for lang in init.freeze_pieces_of if not by_lang.get(lang)]
        if missing:
            raise ConfigError(f"{where.key('freeze_pieces_of')}: the run has no text of {missing} (its languages: "
                              f"{', '.join(sorted(by_lang)) or 'none'})")
        freeze_pieces(model, tokenizer, [s for lang in init.freeze_pieces_of for s in by_lang[lang]])
    if init.train_rows_from is not None:
        train_rows_from(model, init.train_rows_from, where.key("train_rows_from"))
    return model.train()


def train_rows_from(model, first: int, where: Where) -> None:
    """Only the word-embedding rows from id ``first`` on train (see :class:`~babelzoo.train.config.InitSpec`)."""
    import torch

    rows = model.config.text.vocab_size
    if first >= rows:
        raise ConfigError(f"{where}: {first} leaves none of the {rows} word-embedding rows to train")
    if not hold_rows(model, torch.arange(rows) < first):
        raise ConfigError(f"{where}: the word embeddings are frozen (init.freeze); leave them out of freeze to "
                          "train the rows from this id")


def freeze_pieces(model, tokenizer, sentences: Sequence[str]) -> int:
    """Mask the word-embedding gradient of every piece ``sentences`` use (and of the special
    tokens); returns how many rows are held. The mask is a gradient hook on the weight, so the
    rows stay as they were under an optimizer without weight decay."""
    import torch

    weight = dict(model.named_parameters())["embeddings.word.weight"]
    held = torch.zeros(weight.shape[0], dtype=torch.bool)
    for ids in (tokenizer.encode(s) for s in sentences):
        held[ids] = True
    held[list(tokenizer.specials.special)] = True
    hold_rows(model, held)
    return int(held.sum())


def hold_rows(model, held) -> bool:
    """Mask the word-embedding gradient of the rows ``held`` (a boolean per row) marks: a
    gradient hook on the weight, so the rows stay as they were under an optimizer without
    weight decay. False when the weight does not train at all."""
    weight = dict(model.named_parameters())["embeddings.word.weight"]
    if not weight.requires_grad:
        return False
    keep = (~held).to(weight.dtype).unsqueeze(-1)
    weight.register_hook(lambda grad: grad * keep.to(grad.device, grad.dtype))
    return True


def freeze_parameters(model, patterns: Sequence[str], where: Where) -> None:
    """``requires_grad=False`` on every parameter whose name matches one of ``patterns``; a
    pattern that matches nothing is an error (a misspelt name would otherwise train everything)."""
    names = [name for name, _ in model.named_parameters()]
    for pattern in patterns:
        if not fnmatch.filter(names, pattern):
            shown = ", ".join(dict.fromkeys(n.rsplit(".", 1)[0] + ".*" for n in names[:40]))
            raise ConfigError(f"{where}: {pattern!r} matches no parameter of the model; its parameters start "
                              f"{shown}, ...")
    for name, param in model.named_parameters():
        if any(fnmatch.fnmatchcase(name, p) for p in patterns):
            param.requires_grad_(False)


def _say(reports: Sequence[str]) -> None:
    for report in reports:
        logger.warning("babelzoo pretrain: %s", report)


@dataclass
class Run:
    """One training run, built: its ``config``, the ``model`` (initial weights from the run's
    seed), the ``objectives`` (one objective, or a :class:`~babelzoo.objectives.mixture.Mixture`),
    their training ``data`` (one objective's dataset, or ``{objective: dataset}``), the
    ``tokenizer`` (None for a model of ids, such as a KG embedding), the data ``sources`` read
    (their records go with the trained model) and the ``evaluator`` that selects the best step
    (None: the last step is the model). Every kind of run has this shape and trains the same way:
    pre-training (:func:`build_run`), fine-tuning
    (:func:`babelzoo.finetune.run.build_finetune_run`) and KG embeddings
    (:func:`babelzoo.knowledge.link_prediction.build_kge_run`)::

        run = build_run(load_recipe(path))
        summary = run.trainer().fit()
    """

    config: TrainConfig
    model: Any
    objectives: Any
    data: Any
    tokenizer: Any = None
    sources: list = field(default_factory=list)
    evaluator: Any = None

    def trainer(self, **options: Any):
        """The :class:`~babelzoo.train.trainer.Trainer` of this run (``options``: the trainer's
        keyword arguments, e.g. ``hooks``)."""
        from .trainer import Trainer

        return Trainer(self.model, self.objectives, self.data, self.config, tokenizer=self.tokenizer,
                       evaluator=self.evaluator, **options)


def build_run(cfg: TrainConfig, recipe: Optional[Path | Where] = None) -> Run:
    """The :class:`Run` a recipe describes. Its errors name the recipe's file and line when the
    config was loaded from a file (or ``recipe`` gives the file, or where each key was read)."""
    import torch

    from ..datasets.sources import BuildContext, EmptySource
    from ..objectives.mixture import Mixture, build_objective
    from ..zoo.factory import create_model
    from .run_folder import claim_output_dir

    if isinstance(recipe, Where):
        where = dataclasses.replace(recipe, label="")
    elif recipe is not None:
        where = Where(file=str(recipe), lines=read_recipe(recipe)[1])
    else:
        where = dataclasses.replace(cfg.parts.where, label="")
    sources = parse_data(cfg, where)
    unique = list({id(source): source for items, _ in sources.values() for source in items}.values())
    for source in unique:
        # what reading kept and dropped is said here, not left in a cache file
        try:
            reports = source.load()
        except EmptySource as err:
            _say(err.reports)
            raise
        _say(reports)
    claim_output_dir(cfg)  # the tokenizer and the token cache are written there next
    context = BuildContext(tokenizer=None, fingerprint="", cache_dir=Path(cfg.output_dir) / "cache", seed=cfg.seed)

    def texts() -> dict[str, list[str]]:
        """Every source's text once, however many objectives read the source."""
        by_lang: dict[str, list[str]] = {}
        for source in unique:
            for lang, sentences in source.texts(context).items():
                by_lang.setdefault(lang, []).extend(sentences)
        return by_lang

    models = PretrainedModels()
    tokenizer, fingerprint = build_tokenizer(cfg, texts, models)
    specials = tokenizer.specials
    embedded = cfg.model_overrides.get("vocab_size", specials.vocab_size)
    if isinstance(embedded, int) and embedded < specials.vocab_size:  # ids past the embedding fail mid-step
        raise ConfigError(f"{where.key('model_overrides').key('vocab_size')}={embedded}: the model would embed "
                          f"{embedded} pieces, but the tokenizer has {specials.vocab_size}; drop the override (the "
                          f"model takes the tokenizer's size) or make it at least {specials.vocab_size}")
    single = len(cfg.objectives) == 1 and cfg.mixture == "sum"
    # The initial weights (model and objective heads) come from the run's seed, the same on every
    # rank; the caller's random state is left as it was.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        if cfg.parts.init is not None:
            model = initial_model(cfg, where.key("init"), models, specials, tokenizer, texts)
        else:
            model = create_model(cfg.model, **{"vocab_size": specials.vocab_size, "pad_token_id": specials.pad,
                                               **cfg.model_overrides})
        if cfg.parts.knowledge is not None:
            model = MODEL_ATTACHMENTS.get("knowledge")(model, cfg.parts.knowledge, where.key("knowledge"))
        specs = cfg.parts.objectives
        options = with_run_inputs(specs, tokenizer, models)
        built = {name: build_objective(spec.objective, specials, model.config, **options[name])
                 for name, spec in specs.items()}
        if single:
            (name, spec), = specs.items()
            if spec.weight != 1.0:
                raise ConfigError(f"{where.key('objectives').key(name).key('weight')}: a single objective takes no "
                                  "weight")
            objectives = built[name]
        else:
            objectives = Mixture(built, {name: spec.weight for name, spec in specs.items()}, mode=cfg.mixture)
    for source in unique:
        source.check_model(model)
    context = BuildContext(tokenizer, fingerprint, context.cache_dir, model, cfg.seed)
    built = {id(source): source.dataset(context) for source in unique}
    datasets = {name: [built[id(source)] for source in items] for name, (items, _) in sources.items()}
    data = combine(datasets, {name: alpha for name, (_, alpha) in sources.items()}, cfg.seed)
    return Run(cfg, model, objectives, data[name] if single else data, tokenizer, unique)
