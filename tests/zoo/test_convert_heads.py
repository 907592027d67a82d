"""Hugging Face interop of task heads: BERT's and XLM-R's sequence and token classifiers import
with fp32 logits parity, export back with parity and their labels, round trip exactly, and a
head the Hugging Face class cannot hold is an error naming what it lacks."""

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

import babelzoo  # noqa: E402
from babelzoo.zoo.convert import export_hf, import_hf  # noqa: E402
from babelzoo.deploy.convert_cli import convert_main  # noqa: E402
from babelzoo.zoo.factory import build_model  # noqa: E402
from babelzoo.errors import CheckpointError  # noqa: E402
from babelzoo.zoo.checkpoint_io import model_state  # noqa: E402

TOL = 1e-5
VOCAB = 99
SIZES = {  # odd widths and head counts; labels named by transformers (LABEL_i) or by us
    "h48": dict(hidden_size=48, num_heads=3, num_layers=2, intermediate_size=80, labels=None, num_labels=5,
                dropout=None),
    "h40": dict(hidden_size=40, num_heads=5, num_layers=3, intermediate_size=72,
                labels=("O", "B-LOC", "I-LOC"), num_labels=3, dropout=0.25),
}
CLASSES = {  # HF class: (HF config class, its extra fields, zoo model, head fields)
    "BertForSequenceClassification": ("BertConfig", dict(max_position_embeddings=40), "mbert_tiny",
                                      dict(kind="sequence_classification", pooling="pooler")),
    "BertForTokenClassification": ("BertConfig", dict(max_position_embeddings=40), "mbert_tiny",
                                   dict(kind="token_classification")),
    "XLMRobertaForSequenceClassification": ("XLMRobertaConfig", dict(max_position_embeddings=42, type_vocab_size=1),
                                            "xlmr_tiny", dict(kind="sequence_classification", pooling="cls",
                                                              hidden_layer=True)),
    "XLMRobertaForTokenClassification": ("XLMRobertaConfig", dict(max_position_embeddings=42, type_vocab_size=1),
                                         "xlmr_tiny", dict(kind="token_classification")),
}
AUTO = {"sequence_classification": "AutoModelForSequenceClassification",
        "token_classification": "AutoModelForTokenClassification"}


def labels_of(size: str) -> tuple[str, ...]:
    spec = SIZES[size]
    return spec["labels"] or tuple(f"LABEL_{i}" for i in range(spec["num_labels"]))


def perturb(model) -> None:
    """Make every tensor distinct, so that a swapped weight/bias or dense/out shows."""
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.2)


def hf_model(cls: str, size: str):
    config_cls, extra, _, _ = CLASSES[cls]
    spec = SIZES[size]
    labels = {"id2label": dict(enumerate(spec["labels"]))} if spec["labels"] else {"num_labels": spec["num_labels"]}
    config = getattr(transformers, config_cls)(
        vocab_size=VOCAB, hidden_size=spec["hidden_size"], num_attention_heads=spec["num_heads"],
        num_hidden_layers=spec["num_layers"], intermediate_size=spec["intermediate_size"],
        classifier_dropout=spec["dropout"], **labels, **extra)
    torch.manual_seed(0)
    model = getattr(transformers, cls)(config).eval()
    perturb(model)
    return model


def zoo_model(cls: str, size: str, **head):
    _, _, name, fields = CLASSES[cls]
    spec = SIZES[size]
    torch.manual_seed(1)
    model = babelzoo.create_model(
        name, vocab_size=VOCAB, hidden_size=spec["hidden_size"], num_heads=spec["num_heads"],
        num_layers=spec["num_layers"], intermediate_size=spec["intermediate_size"], max_positions=32,
        mlm_head=False, pooler=fields.get("pooling") == "pooler",
        head={**fields, "labels": list(labels_of(size)), "dropout": spec["dropout"], **head})
    perturb(model)
    return model.eval()


