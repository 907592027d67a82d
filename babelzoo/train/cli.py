"""``babelzoo pretrain --config RECIPE.yaml [--set key=value ...]``: build a run from a recipe
and train it.

A recipe is a :class:`~babelzoo.train.config.TrainConfig` in YAML. Besides the training
settings, four fields describe what to train:

``model`` / ``model_overrides``
    a registered architecture and changes to its config. ``vocab_size`` and ``pad_token_id``
    are set from the tokenizer unless given.
``tokenizer``
    ``{path: DIR}`` to load a saved tokenizer, or sentencepiece training options
    (``{vocab_size: 8000, model_type: unigram, alpha: 0.3}``) to train one on the recipe's
    text; it is saved in ``<output_dir>/tokenizer`` and reused when the run resumes.
``objectives`` / ``mixture``
    ``{name: {weight: w, objective: registered_name, **options}}``; several objectives form a
    :class:`~babelzoo.objectives.mixture.Mixture` trained by ``mixture: sum`` or ``sample``.
``data``
    ``{objective name: [source, ...]}`` where a source is one of
    ``{kind: text, path: P or [P...], lang: de}`` (one sentence per line, plain or gzip),
    ``{kind: parallel, src: P, tgt: P, src_lang: en, tgt_lang: de}`` (line-aligned files), or
    ``{kind: tsv, path: P, src_lang: en, tgt_lang: de, src_column: 0, tgt_column: 1}``.
    Several sources of one objective are sampled with XLM's q ∝ p^α when the objective's
    entry is ``{alpha: 0.7, sources: [...]}``, else uniformly over all their examples.

Paths may use environment variables (``${BABELZOO_DATA_DIR}/multi30k/train.de.gz``); relative
paths are relative to the current directory. Examples::

    babelzoo pretrain --config mlm_tiny --set max_steps=50 --set output_dir=runs/try
    babelzoo pretrain --config my.yaml --set "data.mlm=[{kind: text, path: de.txt, lang: de}]"
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from ..errors import command
from ..zoo.config import ConfigError
from .config import TrainConfig, load_recipe, recipe_path

SOURCE_KEYS = {
    "text": ({"path", "lang"}, {"empty"}),
    "parallel": ({"src", "tgt", "src_lang", "tgt_lang"}, {"empty"}),
    "tsv": ({"path"}, {"src_lang", "tgt_lang", "src_column", "tgt_column", "header", "num_fields", "empty"}),
}


def _sources(name: str, entry: Any) -> tuple[list[dict], Optional[float]]:
    """The source list and α of one objective's data entry, checked."""
    alpha = None
    if isinstance(entry, Mapping):
        unknown = sorted(set(entry) - {"sources", "alpha"})
        if unknown or "sources" not in entry:
            raise ConfigError(f"data.{name}: expected a list of sources or {{alpha: a, sources: [...]}}, "
                              f"got keys {sorted(entry)}")
        alpha, entry = entry.get("alpha"), entry["sources"]
    if not isinstance(entry, list) or not entry:
        raise ConfigError(f"data.{name}: expected a non-empty list of sources, got {entry!r}")
    for i, source in enumerate(entry):
        where = f"data.{name}[{i}]"
        if not isinstance(source, Mapping) or source.get("kind") not in SOURCE_KEYS:
            raise ConfigError(f"{where}: a source needs kind: one of {', '.join(SOURCE_KEYS)}; got {source!r}")
        required, optional = SOURCE_KEYS[source["kind"]]
        keys = set(source) - {"kind"}
        missing, unknown = sorted(required - keys), sorted(keys - required - optional)
        if missing or unknown:
            raise ConfigError(f"{where} (kind {source['kind']}): missing {missing}, unknown {unknown}; "
                              f"valid keys: kind, {', '.join(sorted(required | optional))}")
    return list(entry), alpha


def _path(value: Any, where: str) -> Any:
    if isinstance(value, list):
        return [_path(v, where) for v in value]
    expanded = os.path.expanduser(os.path.expandvars(str(value)))
    if "$" in expanded:
        raise ConfigError(f"{where}: {value!r} names an environment variable that is not set")
    return expanded


