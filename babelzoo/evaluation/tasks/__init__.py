"""Benchmark tasks, registered by name. A task runs one model (a sentence encoder, or a whole
model object for tasks that need more) and returns :class:`Result` rows, each carrying the
protocol it was measured under."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ...errors import BabelzooError
from ...registry import Registry
from ...zoo.config import ConfigError

logger = logging.getLogger(__name__)


@dataclass
class Result:
    task: str
    model: str
    metric: str
    value: float
    protocol: dict[str, Any] = field(default_factory=dict)
    family: str = ""  # the leaderboard column this number is averaged into, e.g. "acc@1 en→X"

    def __post_init__(self) -> None:
        self.family = self.family or self.metric

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TaskContext:
    """What tasks may use: the standard data folder (None when absent), a language subset,
    a seed, a cap on evaluation size for quick runs, and per-task options (a fine-tuning
    task's ``recipe`` and ``set`` overrides)."""

    data_dir: Optional[Path] = None
    languages: Optional[list[str]] = None
    seed: int = 0
    limit: Optional[int] = None
    log: Callable[[str], None] = logger.info
    options: dict[str, dict[str, Any]] = field(default_factory=dict)  # per task, from the config's task_options

    def __post_init__(self) -> None:
        if self.limit is not None and (not isinstance(self.limit, int) or isinstance(self.limit, bool)
                                       or self.limit < 1):
            raise ConfigError(f"limit={self.limit!r} must be a positive number of items per language, or null for "
                              f"all (0 does not mean unlimited)")
        if self.languages is not None and (not isinstance(self.languages, list) or not self.languages
                                           or not all(isinstance(x, str) and x for x in self.languages)):
            raise ConfigError(f"languages={self.languages!r} must be a non-empty list of language codes, or null "
                              f"for every language present")


class TaskSkipped(RuntimeError):
    """A task cannot run in this context (missing data or a model that lacks what it needs)."""


class TaskIncomplete(RuntimeError):
    """A task failed part-way: ``rows`` holds the numbers of the parts it finished (kept on the
    leaderboard), the message says where it stopped and why."""

    def __init__(self, message: str, rows: list):
        super().__init__(message)
        self.rows = rows


def per_language(langs: Sequence[str], run: Callable[[str], list["Result"]],
                 log: Optional[Callable[[str, str, list["Result"]], None]] = None) -> list["Result"]:
    """``run(lang)`` for each language in turn; if one fails unexpectedly, :class:`TaskIncomplete`
    carries the rows of the languages already done (an error in the user's data propagates as
    it is). ``log(lang, "i/n", rows)`` after each."""
    results: list[Result] = []
    for i, lang in enumerate(langs):
        try:
            rows = run(lang)
        except (TaskSkipped, TaskIncomplete, BabelzooError):  # a data error names its file: fix it, run again
            raise
        except Exception as err:
            raise TaskIncomplete(f"stopped at {lang} after {i} of {len(langs)} languages: "
                                 f"{type(err).__name__}: {err}", results) from err
        results += rows
        if log is not None:
            log(lang, f"{i + 1}/{len(langs)}", rows)
    return results


# babelzoo's tasks: those of this package are its built-in entry points; those on data that
# installed packages ship (the offline sources' and plug-ins') register through the group
TASKS: Registry[Callable[..., list[Result]]] = Registry("task", group="babelzoo.tasks", builtin={
    **dict.fromkeys(["tatoeba", "tatoeba_mteb", "multi30k"], f"{__name__}.retrieval"),
    "bli_cldr": f"{__name__}.lexicon",
    **dict.fromkeys(["cldr_linking", "codex_link_prediction", "wn18rr_link_prediction"], f"{__name__}.knowledge"),
    **dict.fromkeys(["flores_retrieval", "sib200_probe"], f"{__name__}.transfer_probe"),
    **dict.fromkeys(["sib200", "udpos"], f"{__name__}.transfer"),
}, listed_by="babelzoo list tasks")


def load_tasks() -> Registry:
    """:data:`TASKS`, every task (built in and installed) imported."""
    TASKS.load_plug_ins()
    return TASKS
