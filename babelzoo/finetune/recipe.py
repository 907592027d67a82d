"""The ``task:`` part of a fine-tuning recipe: what to fine-tune on, and how to evaluate.

A fine-tuning recipe is a :class:`~babelzoo.train.config.TrainConfig` (the same YAML format as
pre-training, trained by the same :class:`~babelzoo.train.Trainer`) whose ``task`` mapping is a
:class:`TaskSpec`::

    model: multilingual_e5_small
    task:
      kind: sequence_classification          # or token_classification, probe
      train: ${BABELZOO_DATA_DIR}/sib200/eng_Latn/train.tsv
      dev: ${BABELZOO_DATA_DIR}/sib200/eng_Latn/dev.tsv
      test: ${BABELZOO_DATA_DIR}/sib200/*/test.tsv   # the folder matched by * names the language
      label_column: category
      prefix: "query: "
      epochs: 4
      head: {pooling: mean}
    optimizer: adamw
    lr: 5.0e-5
    eval_every: 20

Model selection reads ``dev`` only (or, without ``dev``, a held-back ``dev_fraction`` of
``train``); ``test`` files are read after training has ended.
"""

from __future__ import annotations

import dataclasses
import glob
import math
import os
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from ..typed import Where, build, check_fields
from ..zoo.config import ConfigError

KINDS = ("sequence_classification", "token_classification", "probe")
FORMATS = ("tsv", "jsonl", "conllu", "bio")


