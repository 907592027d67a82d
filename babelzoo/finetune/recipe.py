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

``train``, ``dev`` and the values of a ``test`` mapping may also name a split of a Hugging Face
dataset, ``{kind: hf_dataset, path: json, data_files: ..., split: train}``
(:class:`~babelzoo.datasets.hf_labelled.HfSplit`); its language is told by the files it reads, as
a file's is by its path, or by its config name (see :mod:`babelzoo.finetune.protocol`), else it is
``task.source``.
"""

from __future__ import annotations

import dataclasses
import glob
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from .._files import expand_path
from ..datasets.hf_labelled import HfSplit
from ..typed import Where, build, check_fields
from ..zoo.config import ConfigError

KINDS = ("sequence_classification", "token_classification", "probe")
FORMATS = ("tsv", "jsonl", "conllu", "bio")


@dataclass(frozen=True)
class TaskSpec:
    """``kind``: the head (and so the objective); ``train``/``dev``/``test``: files or
    :class:`~babelzoo.datasets.hf_labelled.HfSplit` (``test`` a ``{language: path or split}``
    mapping, or a glob whose first ``*`` names the language); ``format``:
    ``tsv``/``jsonl`` (classification), ``conllu``/``bio`` (tagging), by suffix when omitted;
    ``init``: ``pretrained`` (the zoo entry's weights), ``random``, or a checkpoint directory;
    ``head``: further :class:`~babelzoo.zoo.model_config.HeadConfig` fields; ``labels``: the label
    set (default: UPOS for CoNLL-U, a dataset's ``ClassLabel`` names, else the sorted labels of
    ``train``); ``words_column``: a dataset's list of words (tagging); ``epochs`` sets
    ``max_steps``, unless the recipe or a ``--set`` gives a smaller ``max_steps``, which caps the
    run (:func:`training_steps`); ``freeze``: parameter-name prefixes kept fixed
    (``embeddings.word``)."""

    kind: str = "sequence_classification"
    train: Any = ""  # a path or an HfSplit
    dev: Any = None
    dev_fraction: float = 0.0
    test: Any = None
    format: Optional[str] = None
    source: Optional[str] = None
    text_column: str = "text"
    label_column: str = "label"
    text_b_column: Optional[str] = None
    id_column: Optional[str] = None
    tag_column: str = "upos"
    words_column: str = "tokens"
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
        for role in ("train", "dev"):
            value = getattr(self, role)
            if isinstance(value, Mapping):
                object.__setattr__(self, role, HfSplit.parse(value, Where().key("task").key(role)))
            elif value is not None and not isinstance(value, (str, HfSplit)):
                raise ConfigError(f"task.{role}={value!r}: a file path or {{kind: hf_dataset, path: ..., split: ...}}")
        if isinstance(self.test, Mapping):
            object.__setattr__(self, "test", {str(lang): HfSplit.parse(v, Where().key("task").key("test").key(str(lang)))
                                              if isinstance(v, Mapping) else v for lang, v in self.test.items()})
        if not self.train:
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
        if self.labels is not None:
            _check_labels(self.labels)
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
        where = (where or Where()).key("task")

        def split(value: Any, at: Where) -> Any:  # a dataset's mapping, parsed where its file lines are known
            return HfSplit.parse(value, at) if isinstance(value, Mapping) else value

        data = {**data, **{role: split(data[role], where.key(role)) for role in ("train", "dev") if role in data}}
        if isinstance(data.get("test"), Mapping):
            data["test"] = {lang: split(v, where.key("test").key(str(lang))) for lang, v in data["test"].items()}
        return build(cls, data, where, what="task")

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["head"] = dict(self.head)
        out["labels"] = list(self.labels) if self.labels else None
        out["freeze"] = list(self.freeze)
        for role in ("train", "dev"):
            out[role] = recipe_value(out[role])
        if isinstance(self.test, Mapping):
            out["test"] = {lang: recipe_value(v) for lang, v in self.test.items()}
        return out

    # --- files ---------------------------------------------------------------------------------
    def file_format(self, path: str | HfSplit) -> str:
        """``tsv``, ``jsonl``, ``conllu``, ``bio`` (``format``, else by suffix), or ``hf_dataset``."""
        if isinstance(path, HfSplit):
            return "hf_dataset"
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
        env = dict(os.environ) if data_dir is None else {**os.environ, "BABELZOO_DATA_DIR": str(data_dir)}

        def expand(value: str, where: str) -> str:
            return expand_path(value, f"task.{where}", env, hint=" (for BABELZOO_DATA_DIR, pass --data-dir)")

        def data(value: Any, where: str) -> Any:
            if isinstance(value, HfSplit):
                return value.expanded(lambda text, key: expand(text, f"{where}.{key}"))
            return expand(str(value), where)

        test = self.test
        if isinstance(test, Mapping):
            test = {str(k): data(v, f"test.{k}") for k, v in test.items()}
        elif isinstance(test, str):
            test = expand(test, "test")
        init = self.init if self.init in ("pretrained", "random") else expand(self.init, "init")
        return dataclasses.replace(self, train=data(self.train, "train"),
                                   dev=data(self.dev, "dev") if self.dev else None, test=test, init=init)

    def test_files(self) -> dict[str, Path]:
        """``{language: path}`` of the evaluation files (call on a :meth:`resolve`-d spec). A glob
        that matches nothing, a folder, or two files of one language is an error."""
        if self.test is None:
            return {}
        if isinstance(self.test, Mapping):
            return {lang: path if isinstance(path, HfSplit) else Path(path) for lang, path in self.test.items()}
        found: dict[str, Path] = {}
        for path in sorted(glob.glob(self.test)):
            lang = self.language_of(path)
            if not lang:
                raise ConfigError(f"task.test={self.test!r}: cannot name the language of {path} (the part of its "
                                  "path the first * stands for)")
            if lang in found:
                raise ConfigError(f"task.test={self.test!r} matches two files of language {lang!r}: {found[lang]} "
                                  f"and {path}; make the glob match one file per language")
            if Path(path).is_dir():
                raise ConfigError(f"task.test={self.test!r} matches {path}, a folder; the glob must name files "
                                  "(e.g. data/*/test.tsv)")
            found[lang] = Path(path)
        if not found:
            raise ConfigError(f"task.test={self.test!r} matches no file")
        return found

    def language_of(self, path: str | Path) -> Optional[str]:
        """The language the file ``path`` belongs to, named as ``test`` names languages: the part
        of the path the glob's first ``*`` stands for (``data/*/test.tsv``: ``data/deu_Latn/dev.tsv``
        is ``deu_Latn``), or, for a ``{language: path or split}`` mapping, the one language whose
        test file (or a file its test split reads) lies in the same folder. None when the path
        tells no language."""
        if self.test is None or isinstance(path, HfSplit):
            return None
        where = os.path.abspath(path)
        if isinstance(self.test, Mapping):
            langs = [lang for lang, test in self.test.items()
                     if os.path.dirname(where) in {os.path.dirname(os.path.abspath(f)) for f in _files_of(test)}]
            return langs[0] if len(langs) == 1 else None
        match = _language_pattern(self.test).match(where)
        return match.group(1) if match else None

    def steps(self, train_size: int, global_batch: int) -> int:
        """Optimizer steps for ``epochs`` passes (the trainer drops each epoch's short tail)."""
        per_epoch = train_size // global_batch
        return max(1, math.ceil(self.epochs * per_epoch))


def gives_max_steps(where: Where, overrides: Sequence[str] = ()) -> bool:
    """Whether a recipe file (read at ``where``) or its ``--set`` overrides give ``max_steps``."""
    return "max_steps" in (where.lines or {}) or any(item.split("=", 1)[0].strip() == "max_steps"
                                                     for item in overrides)


def training_steps(spec: TaskSpec, max_steps: int, max_steps_given: bool, train_size: int,
                   global_batch: int) -> tuple[int, str]:
    """The run's optimizer steps and which setting decided them: ``task.epochs`` when set, capped
    by ``max_steps`` when the caller gave it (``max_steps_given``), else ``max_steps``."""
    if spec.epochs is None:
        return max_steps, f"max_steps={max_steps}"
    by_epochs = spec.steps(train_size, global_batch)
    epochs = f"task.epochs={spec.epochs:g} at {train_size // global_batch} steps an epoch"
    if not max_steps_given:
        return by_epochs, epochs
    if max_steps < by_epochs:
        return max_steps, f"max_steps={max_steps} caps {epochs} ({by_epochs} steps)"
    return by_epochs, f"{epochs}, within max_steps={max_steps}"


def recipe_value(value: Any) -> Any:
    """A task's data entry as a recipe writes it: a path as text, a split as its mapping."""
    if isinstance(value, HfSplit):
        return value.to_dict()
    return str(value) if isinstance(value, Path) else value


def _files_of(test: str | Path | HfSplit) -> tuple[str | Path, ...]:
    """The local files a test entry reads: the file, or those of the dataset split."""
    return test.local_files if isinstance(test, HfSplit) else (test,)


def shown(value: Any) -> str:
    """A task's data entry in a message: the path, or the dataset and split."""
    return str(value)


def _language_pattern(test: str) -> re.Pattern:
    """A regex over absolute paths up to the test glob's language folder (or file name), the
    part the first ``*`` stands for captured."""
    if "*" not in test:
        raise ConfigError(f"task.test={test!r}: a glob needs a * where the language goes")
    parts = os.path.abspath(test).split(os.sep)
    at = next(i for i, part in enumerate(parts) if "*" in part)
    head = parts[at].partition("*")
    rest = "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in head[2])
    folder = "/".join(re.escape(part) for part in parts[:at])
    return re.compile(f"{folder}/{re.escape(head[0])}([^/]*){rest}(?:/|$)")


def _check_labels(labels: tuple) -> None:
    """A label set read as written: no empty set (leaving ``labels`` out takes those of
    ``train``), only strings, none repeated, none with whitespace around it (a file's
    ``"pos "`` is refused too, so the two can never be told apart silently)."""
    if not labels:
        raise ConfigError("task.labels=[]: list the labels, or leave labels out to take the labels found in "
                          "task.train")
    for label in labels:
        if not isinstance(label, str) or not label:
            raise ConfigError(f"task.labels: {label!r} is not a label; labels are non-empty strings as the files "
                              f"write them (quote numbers: '{label}')")
        if label != label.strip():
            raise ConfigError(f"task.labels: {label!r} has whitespace around it; labels are compared exactly: "
                              f"write {label.strip()!r}")
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ConfigError(f"task.labels: {repeated} listed more than once")


def _choice(name: str, value: Any, options: tuple[str, ...]) -> None:
    if value not in options:
        raise ConfigError(f"task.{name}={value!r} must be one of {', '.join(map(repr, options))}")