def _read(source: Mapping[str, Any], where: str):
    """Read one source into a MonolingualCorpus or ParallelCorpus."""
    from ..datasets import text

    kind, options = source["kind"], {k: v for k, v in source.items() if k != "kind"}
    for key in ("path", "src", "tgt"):
        if key in options:
            options[key] = _path(options[key], f"{where}.{key}")
    if kind == "text":
        return text.read_monolingual(options.pop("path"), options.pop("lang"), **options)
    if kind == "parallel":
        return text.read_parallel(options.pop("src"), options.pop("tgt"), options.pop("src_lang"),
                                  options.pop("tgt_lang"), **options)
    return text.read_parallel_tsv(options.pop("path"), **options)


def _raw_sentences(corpora: Sequence[Any]) -> dict[str, list[str]]:
    from ..datasets.text import ParallelCorpus

    by_lang: dict[str, list[str]] = {}
    for corpus in corpora:
        if isinstance(corpus, ParallelCorpus):
            by_lang.setdefault(corpus.src_lang, []).extend(corpus.sources)
            by_lang.setdefault(corpus.tgt_lang, []).extend(corpus.targets)
        else:
            by_lang.setdefault(corpus.lang, []).extend(corpus.sentences)
    return by_lang


def _fingerprint(directory: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.iterdir() if p.is_file()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def build_tokenizer(cfg: TrainConfig, corpora: Sequence[Any]):
    """Load the recipe's tokenizer, or the one this run saved before, or train one."""
    from ..datasets.spm import SentencePieceTokenizer
    from ..datasets.tokenizer import load_tokenizer, saved_metadata

    saved = Path(cfg.output_dir) / "tokenizer"
    spec = dict(cfg.tokenizer)
    if "path" in spec:
        extra = sorted(set(spec) - {"path"})
        if extra:
            raise ConfigError(f"tokenizer: with path, no training options are used; remove {extra}")
        tokenizer = load_tokenizer(spec["path"])
        if tokenizer is None:
            raise ConfigError(f"tokenizer.path={spec['path']!r}: no tokenizer files in that directory")
    elif saved_metadata(saved) is not None:
        tokenizer = load_tokenizer(saved)
    elif (checkpoint := _checkpoint_with_tokenizer(cfg)) is not None:
        # the run's own tokenizer, saved with its weights: never train a new one for old weights
        tokenizer = load_tokenizer(checkpoint)
    else:
        if "vocab_size" not in spec:
            raise ConfigError("tokenizer: give {path: DIR} or sentencepiece options with vocab_size "
                              "(e.g. {vocab_size: 8000, model_type: unigram, alpha: 0.3})")
        spec.setdefault("seed", cfg.seed)
        tokenizer = SentencePieceTokenizer.train(_raw_sentences(corpora), **spec)
    tokenizer.save(saved)
    return tokenizer, _fingerprint(saved)


def _checkpoint_with_tokenizer(cfg: TrainConfig) -> Optional[Path]:
    """The newest verified checkpoint of this run that holds a tokenizer (resume only)."""
    from ..datasets.tokenizer import saved_metadata
    from .checkpoint import CheckpointManager

    if not cfg.resume:
        return None
    latest = CheckpointManager(Path(cfg.output_dir) / "checkpoints", cfg.keep_checkpoints, 0).latest()
    return latest if latest is not None and saved_metadata(latest) is not None else None


def build_data(cfg: TrainConfig, tokenizer: Any, fingerprint: str, corpora: dict[str, list[Any]],
               alphas: dict[str, Optional[float]]) -> dict[str, Any]:
    """One tokenised dataset per objective (cached as memory-mapped arrays), α-sampled over
    its sources when the recipe gives α."""
    from ..datasets.loader import CorpusMixture, EpochOrder, TokenizedCorpus

    cache = Path(cfg.output_dir) / "cache"
    data = {}
    for name, items in corpora.items():
        tokenized = [TokenizedCorpus.from_corpus(c, tokenizer, cache_dir=cache, fingerprint=fingerprint)
                     for c in items]
        if len(tokenized) == 1 and alphas[name] is None:
            data[name] = tokenized[0]
            continue
        mixture = CorpusMixture({i: t for i, t in enumerate(tokenized)})
        if alphas[name] is None:
            data[name] = mixture
        else:
            data[name] = (mixture, EpochOrder(mixture.sizes, alpha=alphas[name], seed=cfg.seed))
    return data


def build_run(cfg: TrainConfig):
    """(model, objectives, data, tokenizer) described by a recipe."""
    import torch

    from ..objectives.mixture import Mixture, build_objective
    from ..zoo.factory import create_model

    if not cfg.objectives:
        raise ConfigError("objectives: the recipe trains no objective; e.g. objectives: {mlm: {}}")
    missing, extra = sorted(set(cfg.objectives) - set(cfg.data)), sorted(set(cfg.data) - set(cfg.objectives))
    if missing or extra:
        raise ConfigError(f"data must have one entry per objective: no data for {missing}, data for no "
                          f"objective {extra}")
    corpora, alphas = {}, {}
    for name in cfg.objectives:
        sources, alphas[name] = _sources(name, cfg.data[name])
        corpora[name] = [_read(s, f"data.{name}[{i}]") for i, s in enumerate(sources)]
        for i, corpus in enumerate(corpora[name]):
            # what reading kept and dropped is said here, not left in a cache file
            where = f"data.{name}[{i}] ({', '.join(corpus.report.files)})"
            if not len(corpus):
                raise ConfigError(f"{where}: no sentences to train on ({corpus.report})")
            if corpus.report.skipped:
                print(f"babelzoo pretrain: {where}: {corpus.report}", file=sys.stderr)
    tokenizer, fingerprint = build_tokenizer(cfg, [c for items in corpora.values() for c in items])
    specials = tokenizer.specials
    overrides = {"vocab_size": specials.vocab_size, "pad_token_id": specials.pad, **cfg.model_overrides}
    single = len(cfg.objectives) == 1 and cfg.mixture == "sum"
    # The initial weights (model and objective heads) come from the run's seed, the same on every
    # rank; the caller's random state is left as it was.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = create_model(cfg.model, **overrides)
        if single:
            (name, options), = cfg.objectives.items()
            options = dict(options or {})
            if options.pop("weight", 1.0) != 1.0:
                raise ConfigError(f"objectives.{name}.weight: a single objective takes no weight")
            objectives = build_objective(options.pop("objective", name), specials, model.config, **options)
        else:
            objectives = Mixture.from_spec(cfg.objectives, specials, model.config, mode=cfg.mixture)
    data = build_data(cfg, tokenizer, fingerprint, corpora, alphas)
    return model, objectives, data[name] if single else data, tokenizer


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="babelzoo pretrain", description="Pre-train from a YAML recipe.",
                                     epilog="Launch on several GPUs/processes with torchrun: "
                                            "torchrun --nproc-per-node N -m babelzoo.cli pretrain --config R")
    parser.add_argument("--config", required=True, help="recipe file, or the name of a shipped recipe")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a recipe key (YAML value; dotted keys reach into mappings); repeatable")
    parser.add_argument("--print-config", action="store_true", help="print the resolved recipe and exit")
    return parser


@command("pretrain")
def pretrain_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``babelzoo pretrain``; returns the exit status."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    cfg = load_recipe(recipe_path(args.config), args.overrides)
    if args.print_config:
        print(json.dumps(cfg.to_dict(), indent=2))
        return 0
    from . import distributed as D
    from .trainer import Trainer

    # Under torchrun, rank 0 trains/saves the tokenizer and fills the token cache first; the
    # other ranks then load both instead of racing to write them.
    info = D.init_distributed(cfg.device)

    def attempt():
        try:
            return build_run(cfg)
        except (ConfigError, ValueError, OSError) as err:
            print(f"babelzoo pretrain: {err}", file=sys.stderr)
            return None

    try:
        run = attempt() if info.is_main else None
        if not D.broadcast_object(run is not None):
            return 2  # rank 0 failed: every rank stops
        if not info.is_main:
            run = attempt()
        if D.any_rank(run is None):
            return 2
        model, objectives, data, tokenizer = run
        Trainer(model, objectives, data, cfg, tokenizer=tokenizer).fit()
        return 0
    finally:
        D.shutdown(info)


if __name__ == "__main__":
    sys.exit(pretrain_main())