@dataclass(frozen=True)
class TaskSpec:
    """``kind``: the head (and so the objective); ``train``/``dev``/``test``: files (``test`` a
    ``{language: path}`` mapping or a glob whose first ``*`` names the language); ``format``:
    ``tsv``/``jsonl`` (classification), ``conllu``/``bio`` (tagging), by suffix when omitted;
    ``init``: ``pretrained`` (the zoo entry's weights), ``random``, or a checkpoint directory;
    ``head``: further :class:`~babelzoo.zoo.config.HeadConfig` fields; ``labels``: the label
    set (default: UPOS for CoNLL-U, else the sorted labels of ``train``); ``epochs`` sets
    ``max_steps``; ``freeze``: parameter-name prefixes kept fixed (``embeddings.word``)."""

    kind: str = "sequence_classification"
    train: str = ""
    dev: Optional[str] = None
    dev_fraction: float = 0.0
    test: Any = None
    format: Optional[str] = None
    source: Optional[str] = None
    text_column: str = "text"
    label_column: str = "label"
    text_b_column: Optional[str] = None
    id_column: Optional[str] = None
    tag_column: str = "upos"
    labels: Optional[tuple] = None
    init: str = "pretrained"
    head: dict = field(default_factory=dict)
    prefix: str = ""
    max_length: int = 128
    eval_max_length: Optional[int] = None
    eval_batch_size: int = 64
    epochs: Optional[float] = None
    freeze: tuple = ()

    def __post_init__(self) -> None:
        check_fields(self, "task")
        _choice("kind", self.kind, KINDS)
        if self.format is not None:
            _choice("format", self.format, FORMATS)
        if not isinstance(self.train, str) or not self.train:
            raise ConfigError("task.train: give the training file")
        if self.dev is not None and self.dev_fraction:
            raise ConfigError("task.dev and task.dev_fraction: give one (a dev file, or a held-back share of train)")
        if self.dev is None and not 0.0 < self.dev_fraction < 1.0:
            raise ConfigError(f"task.dev_fraction={self.dev_fraction!r}: without task.dev, hold back a share of "
                              "train in (0, 1) for model selection (e.g. 0.1)")
        for name in ("max_length", "eval_batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 3:
                raise ConfigError(f"task.{name}={value!r} must be an integer of at least 3")
        if self.epochs is not None and not (isinstance(self.epochs, (int, float)) and self.epochs > 0):
            raise ConfigError(f"task.epochs={self.epochs!r} must be a positive number")
        if not isinstance(self.head, Mapping):
            raise ConfigError(f"task.head={self.head!r} must be a mapping of HeadConfig fields")
        reserved = sorted({"kind", "labels"} & set(self.head))
        if reserved:
            raise ConfigError(f"task.head: {reserved} come from task.kind and task.labels")
        if self.prefix and self.token_level:
            raise ConfigError("task.prefix applies to sequence tasks; a tagging task labels every word it reads")
        if self.test is not None and not isinstance(self.test, (str, Mapping)):
            raise ConfigError("task.test: a {language: path} mapping or a glob such as data/*/test.tsv")

    @property
    def token_level(self) -> bool:
        return self.kind == "token_classification"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: Optional[Where] = None) -> "TaskSpec":
        """From a recipe's ``task`` mapping; ``where`` (the recipe file and its key lines) puts
        the file and line in errors."""
        if not isinstance(data, Mapping) or not data:
            raise ConfigError("task: a fine-tuning recipe needs a task mapping (kind, train, dev, test, ...)")
        return build(cls, data, (where or Where()).key("task"), what="task")

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["labels"] = list(self.labels) if self.labels else None
        out["freeze"] = list(self.freeze)
        return out

    # --- files ---------------------------------------------------------------------------------
    def file_format(self, path: str) -> str:
        if self.format:
            return self.format
        name = path.lower().removesuffix(".gz")
        for suffix, kind in ((".conllu", "conllu"), (".tsv", "tsv"), (".jsonl", "jsonl"), (".json", "jsonl"),
                             (".bio", "bio"), (".conll", "bio")):
            if name.endswith(suffix):
                return kind
        raise ConfigError(f"task.format: cannot tell the format of {path} from its name; set format: "
                          f"{' | '.join(FORMATS)}")

    def resolve(self, data_dir: Optional[str | Path] = None) -> "TaskSpec":
        """A copy with ``${VAR}`` expanded in every path (``BABELZOO_DATA_DIR`` from ``data_dir``
        when given, else the environment)."""
        env = dict(os.environ)
        if data_dir is not None:
            env["BABELZOO_DATA_DIR"] = str(data_dir)

        def expand(value: str, where: str) -> str:
            try:
                return os.path.expanduser(string.Template(value).substitute(env))
            except KeyError as err:
                raise ConfigError(f"task.{where}: {value!r} names {err.args[0]!r}, which is not set "
                                  "(for BABELZOO_DATA_DIR, pass --data-dir)") from None

        test = self.test
        if isinstance(test, Mapping):
            test = {str(k): expand(str(v), f"test.{k}") for k, v in test.items()}
        elif isinstance(test, str):
            test = expand(test, "test")
        init = self.init if self.init in ("pretrained", "random") else expand(self.init, "init")
        return dataclasses.replace(self, train=expand(self.train, "train"),
                                   dev=expand(self.dev, "dev") if self.dev else None, test=test, init=init)

    def test_files(self) -> dict[str, Path]:
        """``{language: path}`` of the evaluation files (call on a :meth:`resolve`-d spec)."""
        if self.test is None:
            return {}
        if isinstance(self.test, Mapping):
            return {lang: Path(path) for lang, path in self.test.items()}
        if "*" not in self.test:
            raise ConfigError(f"task.test={self.test!r}: a glob needs a * where the language goes")
        head, _, _ = self.test.partition("*")
        pattern = re.compile(re.escape(head) + r"([^/]+)")
        found = {}
        for path in sorted(glob.glob(self.test)):
            match = pattern.match(path)
            found.setdefault(match.group(1), Path(path))
        if not found:
            raise ConfigError(f"task.test={self.test!r} matches no file")
        return found

    def steps(self, train_size: int, global_batch: int) -> int:
        """Optimizer steps for ``epochs`` passes (the trainer drops each epoch's short tail)."""
        per_epoch = train_size // global_batch
        return max(1, math.ceil(self.epochs * per_epoch))


def _choice(name: str, value: Any, options: tuple[str, ...]) -> None:
    if value not in options:
        raise ConfigError(f"task.{name}={value!r} must be one of {', '.join(map(repr, options))}")
