"""Zero-shot cross-lingual transfer after fine-tuning (XTREME, Hu et al. 2020): a model is
fine-tuned on English only, selected on English dev only, and scored on every language's test
set by the shipped recipes and :func:`babelzoo.finetune.run_finetune`, the path
``babelzoo finetune`` runs.

``sib200``: topic classification (SIB-200, 7 classes), recipe ``sib200_e5_small``.
``udpos``: UPOS tagging on every Universal Dependencies treebank present, recipe
``udpos_e5_small`` (trained on English EWT, selected on a held-back tenth of it).

A leaderboard config may give a task its own recipe and overrides::

    task_options:
      sib200: {recipe: sib200_e5_small, set: ["task.epochs=3"]}
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any

from ...finetune.run import EvaluationIncomplete
from ...zoo.config import ConfigError
from . import TASKS, Result, TaskContext, TaskIncomplete, TaskSkipped

OPTION_KEYS = ("recipe", "set", "out")


def finetune_results(task: str, folder: str, default_recipe: str, encoder, context: TaskContext) -> list[Result]:
    """Fine-tune a copy of ``encoder.model`` by the task's recipe; one Result per test file."""
    from ...finetune.recipe import TaskSpec, gives_max_steps, recipe_value
    from ...finetune.run import run_finetune
    from ...train.config import read_recipe_config, recipe_path
    from ...zoo.model import BabelModel

    model = getattr(encoder, "model", None)
    if not isinstance(model, BabelModel):
        raise TaskSkipped(f"{encoder.name} is not a babelzoo model, so it cannot be fine-tuned here "
                          f"(its frozen vectors take part in sib200_probe)")
    if context.data_dir is None or not (context.data_dir / folder).is_dir():
        raise TaskSkipped(f"{task} needs --data-dir with a {folder}/ folder")
    options = dict(context.options.get(task) or {})
    unknown = sorted(set(options) - set(OPTION_KEYS))
    if unknown:
        raise ConfigError(f"task_options.{task}: unknown key(s) {unknown}; valid keys: {', '.join(OPTION_KEYS)}")
    cfg, where = read_recipe_config(recipe_path(options.get("recipe", default_recipe)), list(options.get("set", [])))
    if context.languages:
        spec = TaskSpec.from_dict(cfg.task, dataclasses.replace(where, label="")).resolve(context.data_dir)
        present = spec.test_files()
        chosen = {lang: recipe_value(path) for lang, path in present.items()
                  if lang in context.languages or lang == spec.source}
        if set(chosen) <= {spec.source}:
            raise TaskSkipped(f"none of {context.languages} among {task}'s test languages ({', '.join(present)})")
        cfg = cfg.replace(task={**cfg.task, "test": chosen})
    source = TaskSpec.from_dict(cfg.task).source

    def rows_of(tests: dict[str, dict[str, Any]], run_protocol: dict[str, Any]) -> list[Result]:
        protocol: dict[str, Any] = {**run_protocol, "recipe": options.get("recipe", default_recipe),
                                    "overrides": list(options.get("set", [])), "source": source}
        return [Result(task, encoder.name, f"acc {lang}", row["accuracy"],
                       {**protocol, "lang": lang, "n": row["n"], "truncated": row["truncated"]},
                       family="acc en" if lang == source else "acc zero-shot") for lang, row in tests.items()]

    with tempfile.TemporaryDirectory(prefix=f"babelzoo-{task}-") as tmp:
        out = Path(options["out"]) / encoder.name if options.get("out") else Path(tmp)
        cfg = cfg.replace(model=encoder.name, output_dir=str(out), checkpoints={"resume": False},
                          logging={"progress": False}, seed=context.seed)
        try:
            result = run_finetune(cfg, data_dir=context.data_dir, base=model, tokenizer=encoder.tokenizer,
                                  log=context.log, max_steps_given=gives_max_steps(where, options.get("set", [])))
        except EvaluationIncomplete as err:  # the languages tested before the failure stay on the board
            raise TaskIncomplete(str(err), rows_of(err.tests, err.protocol)) from err
    return rows_of(result["test"], result["protocol"])


@TASKS.register
def sib200(encoder, context: TaskContext) -> list[Result]:
    """SIB-200 topic classification, fine-tuned on English (recipe ``sib200_e5_small``), accuracy
    on every language's test set."""
    return finetune_results("sib200", "sib200", "sib200_e5_small", encoder, context)


@TASKS.register
def udpos(encoder, context: TaskContext) -> list[Result]:
    """UD part-of-speech tagging, fine-tuned on English EWT (recipe ``udpos_e5_small``), UPOS
    accuracy on every treebank's test set."""
    return finetune_results("udpos", "ud", "udpos_e5_small", encoder, context)