def padded_batch(pad: int, bert: bool):
    """Ids with no pad inside the real tokens (XLM-R numbers positions from pad + 1 by counting
    non-pad tokens), two padded rows, and random segments for BERT."""
    torch.manual_seed(2)
    ids = torch.randint(3, VOCAB, (3, 11))
    mask = torch.ones_like(ids)
    for row, length in ((1, 7), (2, 3)):
        ids[row, length:] = pad
        mask[row, length:] = 0
    segments = torch.randint(0, 2, ids.shape) * mask if bert else torch.zeros_like(ids)
    return ids, mask, segments


def logits_pair(hf, ours, cls: str):
    """(HF logits, our logits) on a padded batch; token logits at the real tokens."""
    bert = cls.startswith("Bert")
    ids, mask, segments = padded_batch(hf.config.pad_token_id, bert)
    with torch.no_grad():
        want = hf(input_ids=ids, attention_mask=mask, token_type_ids=segments).logits
        got = ours.head_logits(ids, attention_mask=mask, segment_ids=segments)
    if want.dim() == 3:
        real = mask.bool()
        return want[real], got[real]
    return want, got


def max_diff(a, b):
    return (a - b).abs().max().item()


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("cls", list(CLASSES))
def test_import_parity(cls, size, tmp_path):
    reference = hf_model(cls, size)
    reference.save_pretrained(tmp_path)
    model = babelzoo.from_pretrained(tmp_path).eval()  # an HF directory goes through import_hf
    head, fields = model.config.head, CLASSES[cls][3]
    assert head.kind == fields["kind"] and head.labels == labels_of(size)
    assert head.dropout == SIZES[size]["dropout"]
    assert (head.pooling, head.hidden_layer) == (fields.get("pooling", "cls"), fields.get("hidden_layer", False))
    assert (model.pooler is not None) == (cls == "BertForSequenceClassification")
    assert model.lm_head is None
    want, got = logits_pair(reference, model, cls)
    assert got.shape == want.shape and got.shape[-1] == SIZES[size]["num_labels"]
    assert max_diff(got, want) <= TOL


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("cls", list(CLASSES))
def test_export_parity(cls, size, tmp_path):
    model = zoo_model(cls, size)
    export_hf(model, tmp_path)
    auto = getattr(transformers, AUTO[model.config.head.kind])
    back, info = auto.from_pretrained(tmp_path, output_loading_info=True)
    assert type(back).__name__ == cls
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    assert back.config.id2label == dict(enumerate(labels_of(size)))
    assert back.config.label2id == {label: i for i, label in enumerate(labels_of(size))}
    assert back.config.classifier_dropout == SIZES[size]["dropout"]
    want, got = logits_pair(back.eval(), model, cls)
    assert max_diff(got, want) <= TOL


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("cls", list(CLASSES))
def test_export_import_round_trip(cls, size, tmp_path):
    model = zoo_model(cls, size)
    export_hf(model, tmp_path)
    back = import_hf(tmp_path)
    assert back.config.head == model.config.head
    assert back.config.text == model.config.text
    ours, theirs = model_state(model), model_state(back)
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_cli_converts_a_head_both_ways(tmp_path, capsys):
    model = zoo_model("XLMRobertaForTokenClassification", "h40")
    model.save_pretrained(tmp_path / "zoo")
    assert convert_main(["--to-hf", str(tmp_path / "hf"), "--from", str(tmp_path / "zoo")]) == 0
    assert "as XLMRobertaForTokenClassification" in capsys.readouterr().out
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["architectures"] == [
        "XLMRobertaForTokenClassification"]
    assert convert_main(["--from-hf", str(tmp_path / "hf"), "--to", str(tmp_path / "back")]) == 0
    assert babelzoo.from_pretrained(tmp_path / "back").config.head == model.config.head


# --- what the Hugging Face classes cannot hold ------------------------------------------------------

