"""Fine-tuning on Hugging Face dataset splits (``{kind: hf_dataset, ...}`` in ``task``), read
offline from local files: the same rows as files train the same model; ClassLabel columns by
name; tagging rows; the zero-shot protocol by content; every bad row named."""

import json

import pytest
import torch

datasets = pytest.importorskip("datasets")

from topic_task import recipe, sentences, write_topic_data, write_tsv  # noqa: E402

from babelzoo.datasets.hf_labelled import HfSplit  # noqa: E402
from babelzoo.datasets.labelled import LabelError  # noqa: E402
from babelzoo.finetune import TaskSpec, run_finetune  # noqa: E402
from babelzoo.finetune.data import label_set, read_rows  # noqa: E402
from babelzoo.zoo.config import ConfigError  # noqa: E402
from babelzoo.zoo.checkpoint_io import read_weights  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"index_id": i, "category": c, "text": t}) + "\n" for i, c, t in rows),
                    encoding="utf-8")


def split(path, **options):
    return {"kind": "hf_dataset", "path": "json", "data_files": str(path), **options}


@pytest.fixture
def topic_jsonl(topic_data):
    """The TSV files of ``topic_data`` again as JSON lines beside them."""
    return write_topic_data(topic_data, write_jsonl, "jsonl") / "topics"


