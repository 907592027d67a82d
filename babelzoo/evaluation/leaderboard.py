"""Run a task × model matrix and write ``results.json``, ``leaderboard.md`` and PNG plots.

A model that fails to load, or a task that fails on a model, is reported as a failed cell and
the rest of the matrix still runs; a task that cannot run in this context (no data dir) is
reported as skipped."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import platform
import shutil
import tempfile
import time
import traceback
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from .._files import atomic_write, expand_path, write_json_atomic, write_text_atomic
from .._provenance import provenance, provenance_lines
from ..typed import Where, build, check_fields, unknown_key
from ..zoo.config import ConfigError
from .tasks import Result, TaskContext, TaskIncomplete, TaskSkipped, load_tasks

logger = logging.getLogger(__name__)

KINDS = ("zoo", "checkpoint", "random", "peer", "kge", "object")


@dataclass
class ModelSpec:
    """How to get a sentence encoder for the leaderboard.

    ``kind``: ``zoo`` (a registered entry with pretrained weights), ``checkpoint`` (a directory),
    ``random`` (an entry with random weights, tokenised with ``tokenizer``: a checkpoint
    directory or a zoo entry whose tokenizer to borrow), ``peer`` (a registered peer:
    ``muse_v3``, ``all_minilm_l6_v2``, or one a plug-in registers), ``kge`` (a KG embedding folder, for link prediction; with ``recipe``,
    a missing folder is first trained on the data dir's CoDEx-S by that
    :mod:`~babelzoo.knowledge.kge_recipes` recipe), or ``object`` (an encoder built in code, e.g.
    by the demo).

    ``tasks``: the run's tasks this row takes part in (default: all of them); the others are
    reported as skipped, so a baseline can join only the tasks it is a baseline for."""

    name: str
    kind: str = "zoo"
    source: str = ""
    tokenizer: Optional[str] = None
    layer: int = -1
    prefix: str = ""
    max_length: int = 128
    overrides: dict[str, Any] = field(default_factory=dict)
    recipe: Optional[str] = None
    tasks: Optional[list[str]] = None
    encoder: Any = None

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.name.strip():
            raise ConfigError(f"ModelSpec.name={self.name!r}: a model needs a name (the leaderboard's row)")
        if self.kind not in KINDS:
            raise ConfigError(f"model {self.name!r}: unknown kind {self.kind!r}; use {', '.join(KINDS[:-1])}")
        if self.max_length < 1:
            raise ConfigError(f"model {self.name!r}: max_length={self.max_length} must be at least 1")
        if self.tasks is not None and not self.tasks:
            raise ConfigError(f"model {self.name!r}: tasks must be a non-empty list of task names, got {self.tasks!r}")

    @classmethod
    def from_dict(cls, data: Any, where: Where = Where(label="model.")) -> "ModelSpec":
        """A spec from a config mapping; a missing, unknown or mistyped key is an error naming
        ``where`` (file, line and key path when it came from a YAML file)."""
        valid = [f for f in cls.__dataclass_fields__ if f != "encoder"]  # an encoder is built in code (kind: object)
        for key in data if isinstance(data, Mapping) else ():
            if key not in valid:
                raise ConfigError(f"{where.key(str(key))}: {unknown_key(str(key), valid, 'model spec')}")
        return build(cls, data, where, what="model spec")


def _tokenizer_from(source: Optional[str], model: str):
    """The tokenizer ``tokenizer:`` names for ``model``: a zoo model's, or a folder's."""
    from ..datasets.tokenizer import TokenizerError, load_tokenizer
    from ..datasets.tokenizer_files import META_FILE
    from ..zoo.factory import create_model, list_models

    if not source:
        raise ConfigError(f"model {model!r}: no tokenizer given; set `tokenizer:` to a tokenizer folder or a zoo "
                          "model name")
    if source in list_models():
        return create_model(source, pretrained=True).tokenizer
    if not Path(source).is_dir():
        raise TokenizerError(f"model {model!r}: tokenizer: {source}: no such folder (nor a zoo model name)")
    tokenizer = load_tokenizer(Path(source))
    if tokenizer is None:
        raise TokenizerError(f"model {model!r}: tokenizer: {source}: no tokenizer files there ({META_FILE}, "
                             "vocab.txt, sentencepiece.bpe.model or spiece.model)")
    return tokenizer


def train_kge_folder(spec: ModelSpec, data_dir: Optional[Path], log: Callable[[str], None]) -> None:
    """Train ``spec.recipe`` on CoDEx-S (``data_dir/codex-s``) and save it to ``spec.source``."""
    from ..knowledge.codex import read_codex
    from ..knowledge.kge import LinkPredictionData, save_kge
    from ..knowledge.kge_recipes import train_by_recipe

    folder = data_dir / "codex-s" if data_dir is not None else None
    if folder is None or not folder.is_dir():
        raise FileNotFoundError(f"model {spec.name!r}: {spec.source} has no KG embeddings yet, and training recipe "
                                f"{spec.recipe!r} needs --data-dir with a codex-s/ folder")
    data = LinkPredictionData.from_kb(read_codex(folder, name="codex-s", size="s"))
    log(f"[model {spec.name}] training {spec.recipe} on {folder} (saved to {spec.source})")
    model, summary, _ = train_by_recipe(spec.recipe, data)
    save_kge(model, data.entities, data.relations, spec.source, data="codex-s", recipe=spec.recipe,
             best_epoch=summary["best_epoch"], valid={k: round(v, 4) for k, v in summary["valid"].items()})


def build_encoder(spec: ModelSpec, data_dir: Optional[Path] = None, log: Callable[[str], None] = logger.info):
    from .encoders import BabelEncoder, KGEModelEncoder, build_peer

    if spec.kind in ("checkpoint", "kge"):  # a folder: ${VAR} and ~ as in every recipe path
        spec = dataclasses.replace(spec, source=expand_path(spec.source, f"model {spec.name!r}: source"))
    if spec.kind == "object":
        return spec.encoder
    if spec.kind == "kge":
        from ..knowledge.kge import KGE_CONFIG

        if spec.recipe and not (Path(spec.source) / KGE_CONFIG).is_file():
            train_kge_folder(spec, data_dir, log)
        return KGEModelEncoder.load(spec.name, spec.source)
    if spec.kind == "peer":
        from ..registry import RegistryError

        try:
            encoder = build_peer(spec.source)
        except RegistryError as err:
            raise ConfigError(str(err)) from None
        encoder.name = spec.name
        return encoder
    from ..zoo.factory import create_model
    from ..zoo.pretrained import from_pretrained

    if spec.kind == "zoo":
        model = create_model(spec.source, pretrained=True, **spec.overrides)
        tokenizer = model.tokenizer
    elif spec.kind == "checkpoint":
        if spec.overrides:
            raise ConfigError(f"model {spec.name!r}: overrides {sorted(spec.overrides)} apply to zoo and random "
                              f"models; a checkpoint is evaluated as it was saved")
        model = from_pretrained(spec.source)
        tokenizer = getattr(model, "tokenizer", None) or (spec.tokenizer and _tokenizer_from(spec.tokenizer, spec.name))
    else:
        tokenizer = _tokenizer_from(spec.tokenizer, spec.name)
        model = create_model(spec.source, vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.specials.pad,
                             **spec.overrides)
    if tokenizer is None:
        raise ConfigError(f"model {spec.name!r} has no tokenizer; give `tokenizer:`")
    return BabelEncoder(spec.name, model, tokenizer, layer=spec.layer, prefix=spec.prefix,
                        max_length=spec.max_length, extra={"weights": spec.kind})


@dataclass
class Cell:
    model: str
    task: str
    status: str  # ok | skipped | failed
    detail: str = ""
    seconds: float = 0.0


def run_matrix(specs: Sequence[ModelSpec], tasks: Sequence[str], context: TaskContext,
               log: Callable[[str], None] = logger.info) -> tuple[list[Result], list[Cell]]:
    from .encoders import CachedEncoder, KGEModelEncoder

    registry = load_tasks()
    for task in tasks:
        registry.get(task)  # unknown names fail before any model is built
    for spec in specs:
        outside = sorted(set(spec.tasks or ()) - set(tasks))
        if outside:
            raise ConfigError(f"model {spec.name!r}: tasks {outside} are not among this run's tasks "
                              f"({', '.join(tasks)})")
    names = [spec.name for spec in specs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"models: the name(s) {repeated} appear more than once; every row needs its own name "
                          f"(their numbers would be averaged into one row)")
    results: list[Result] = []
    cells: list[Cell] = []
    total = len(specs) * len(tasks)
    done = 0
    for spec in specs:
        start = time.perf_counter()
        try:
            encoder = build_encoder(spec, context.data_dir, log)
            if hasattr(encoder, "encode") and not isinstance(encoder, KGEModelEncoder):  # text encoders
                encoder = CachedEncoder(encoder)
        except Exception as err:  # a broken model is one failed row, not a failed run
            detail = f"{type(err).__name__}: {err}"
            log(f"[model {spec.name}] failed to load: {detail}")
            cells += [Cell(spec.name, task, "failed", detail) for task in tasks]
            done += len(tasks)
            continue
        log(f"[model {spec.name}] ready in {time.perf_counter() - start:.1f}s")
        for task in tasks:
            done += 1
            start = time.perf_counter()
            if spec.tasks is not None and task not in spec.tasks:
                cells.append(Cell(spec.name, task, "skipped", f"not among {spec.name}'s tasks ({', '.join(spec.tasks)})"))
                log(f"[{done}/{total}] {spec.name} × {task}: skipped: not among this model's tasks")
                continue
            try:
                rows = registry.get(task)(encoder, context)
                results += rows
                if rows:
                    cells.append(Cell(spec.name, task, "ok", f"{len(rows)} numbers", time.perf_counter() - start))
                    status = summarise_line(rows)
                else:  # an empty cell is not a result
                    detail = f"the task produced no numbers (languages asked: {context.languages or 'all'})"
                    cells.append(Cell(spec.name, task, "failed", detail, time.perf_counter() - start))
                    status = f"FAILED: {detail}"
            except TaskIncomplete as err:
                results += err.rows
                cells.append(Cell(spec.name, task, "failed", f"{err} ({len(err.rows)} numbers kept)",
                                  time.perf_counter() - start))
                status = f"FAILED: {err} ({len(err.rows)} numbers kept)"
                log(traceback.format_exc(limit=3))
            except TaskSkipped as why:
                cells.append(Cell(spec.name, task, "skipped", str(why)))
                status = f"skipped: {why}"
            except Exception as err:
                cells.append(Cell(spec.name, task, "failed", f"{type(err).__name__}: {err}"))
                status = f"FAILED: {type(err).__name__}: {err}"
                log(traceback.format_exc(limit=3))
            log(f"[{done}/{total}] {spec.name} × {task}: {status} ({time.perf_counter() - start:.1f}s)")
    return results, cells


def summarise_line(rows: Sequence[Result]) -> str:
    return ", ".join(f"{column} {value:.3f}" for column, value in column_means(rows).items())


def column_means(rows: Sequence[Result]) -> dict[str, float]:
    """The mean of each leaderboard column (a result's ``family``, e.g. ``acc@1 en→X``) over ``rows``."""
    groups: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        groups[row.family].append(row.value)
    return {column: sum(values) / len(values) for column, values in groups.items()}


def leaderboard_table(results: Sequence[Result], cells: Sequence[Cell], title: str = "babelzoo leaderboard",
                      meta: Optional[Mapping[str, Any]] = None) -> str:
    """Markdown: one row per model, one column per (task, ``Result.family``), means over
    languages; under the title, how the numbers were made
    (:func:`~babelzoo._provenance.provenance_lines` of ``meta``, where it records them)."""
    columns: list[tuple[str, str]] = []
    values: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    models: list[str] = []
    for cell in cells:
        if cell.model not in models:
            models.append(cell.model)
    for row in results:
        key = (row.task, row.family)
        if key not in columns:
            columns.append(key)
        values[(row.model, *key)].append(row.value)
    meta = meta or {}
    made = "  \n".join(provenance_lines(meta)) if any(meta.get(key) for key in ("machine", "command", "commit")) else ""
    lines = [f"# {title}", "", *([made, ""] if made else []),
             "Means over languages; every number's protocol is in results.json.", ""]
    lines.append("| model | " + " | ".join(f"{task}<br>{family}" for task, family in columns) + " |")
    lines.append("|---|" + "---:|" * len(columns))
    failed = {(c.model, c.task): c.status for c in cells if c.status != "ok"}
    for model in models:
        row = []
        for task, family in columns:
            got = values.get((model, task, family))
            row.append(f"{sum(got) / len(got):.3f}" if got else failed.get((model, task), "–"))
        lines.append(f"| {model} | " + " | ".join(row) + " |")
    notes = [c for c in cells if c.status != "ok"]
    if notes:
        lines += ["", "Cells not measured:", ""]
        lines += [f"- {c.model} × {c.task}: {c.status} ({c.detail})" for c in notes]
    return "\n".join(lines) + "\n"


def per_language_tables(results: Sequence[Result], title: str = "babelzoo leaderboard") -> str:
    """Markdown: per task, one row per number (a language, a direction), one column per model."""
    lines = [f"# {title}: every number", ""]
    by_task: dict[str, list[Result]] = defaultdict(list)
    for row in results:
        by_task[row.task].append(row)
    for task, rows in by_task.items():
        models = list(dict.fromkeys(r.model for r in rows))
        metrics = list(dict.fromkeys(r.metric for r in rows))
        value = {(r.model, r.metric): r.value for r in rows}
        lines += [f"## {task}", "", "| metric | " + " | ".join(models) + " |", "|---|" + "---:|" * len(models)]
        for metric in metrics:
            cells = [f"{value[(m, metric)]:.3f}" if (m, metric) in value else "–" for m in models]
            lines.append(f"| {metric} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def write_outputs(results: Sequence[Result], cells: Sequence[Cell], out_dir: Path, meta: dict[str, Any],
                  title: str = "babelzoo leaderboard") -> dict[str, Path]:
    """Write ``results.json``, ``leaderboard.md``, ``per_language.md`` and one PNG per task into
    ``out_dir``. Every file is made first in a staging folder; only when all of them are whole
    do they replace the earlier run's, ``results.json`` last, and the earlier run's plots that
    this run does not make are removed (only files ``results.json`` says that run wrote). A
    failure at any point (a full disk) leaves the earlier results as they were. ``meta`` is
    recorded with the results, with :func:`~babelzoo._provenance.provenance` of its ``command``
    (what made them: machine, command, commit, date), the threads and the versions."""
    import torch

    meta = {**meta, **provenance(meta.get("command")), "threads": torch.get_num_threads(),
            "python": platform.python_version(), "torch": torch.__version__}
    out_dir.mkdir(parents=True, exist_ok=True)
    earlier = _earlier_outputs(out_dir / "results.json")
    stage = Path(tempfile.mkdtemp(prefix=".leaderboard.", dir=out_dir))
    try:
        names = {"leaderboard": "leaderboard.md", "per_language": "per_language.md"}
        write_text_atomic(stage / names["leaderboard"], leaderboard_table(results, cells, title, meta))
        write_text_atomic(stage / names["per_language"], per_language_tables(results, title))
        names.update({key: path.name for key, path in write_plots(results, stage).items()})
        names["results"] = "results.json"
        payload = {"meta": meta, "results": [r.to_dict() for r in results], "cells": [c.__dict__ for c in cells],
                   "files": sorted(names.values())}
        write_json_atomic(stage / names["results"], payload)
        for key, name in names.items():
            if key != "results":
                os.replace(stage / name, out_dir / name)
        for name in sorted(earlier - set(names.values())):
            (out_dir / name).unlink(missing_ok=True)
        os.replace(stage / "results.json", out_dir / "results.json")
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return {key: out_dir / name for key, name in names.items()}


def _earlier_outputs(results_json: Path) -> set[str]:
    """The plain file names an earlier run wrote beside ``results_json`` (its ``files``; for a
    run that did not list them, its tasks' plots), never a path outside the folder."""
    try:
        earlier = json.loads(results_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    if not isinstance(earlier, dict):
        return set()
    names = earlier.get("files")
    if not isinstance(names, list):
        rows = earlier.get("results") if isinstance(earlier.get("results"), list) else []
        names = [f"{row['task']}.png" for row in rows if isinstance(row, dict) and isinstance(row.get("task"), str)]
    return {n for n in names if isinstance(n, str) and n == Path(n).name and n not in ("", ".", "..")}


def written_outputs(out_dir: Path) -> Optional[set[str]]:
    """The files a :func:`write_outputs` run recorded writing into ``out_dir`` (the ``files`` of
    its ``results.json``, itself included), or None where no run recorded any."""
    try:
        written = json.loads((out_dir / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    names = written.get("files") if isinstance(written, dict) and isinstance(written.get("meta"), dict) else None
    if not isinstance(names, list) or "results.json" not in names:
        return None
    return {n for n in names if isinstance(n, str) and n == Path(n).name and n not in ("", ".", "..")}


def write_plots(results: Sequence[Result], out_dir: Path) -> dict[str, Path]:
    """One bar chart per task: models × metric families."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    paths = {}
    by_task: dict[str, list[Result]] = defaultdict(list)
    for row in results:
        by_task[row.task].append(row)
    for task, rows in by_task.items():
        models = list(dict.fromkeys(r.model for r in rows))
        families = list(dict.fromkeys(r.family for r in rows))
        fig, ax = plt.subplots(figsize=(1.6 + 1.2 * len(models) * max(1, len(families)) / 2, 3.2))
        width = 0.8 / len(families)
        for j, family in enumerate(families):
            means = [column_means([r for r in rows if r.model == m and r.family == family]).get(family, 0.0)
                     for m in models]
            ax.bar([i + j * width for i in range(len(models))], means, width, label=family)
        ax.set_xticks([i + width * (len(families) - 1) / 2 for i in range(len(models))], models, rotation=20,
                      ha="right", fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_title(task)
        ax.legend(fontsize=7)
        fig.tight_layout()
        paths[f"plot_{task}"] = out_dir / f"{task}.png"
        atomic_write(paths[f"plot_{task}"], lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
        plt.close(fig)
    return paths