@pytest.mark.parametrize("cls, change, pattern", [
    ("BertForSequenceClassification", dict(head=dict(pooling="mean")), r"head pooling == 'pooler' \(is 'mean'\)"),
    ("XLMRobertaForSequenceClassification", dict(head=dict(pooling="mean")), r"head pooling == 'cls' \(is 'mean'\)"),
    ("BertForSequenceClassification", dict(head=dict(pooling="cls", hidden_layer=True)),
     r"as BertForSequenceClassification: needs \[\"head pooling == 'pooler' \(is 'cls'\)\", "
     r"'head hidden_layer == False \(is True\)'\]"),
    ("XLMRobertaForSequenceClassification", dict(head=dict(hidden_layer=False)),
     r"head hidden_layer == True \(is False\)"),
    ("BertForTokenClassification", dict(head=dict(kind="probe", pooling="cls")),
     r"a 'probe' head has no Hugging Face bert class; heads it can hold: sequence_classification "
     r"\(BertForSequenceClassification\), token_classification \(BertForTokenClassification\)"),
    ("XLMRobertaForTokenClassification", dict(head=dict(layer=1)), r"head layer == -1, the last layer \(is 1\)"),
    ("BertForTokenClassification", dict(mlm_head=True), r"mlm_head=False \(a task class holds no MLM head\)"),
    ("XLMRobertaForTokenClassification", dict(pooler=True),
     r"pooler=False \(XLMRobertaForTokenClassification has no pooler\)"),
])
def test_export_refuses_heads_the_class_cannot_hold(tmp_path, cls, change, pattern):
    model = zoo_model(cls, "h48", **change.get("head", {}))
    text_changes = {k: v for k, v in change.items() if k != "head"}
    if text_changes:
        model = build_model(model.config.override(**text_changes))
    with pytest.raises(CheckpointError, match=pattern):
        export_hf(model, tmp_path)
    assert not (tmp_path / "config.json").exists()


def test_albert_holds_no_task_head(tmp_path):
    model = babelzoo.create_model("albert_tiny", head={"kind": "sequence_classification", "labels": ["a", "b"]})
    with pytest.raises(CheckpointError, match=r"a 'sequence_classification' head has no Hugging Face albert "
                                              r"class; heads it can hold: none"):
        export_hf(model, tmp_path)


def _edit_config(directory, **changes):
    path = directory / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


@pytest.mark.parametrize("changes, pattern", [
    (dict(problem_type="multi_label_classification"),
     r"problem_type='multi_label_classification' is not supported: babelzoo heads are single-label"),
    (dict(problem_type="regression"), r"problem_type='regression' is not supported"),
    (dict(id2label={"0": "only"}, label2id={"only": 0}), r"num_labels=1 is a regression head in transformers"),
    (dict(id2label={"0": "a", "2": "b"}), r"id2label ids \[0, 2\] must be 0 \.\. 1"),
    (dict(id2label={"0": "a", "1": "a"}), r"labels.*must not repeat a label"),
    (dict(architectures=["BertForSequenceClassification", "BertForTokenClassification"]),
     r"architectures names several task classes \(BertForSequenceClassification, BertForTokenClassification\)"),
    (dict(architectures=["BertForQuestionAnswering"]),
     r"architecture 'BertForQuestionAnswering' is not supported; .* BertForSequenceClassification"),
])
def test_unsupported_head_configs_are_import_errors(tmp_path, changes, pattern):
    hf_model("BertForSequenceClassification", "h48").save_pretrained(tmp_path)
    _edit_config(tmp_path, **changes)
    with pytest.raises(CheckpointError, match=pattern):
        import_hf(tmp_path)


def test_classifier_weights_under_the_wrong_class_are_named(tmp_path):
    """A token classifier's checkpoint relabelled as a sequence classifier lacks the pooler."""
    hf_model("BertForTokenClassification", "h48").save_pretrained(tmp_path)
    _edit_config(tmp_path, architectures=["BertForSequenceClassification"])
    with pytest.raises(CheckpointError, match=r"missing keys \(2\): bert\.pooler\.dense\.bias \(48,\), "
                                              r"bert\.pooler\.dense\.weight \(48, 48\)"):
        import_hf(tmp_path)