def test_a_dataset_split_trains_the_same_model_as_the_same_rows_in_files(tmp_path, tokenizer_dir, topic_data,
                                                                         topic_jsonl):
    files = run_finetune(recipe(tmp_path / "files", tokenizer_dir), data_dir=topic_data, log=lambda _: None)
    hub = "${BABELZOO_DATA_DIR}/topics"
    task = {"train": split(f"{hub}/eng/train.jsonl"), "dev": split(f"{hub}/eng/dev.jsonl"), "source": "eng",
            "test": {lang: split(f"{hub}/{lang}/test.jsonl") for lang in ("eng", "xx", "yy")}}
    hf = run_finetune(recipe(tmp_path / "hf", tokenizer_dir, **task), data_dir=topic_data, log=lambda _: None)
    a = read_weights(tmp_path / "files" / "run" / "best" / "model.safetensors")
    b = read_weights(tmp_path / "hf" / "run" / "best" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert {k: v["accuracy"] for k, v in hf["test"].items()} == {k: v["accuracy"] for k, v in files["test"].items()}
    assert hf["labels"] == files["labels"] == ["politics", "sport", "weather"]
    protocol = hf["protocol"]
    assert protocol["zero_shot"] and protocol["source"] == "eng" and protocol["targets"] == ["xx", "yy"]
    assert protocol["train"] == {"kind": "hf_dataset", "path": "json", "name": None, "revision": None,
                                 "data_files": str(topic_jsonl / "eng" / "train.jsonl"), "split": "train",
                                 "streaming": False}
    assert hf["test"]["xx"]["file"]["data_files"] == str(topic_jsonl / "xx" / "test.jsonl")
    saved = json.loads((tmp_path / "hf" / "run" / "results.json").read_text())
    assert saved["protocol"]["selection"] == f"hf_dataset json (data_files {topic_jsonl}/eng/dev.jsonl), split train"
    assert saved["protocol"]["zero_shot_note"].startswith(
        f"trained on hf_dataset json (data_files {topic_jsonl}/eng/train.jsonl), split train and selected on "
        f"hf_dataset json (data_files {topic_jsonl}/eng/dev.jsonl), split train, both eng (task.train by its file "
        f"{topic_jsonl}/eng/train.jsonl; task.dev by its file {topic_jsonl}/eng/dev.jsonl)")


def test_a_dev_split_of_a_target_language_is_refused_as_the_same_file_is(tmp_path, tokenizer_dir, topic_data,
                                                                         topic_jsonl):
    write_jsonl(topic_jsonl / "xx" / "dev.jsonl", sentences(24, 5))
    write_tsv(topic_data / "topics" / "xx" / "dev.tsv", sentences(24, 5))
    with pytest.raises(ConfigError) as as_file:
        run_finetune(recipe(tmp_path / "file", tokenizer_dir, dev="${BABELZOO_DATA_DIR}/topics/xx/dev.tsv"),
                     data_dir=topic_data, log=lambda _: None)
    with pytest.raises(ConfigError) as as_split:
        run_finetune(recipe(tmp_path / "split", tokenizer_dir, dev=split(topic_jsonl / "xx" / "dev.jsonl")),
                     data_dir=topic_data, log=lambda _: None)
    refusal = ", a target language of task.test: zero-shot transfer selects on the source language only"
    assert str(as_file.value).startswith(f"task.dev={topic_jsonl}/xx/dev.tsv belongs to xx{refusal}")
    assert str(as_split.value).startswith(f"task.dev=hf_dataset json (data_files {topic_jsonl}/xx/dev.jsonl), split "
                                          f"train belongs to xx (by its file {topic_jsonl}/xx/dev.jsonl){refusal}")
    assert not (tmp_path / "split" / "run" / "results.json").exists()


def test_a_dev_split_of_no_known_language_is_recorded_as_not_zero_shot(tmp_path, tokenizer_dir, topic_data):
    dev = tmp_path / "elsewhere" / "dev.jsonl"
    write_jsonl(dev, sentences(24, 1))
    run_finetune(recipe(tmp_path / "run", tokenizer_dir, dev=split(dev), epochs=1), data_dir=topic_data,
                 log=lambda _: None)
    protocol = json.loads((tmp_path / "run" / "run" / "results.json").read_text())["protocol"]
    shown = f"hf_dataset json (data_files {dev}), split train"
    assert protocol["selection"] == shown and protocol["source"] == "eng"
    assert protocol["zero_shot"] is False and protocol["zero_shot_note"].startswith(
        f"the language of task.dev ({shown}) cannot be told: its files ({dev}) lie outside task.test's language "
        "folders and its config names no test language, and task.source is not set")


def test_a_test_split_holding_the_training_rows_is_refused_by_content(tmp_path, tokenizer_dir, topic_data,
                                                                      topic_jsonl):
    copy = tmp_path / "copy" / "train.jsonl"
    copy.parent.mkdir()
    copy.write_bytes((topic_jsonl / "eng" / "train.jsonl").read_bytes())
    task = {"train": split(topic_jsonl / "eng" / "train.jsonl"), "dev_fraction": 0.2, "dev": None, "source": "eng",
            "test": {"eng": split(topic_jsonl / "eng" / "test.jsonl"), "xx": split(copy)}}
    with pytest.raises(ConfigError, match=r"takes task.train \(hf_dataset json \(data_files .*/eng/train.jsonl\), split "
                                          r"train\) as test language 'xx'"):
        run_finetune(recipe(tmp_path / "run", tokenizer_dir, **task), data_dir=topic_data, log=lambda _: None)


def test_without_task_source_a_split_certifies_no_zero_shot_mean(tmp_path, tokenizer_dir, topic_data, topic_jsonl):
    task = {"train": split(topic_jsonl / "eng" / "train.jsonl"), "dev": split(topic_jsonl / "eng" / "dev.jsonl"),
            "test": {lang: split(topic_jsonl / lang / "test.jsonl") for lang in ("xx", "yy")}, "epochs": 1}
    result = run_finetune(recipe(tmp_path / "run", tokenizer_dir, **task), data_dir=topic_data, log=lambda _: None)
    assert result["protocol"]["zero_shot"] is False and result["mean_zero_shot"] is None
    assert "source language cannot be told" in result["protocol"]["zero_shot_note"]


def classlabel_parquet(path, labels, names=("weather", "sport", "politics")):
    features = datasets.Features({"text": datasets.Value("string"), "label": datasets.ClassLabel(names=list(names))})
    data = datasets.Dataset.from_dict({"text": [f"row {i}" for i in range(len(labels))], "label": labels},
                                      features=features)
    data.to_parquet(str(path))
    return path


def test_a_classlabel_column_is_read_by_name_and_is_the_label_set_in_its_order(tmp_path):
    path = classlabel_parquet(tmp_path / "train.parquet", [2, 0, 1, 0])
    spec = TaskSpec.from_dict({"train": {"kind": "hf_dataset", "path": "parquet", "data_files": str(path)},
                               "dev_fraction": 0.25})
    rows = read_rows(spec, spec.train)
    assert [(r.text, r.label) for r in rows] == [("row 0", "politics"), ("row 1", "weather"), ("row 2", "sport"),
                                                 ("row 3", "weather")]
    assert rows[2].where == f"hf_dataset parquet (data_files {path}), split train, row 2"
    assert label_set(spec, rows) == ("weather", "sport", "politics")  # not sorted: the dataset's own order
    with pytest.raises(LabelError, match=r"split train, row 2: label 'sport' .* is not one of the 2 labels"):
        read_rows(spec, spec.train, ("weather", "politics"))


def test_an_unlabelled_classlabel_row_is_an_error_naming_the_row(tmp_path):
    path = classlabel_parquet(tmp_path / "test.parquet", [0, -1, 1])
    with pytest.raises(LabelError, match=r"split train, row 1: 'label' is -1, which names no class .*-1 marks an "
                                         r"unlabelled row"):
        HfSplit("parquet", data_files=str(path)).read_classification()


def test_integer_labels_without_classlabel_are_their_digits_and_a_missing_column_is_named(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"text": "a", "label": 1}\n{"text": "b", "label": 0}\n{"sentence": "c", "label": 1}\n',
                    encoding="utf-8")
    with pytest.raises(LabelError, match=r"split train, row 2: no value for 'text' \(the text field\)"):
        HfSplit("json", data_files=str(path)).read_classification()
    path.write_text('{"text": "a", "label": 1}\n{"text": "b", "label": 0}\n', encoding="utf-8")
    assert [r.label for r in HfSplit("json", data_files=str(path)).read_classification()] == ["1", "0"]


