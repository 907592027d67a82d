"""One run of the adaptation benchmark: its options and folders (where each arm's model lies), the
recipe's pairs read once and their held-out tenth, SIB-200 rows, child processes timed, and
results kept under the key they depend on."""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from babelzoo._files import write_json_atomic

from .arms import (
    OBJECTIVE,
    OWN_EXCLUDE,
    OWN_PAIRS,
    RECIPE,
    RECIPE_ARMS,
    RUN_FOLDER,
    VOCAB_INIT,
    arm_overrides,
    base_overrides,
    read_shipped_recipe,
)

REPO = Path(__file__).resolve().parents[2]


def timed_child(command: list[str], log_file: Path, env: Mapping[str, str]) -> dict[str, float]:
    """Run ``command`` with its output in ``log_file``; its wall and CPU seconds (children's
    user + system time). A failure stops the benchmark with the log's end."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    with open(log_file, "w", encoding="utf-8") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env}, cwd=REPO)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        tail = log_file.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise SystemExit(f"{shlex.join(command)} failed (exit {done.returncode}); end of {log_file}:\n{tail}")
    return {"wall_s": wall, "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)}


class Run:
    """One benchmark run: its options, folders and the recipe's pairs (read once, when needed)."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.work = Path(args.work).resolve()
        self.data_dir = Path(args.data_dir).resolve()
        self.langs = None if args.langs == "auto" else args.langs.split(",")
        self.env = {"BABELZOO_DATA_DIR": str(self.data_dir), "OMP_NUM_THREADS": str(args.threads)}
        os.environ["BABELZOO_DATA_DIR"] = str(self.data_dir)  # the recipe's ${BABELZOO_DATA_DIR}
        self._pairs = self._heldout = None

    def recipe_config(self):
        """The ``recipe`` arm's TrainConfig (what the st arm copies)."""
        from babelzoo.train.config import load_recipe, recipe_path

        return load_recipe(recipe_path(RECIPE), self.overrides("recipe", read_shipped_recipe()))

    def overrides(self, arm: str, recipe: dict) -> list[str]:
        grown = self.work / VOCAB_INIT if arm == "+vocab" else None
        own = self.work / OWN_PAIRS if arm == "+own" else None
        exclude = self.work / OWN_EXCLUDE if arm == "+own" else None
        return base_overrides(self.work / arm / RUN_FOLDER, self.args.max_steps, self.langs) + arm_overrides(
            arm, recipe, grown, own, exclude)

    def pairs(self):
        """(the recipe's pairs source after reading, its corpora with the prefix, α, config)."""
        if self._pairs is None:
            from babelzoo.train.run import parse_data

            cfg = self.recipe_config()
            (source,), alpha = parse_data(cfg)[OBJECTIVE]
            self._pairs = (source, source.corpora(), alpha, cfg)
        return self._pairs

    def heldout(self) -> dict[str, list[tuple[str, str]]]:
        if self._heldout is None:
            self._heldout = heldout_pairs(self)
        return self._heldout

    def adapted(self) -> list[str]:
        if self.langs:
            return list(self.langs)
        return list(self.pairs()[0].record["languages"])


def heldout_pairs(run: Run) -> dict[str, list[tuple[str, str]]]:
    """``{language: [(English, X)]}``: the held-out tenth of the recipe's pairs source (split by
    the English text, so no training pair of any language shares its English side), keeping the
    pairs whose English and whose translation are each unique in their language (accuracy@1
    needs one right answer)."""
    import dataclasses
    from collections import Counter

    source = run.pairs()[0]
    held = dataclasses.replace(source, split="heldout")
    out, corpora = {}, held.read()
    for code, corpus in zip(held.record["languages"], corpora):  # the adapted languages' corpora come first
        english, other = Counter(en for en, _ in corpus.pairs), Counter(x for _, x in corpus.pairs)
        out[code] = [(en, x) for en, x in corpus.pairs if english[en] == 1 and other[x] == 1]
    return out


def sib200_rows(run: Run, lang: str, splits: Sequence[str]) -> dict:
    """SIB-200 rows of ``lang`` in ``splits``, keyed by index_id."""
    from babelzoo.datasets.labelled import read_sib200

    return {row.id: row for split in splits for row in read_sib200(run.data_dir, lang, split)}


def model_of(run: Run, arm: str) -> Optional[Path]:
    if arm == "e5":
        return None
    return run.work / arm / RUN_FOLDER / "model" if arm in RECIPE_ARMS else run.work / arm / "model"


def model_files(run: Run, arm: str) -> Optional[dict]:
    """Size and time of each file of the arm's model: a model trained again is evaluated again."""
    model = model_of(run, arm)
    if model is None or not model.is_dir():
        return None
    return {p.name: [p.stat().st_size, p.stat().st_mtime_ns] for p in sorted(model.iterdir()) if p.is_file()}


def saved(path: Path, key: Any) -> Optional[dict]:
    """A result saved by :func:`keep` with this ``key``, else None."""
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("key") == key:
            return data["result"]
    return None


def keep(path: Path, key: Any, result: dict) -> dict:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, {"key": key, "result": result})
    return result
