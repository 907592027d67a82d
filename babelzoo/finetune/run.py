"""One fine-tuning run: build the model with its head, train on the source language with model
selection on its dev set (the shared :class:`~babelzoo.train.Trainer`), then evaluate the best
model on every test file.

Zero-shot transfer by construction: the trainer and its evaluator receive the ``train`` and
``dev`` examples only; the ``test`` files are opened after :meth:`Trainer.fit` has returned.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from .._files import write_json_atomic
from ..errors import BabelzooError
from ..train.config import TokenizerSpec, TrainConfig
from ..train.run import Run
from ..zoo.config import ConfigError
from ..zoo.model_config import HeadConfig
from .data import Split, digest_of, encode_rows, hold_out, label_set, read_rows
from .evaluate import HeadEvaluator, accuracy, predict
from .protocol import ZeroShot, certify
from .recipe import TaskSpec, recipe_value, training_steps

logger = logging.getLogger(__name__)

RESULTS = "results.json"


class EvaluationIncomplete(RuntimeError):
    """Testing stopped at one file: ``tests`` holds the accuracies of the files already done
    (also written to ``results.json``), the message says where and why."""

    def __init__(self, message: str, tests: dict[str, dict[str, Any]], protocol: dict[str, Any]):
        super().__init__(message)
        self.tests, self.protocol = tests, protocol


class TestFileError(BabelzooError, EvaluationIncomplete):
    """Testing stopped at a malformed test file (a label outside the label set, a broken line):
    the message names ``file:line``; the accuracies measured before it are kept."""

    __test__ = False  # not a pytest test class


def build_model(cfg: TrainConfig, spec: TaskSpec, labels: tuple[str, ...], base=None, tokenizer=None):
    """(model with a fresh head, tokenizer). ``base``: an encoder to start from (else
    ``spec.init`` decides: the zoo entry's pretrained weights, random weights, or a checkpoint).

    Trained weights keep the tokenizer they were trained with: when the starting model has its
    own (a checkpoint's, a pretrained entry's), that one is used, and a recipe (or caller)
    tokenizer with other content is refused naming both. A tokenizer with more pieces than the
    model's vocabulary is refused before any step."""
    from ..zoo.factory import create_model
    from ..zoo.build import with_head
    from ..zoo.pretrained import from_pretrained

    given, given_name = tokenizer, "the tokenizer passed in"
    if given is None and cfg.tokenizer:
        given, given_name = _recipe_tokenizer(cfg.parts.tokenizer), f"tokenizer: {dict(cfg.tokenizer)}"
    if base is None and spec.init == "random" and given is None:
        given, given_name = create_model(cfg.model, pretrained=True).tokenizer, f"model {cfg.model!r}'s own tokenizer"
    fresh = base is None and spec.init == "random"  # random weights: no tokenizer of their own
    if base is not None:
        origin = "the model passed in"
    elif spec.init in ("pretrained", "random"):
        origin = f"model {cfg.model!r} ({spec.init})"
    else:
        origin = f"task.init={spec.init}"
    # Weights the run creates (random ones, a fresh pooler, the head) come from the run's seed;
    # the caller's random state is left as it was.
    with torch.random.fork_rng(devices=[]):
        if base is None:
            torch.manual_seed(cfg.seed)
            if spec.init == "pretrained":
                base = create_model(cfg.model, pretrained=True, **cfg.model_overrides)
            elif spec.init == "random":
                base = create_model(cfg.model, **{"vocab_size": given.vocab_size,
                                                  "pad_token_id": given.specials.pad, **cfg.model_overrides})
            else:
                base = from_pretrained(spec.init)
        own = None if fresh else getattr(base, "tokenizer", None)
        tokenizer = _one_tokenizer(own, given, origin, given_name)
        if tokenizer is None:
            raise ConfigError(f"model {cfg.model!r} has no tokenizer: give tokenizer: {{path: DIR}}")
        _check_vocabulary(base, tokenizer, origin, given_name if tokenizer is given else f"{origin}'s own tokenizer")
        torch.manual_seed(cfg.seed)  # the head's initial weights
        model = with_head(base, HeadConfig.from_dict({**spec.head, "kind": spec.kind, "labels": labels}))
    model.tokenizer = tokenizer
    _freeze(model, spec.freeze)
    return model, tokenizer


def _one_tokenizer(own, given, origin: str, given_name: str):
    """The model's own tokenizer, unless it has none; another one given beside it must hold the
    same vocabulary (compared by content: the same size is not the same ids)."""
    if own is None or given is None or given is own:
        return own if own is not None else given
    from ..train.identity import tokenizer_identity

    if tokenizer_identity(own) != tokenizer_identity(given):
        raise ConfigError(f"{origin} has its own tokenizer ({_described(own)}) and {given_name} is another "
                          f"({_described(given)}): the model's embeddings are indexed by its own tokenizer's ids, "
                          "so the same text would get other ids; remove the tokenizer from the recipe to use the "
                          "model's own")
    return own


def _check_vocabulary(base, tokenizer, origin: str, name: str) -> None:
    vocab = getattr(getattr(getattr(base, "config", None), "text", None), "vocab_size", None)
    if isinstance(vocab, int) and tokenizer.vocab_size > vocab:
        raise ConfigError(f"{name} has {tokenizer.vocab_size} pieces but the vocabulary of {origin} holds {vocab}: "
                          f"ids from {vocab} on have no embedding; use the model's own tokenizer, or a model whose "
                          f"vocabulary holds at least {tokenizer.vocab_size}")


def _described(tokenizer) -> str:
    return f"{type(tokenizer).__name__}, {tokenizer.vocab_size} pieces"


def _recipe_tokenizer(spec: TokenizerSpec):
    """``{path: DIR}`` (a saved tokenizer) or ``{from_model: NAME}`` (a zoo entry's own)."""
    from ..datasets.tokenizer import load_tokenizer
    from ..train.run import pretrained_tokenizer

    if spec.train:
        raise ConfigError(f"tokenizer: a fine-tuning recipe takes {{path: DIR}} or {{from_model: NAME}}, not "
                          f"sentencepiece training options ({', '.join(spec.train)})")
    if spec.from_model is not None:
        return pretrained_tokenizer(spec.from_model)
    tokenizer = load_tokenizer(spec.path)
    if tokenizer is None:
        raise ConfigError(f"tokenizer.path={spec.path!r}: no tokenizer files there")
    return tokenizer


def _freeze(model, prefixes) -> None:
    for prefix in prefixes:
        hit = [p for name, p in model.named_parameters() if name.startswith(prefix)]
        if not hit:
            raise ConfigError(f"task.freeze: no parameter name starts with {prefix!r}")
        for param in hit:
            param.requires_grad_(False)


def prepare_splits(cfg: TrainConfig, spec: TaskSpec):
    """Train and dev rows (dev: the dev file, or a held-back share of train) and the label set."""
    train_rows = read_rows(spec, spec.train, tuple(spec.labels) if spec.labels else None)
    labels = label_set(spec, train_rows)
    if spec.dev is not None:
        dev_rows, selection = read_rows(spec, spec.dev, labels), str(spec.dev)
    else:
        train_rows, dev_rows = hold_out(train_rows, spec.dev_fraction, cfg.seed)
        selection = f"{spec.dev_fraction:g} of {spec.train} held back (seed {cfg.seed})"
    return train_rows, dev_rows, labels, selection


@dataclass
class Testing:
    """What testing a fine-tuned model needs besides its run: the ``task``, its ``labels``, the
    files it was certified on (``zero_shot``), what selected the best step (``selection``), and
    the ``scorer`` that reads examples of up to ``eval_length`` tokens."""

    task: TaskSpec
    labels: tuple[str, ...]
    selection: str
    zero_shot: ZeroShot
    scorer: Any
    eval_length: int


def build_finetune_run(cfg: TrainConfig, data_dir: Optional[str | Path] = None, base=None, tokenizer=None,
                       log: Callable[[str], None] = logger.info, max_steps_given: bool = False
                       ) -> tuple[Run, Testing]:
    """The :class:`~babelzoo.train.run.Run` of a fine-tuning recipe (the model with its head, the
    head's objective, the train split, selection on dev) and what testing it takes afterwards.
    With ``task.epochs``, ``cfg.max_steps`` caps the run only when ``max_steps_given`` (the
    recipe gave it; :func:`~babelzoo.finetune.recipe.gives_max_steps`); the log says which won."""
    from ..objectives.classification import head_objective
    from ..train.run_folder import claim_output_dir

    spec = TaskSpec.from_dict(cfg.task).resolve(data_dir)
    if int(os.environ.get("RANK", 0)) == 0:
        claim_output_dir(cfg, write=False)  # a folder of the user's (their results.json) is refused before any work
    train_rows, dev_rows, labels, selection = prepare_splits(cfg, spec)
    digests = {"train": digest_of(spec.train), **({"dev": digest_of(spec.dev)} if spec.dev else {})}
    zero_shot = certify(spec, digests["train"], digests.get("dev"))  # before anything is trained
    model, tokenizer = build_model(cfg, spec, labels, base, tokenizer)
    objective_cls = head_objective(spec.kind)
    objective = objective_cls(tokenizer.specials, max_length=spec.max_length, num_labels=len(labels))
    eval_length = spec.eval_max_length or model.config.text.max_positions
    scorer = objective_cls(tokenizer.specials, max_length=eval_length, num_labels=len(labels))
    train = Split("train", str(spec.train), encode_rows(train_rows, tokenizer, labels, spec, spec.max_length),
                  fingerprint=run_inputs(spec, digests, tokenizer))
    dev = Split("dev", selection, encode_rows(dev_rows, tokenizer, labels, spec, eval_length))
    world = int(os.environ.get("WORLD_SIZE", 1))
    steps, decided_by = training_steps(spec, cfg.max_steps, max_steps_given, len(train),
                                       cfg.batch_size * cfg.grad_accum * world)
    cfg = cfg.replace(max_steps=steps)
    log(f"fine-tuning {cfg.model} ({spec.kind}, {len(labels)} labels) on {len(train)} examples, selecting on "
        f"{len(dev)}; {steps} steps ({decided_by})")
    evaluator = HeadEvaluator(scorer, dev.examples, "dev", spec.eval_batch_size)
    run = Run(cfg, model, objective, train, tokenizer, evaluator=evaluator)
    return run, Testing(spec, labels, selection, zero_shot, scorer, eval_length)


def run_finetune(cfg: TrainConfig, data_dir: Optional[str | Path] = None, base=None, tokenizer=None,
                 log: Callable[[str], None] = logger.info, max_steps_given: bool = False) -> dict[str, Any]:
    """Fine-tune as ``cfg`` says (:func:`build_finetune_run`) and evaluate on its test files;
    returns (and writes to ``output_dir/results.json``) the per-language accuracies with their
    protocol."""
    from ..zoo.checkpoint_io import WEIGHTS_NAME, load_state_strict, read_weights

    run, testing = build_finetune_run(cfg, data_dir, base, tokenizer, log, max_steps_given)
    summary = run.trainer().fit()
    cfg, model, tokenizer = run.config, run.model, run.tokenizer
    spec, labels, selection, zero_shot = testing.task, testing.labels, testing.selection, testing.zero_shot
    scorer, eval_length = testing.scorer, testing.eval_length
    if int(os.environ.get("RANK", 0)) != 0:
        return {"summary": summary}
    if summary.get("best_dir"):
        best = Path(summary["best_dir"]) / WEIGHTS_NAME
        load_state_strict(model, read_weights(best), str(best))
    described = {"protocol": protocol(cfg, spec, selection, summary, model, zero_shot), "labels": list(labels)}
    # The test files are read only now, after training and selection have ended.
    start = time.perf_counter()
    log(f"testing on {len(zero_shot.tests)} file(s)")

    def keep(measured: dict, stop: str) -> str:
        _write_results(cfg, {**described, "test": measured, "incomplete": stop})
        return str(Path(cfg.output_dir) / RESULTS)

    tests = test_all(model, scorer, spec, zero_shot.tests, labels, tokenizer, eval_length, described["protocol"],
                     keep)
    targets = [tests[lang]["accuracy"] for lang in zero_shot.targets] if zero_shot.certified else []
    result = {**described, "test": tests,
              "mean": sum(r["accuracy"] for r in tests.values()) / len(tests) if tests else None,
              "mean_zero_shot": sum(targets) / len(targets) if targets else None,
              "dev": summary.get("best"), "train_tokens_per_s": summary.get("tokens_per_s"),
              "test_seconds": time.perf_counter() - start, "summary": _jsonable(summary)}
    _write_results(cfg, result)
    result["model"] = model
    return result


def run_inputs(spec: TaskSpec, digests: dict[str, str], tokenizer) -> dict[str, Any]:
    """What the training and selection examples are made of, by content: the train and dev
    files, the tokenizer's files and a checkpoint's weights started from. Resume compares it,
    so a file replaced under the same path is a different run."""
    from ..train.identity import tokenizer_identity
    from ..zoo.checkpoint_io import WEIGHTS_NAME

    inputs: dict[str, Any] = {f"{role}_sha256": sha for role, sha in digests.items()}
    inputs["tokenizer_sha256"] = tokenizer_identity(tokenizer)
    weights = Path(spec.init) / WEIGHTS_NAME
    if spec.init not in ("pretrained", "random") and weights.is_file():
        inputs["init_sha256"] = digest_of(weights)
    return inputs


def test_all(model, scorer, spec: TaskSpec, files: dict[str, Path], labels, tokenizer, eval_length: int,
             protocol: dict[str, Any], keep: Callable[[dict, str], str]) -> dict[str, dict[str, Any]]:
    """Accuracy on every test file; when one fails, ``keep(measured, why)`` saves the accuracies
    of the files before it (and returns where), and the error says where it stopped."""
    tests: dict[str, dict[str, Any]] = {}
    for i, (lang, path) in enumerate(files.items()):
        try:
            examples = encode_rows(read_rows(spec, path, labels), tokenizer, labels, spec, eval_length)
            tests[lang] = {**accuracy(predict(model, scorer, examples, spec.eval_batch_size), examples),
                           "file": recipe_value(path)}
        except Exception as err:
            user = isinstance(err, BabelzooError)  # a mistake in a file: its message names file:line
            why = str(err) if user else f"{type(err).__name__}: {err}"
            written = keep(tests, f"stopped at {lang} ({path}): {why}")
            done = f"the accuracies of the {i} test file(s) before it are in {written}"
            if user:
                raise TestFileError(f"{why}; testing stopped there, {done}", tests, protocol) from None
            raise EvaluationIncomplete(f"stopped at {lang} after {i} of {len(files)} test files: {why} ({done})",
                                       tests, protocol) from err
    return tests


def _write_results(cfg: TrainConfig, result: dict[str, Any]) -> None:
    write_json_atomic(Path(cfg.output_dir) / RESULTS, result)


def protocol(cfg: TrainConfig, spec: TaskSpec, selection: str, summary: dict, model,
             zero_shot: ZeroShot) -> dict[str, Any]:
    """Everything a number depends on, stored beside it; ``zero_shot`` and its note say what the
    files read certify (see :mod:`babelzoo.finetune.protocol`)."""
    head = model.config.head
    return {"model": cfg.model, "init": spec.init, "head": head.kind, "pooling": head.pooling,
            "layer": head.layer, "hidden_layer": head.hidden_layer, "train": recipe_value(spec.train), "selection": selection,
            "selection_metric": summary.get("selection_metric"), "best_step": summary.get("best_step"),
            "max_steps": cfg.max_steps, "epochs": spec.epochs, "batch_size": cfg.batch_size * cfg.grad_accum,
            **{k: getattr(cfg.optim, k) for k in ("lr", "optimizer", "schedule", "warmup_steps", "layer_lr_decay",
                                                   "weight_decay")}, "seed": cfg.seed,
            "precision": cfg.precision, "max_length": spec.max_length, "prefix": spec.prefix,
            "freeze": list(spec.freeze), **zero_shot.to_dict()}


def _jsonable(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if isinstance(v, (str, int, float, bool, list, dict, type(None)))}