def test_tagging_rows_take_words_and_classlabel_tags(tmp_path):
    features = datasets.Features({"tokens": datasets.Sequence(datasets.Value("string")),
                                  "ner": datasets.Sequence(datasets.ClassLabel(names=["O", "B-PER", "I-PER"]))})
    data = datasets.Dataset.from_dict({"tokens": [["Ada", "Lovelace", "wrote"], ["hello"]], "ner": [[1, 2, 0], [0]]},
                                      features=features)
    data.to_parquet(str(tmp_path / "ner.parquet"))
    spec = TaskSpec.from_dict({"kind": "token_classification", "tag_column": "ner", "dev_fraction": 0.5,
                               "train": {"kind": "hf_dataset", "path": "parquet",
                                         "data_files": str(tmp_path / "ner.parquet")}})
    rows = read_rows(spec, spec.train)
    assert [(r.words, r.tags) for r in rows] == [(("Ada", "Lovelace", "wrote"), ("B-PER", "I-PER", "O")),
                                                 (("hello",), ("O",))]
    assert label_set(spec, rows) == ("O", "B-PER", "I-PER")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"tokens": ["a", "b"], "ner": ["O", "O"]}\n{"tokens": ["a", "b"], "ner": ["O"]}\n',
                   encoding="utf-8")
    with pytest.raises(LabelError, match=r"split train, row 1: 2 words \('tokens'\) but 1 tags \('ner'\)"):
        HfSplit("json", data_files=str(bad)).read_tagged(tag_column="ner")


def test_a_dataset_folder_streamed_or_not_gives_the_same_rows_and_the_digest_follows_content(tmp_path):
    folder = tmp_path / "topics"
    write_jsonl(folder / "train.jsonl", sentences(12, 0))
    write_jsonl(folder / "test.jsonl", sentences(6, 1))
    cached, streamed = HfSplit(str(folder), split="test"), HfSplit(str(folder), split="test", streaming=True)
    assert cached.rows()[0] == streamed.rows()[0] and len(cached.rows()[0]) == 6
    assert cached.digest() == streamed.digest()
    before = cached.digest()
    write_jsonl(folder / "test.jsonl", sentences(6, 2))
    assert HfSplit(str(folder), split="test").digest() != before


def test_a_split_mapping_is_checked_like_every_recipe_key(tmp_path):
    with pytest.raises(ConfigError, match=r"task.train.splt: unknown hf_dataset key 'splt'; did you mean 'split'"):
        TaskSpec.from_dict({"train": {"kind": "hf_dataset", "path": "json", "splt": "train"}, "dev_fraction": 0.1})
    with pytest.raises(ConfigError, match=r"task.test.xx: a mapping names a dataset as \{kind: hf_dataset"):
        TaskSpec.from_dict({"train": "a.tsv", "dev_fraction": 0.1, "test": {"xx": {"path": "json"}}})
    with pytest.raises(ConfigError, match=r"task.dev.data_files: '\$\{NOT_SET_ANYWHERE\}/d.jsonl' names "
                                          r"'NOT_SET_ANYWHERE'"):
        TaskSpec.from_dict({"train": "a.tsv", "dev": split("${NOT_SET_ANYWHERE}/d.jsonl")}).resolve()
    spec = TaskSpec.from_dict({"train": split("${BABELZOO_DATA_DIR}/t.jsonl"), "dev_fraction": 0.1})
    assert spec.resolve(tmp_path).train == HfSplit("json", data_files=f"{tmp_path}/t.jsonl")
    assert TaskSpec.from_dict(spec.to_dict()) == spec  # what to_dict writes reads back


def test_a_split_datasets_cannot_load_is_an_error_naming_it(tmp_path):
    with pytest.raises(ConfigError, match=r"^hf_dataset json \(data_files .*/missing.jsonl\), split train: datasets "
                                          r"cannot load it: "):
        HfSplit("json", data_files=str(tmp_path / "missing.jsonl")).rows()
