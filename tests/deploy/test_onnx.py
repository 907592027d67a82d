"""ONNX export: every exportable tiny model's graph gives PyTorch's states, sentence vectors and
logits in ONNX Runtime (padded batches, odd sizes); int8 stays close; SmoothQuant's rescaling is
exact in fp32; :class:`OnnxEncoder` gives :class:`BabelEncoder`'s vectors; what cannot export
says why."""

import json
import string

import numpy as np
import pytest
import torch

import babelzoo
from babelzoo._files import FolderNotOwned
from babelzoo.datasets.wordpiece import WordPieceTokenizer
from babelzoo.evaluation.encoders import BabelEncoder
from babelzoo.zoo.build import with_head

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from babelzoo.deploy import onnx as deploy_onnx  # noqa: E402
from babelzoo.deploy.onnx import (INFO_FILE, OPSETS, OnnxEncoder, OnnxExportError,  # noqa: E402
                                  SmoothedLinear, check_exportable, export_onnx, smoothed)

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCAB = SPECIALS + list(string.ascii_lowercase + ".,?!'") + ["##" + c for c in string.ascii_lowercase]
SENTENCES = ["Tom left.", "Where is the station?", "I don't know what you mean by that, but I'll ask her.",
             "Yes.", "Mary and Tom want to sing with us again next week.", "It is raining", "Go!",
             "Could you tell me how to get to the museum?", "He is tall.", "We won."]
ODD = dict(vocab_size=len(VOCAB), hidden_size=30, num_heads=3, num_layers=3, intermediate_size=46, max_positions=64,
           dropout=0.0, attention_dropout=0.0)


def exportable(name: str) -> bool:
    """Does the export take this zoo entry (:func:`check_exportable`, what the model declares)?"""
    try:
        check_exportable(babelzoo.create_model(name))
    except OnnxExportError:
        return False
    return True


# Every tiny text encoder the export takes, decided by the model, not by a list here: a new family
# or entry that declares nothing is exported the moment it is registered.
EXPORTABLE = [name for name in babelzoo.list_models("*_tiny") if exportable(name)]


def odd_model(name: str, **overrides) -> babelzoo.BabelModel:
    torch.manual_seed(0)
    model = babelzoo.create_model(name, **{**ODD, **overrides}).eval()
    model.tokenizer = WordPieceTokenizer(VOCAB)
    with torch.no_grad():  # LayerNorm shifts and biases away from their zero init, so every term shows
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.normal_(0, 0.2)
    return model


def padded_batch(model) -> tuple[np.ndarray, np.ndarray]:
    rows = model.tokenizer.batch_encode(SENTENCES[:5], padding=False, return_tensors=None)["input_ids"]
    width = max(map(len, rows))
    ids = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, :len(row)], mask[i, :len(row)] = row, 1
    return ids, mask


def run_onnx(folder, **feed):
    import onnxruntime as ort

    session = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feed)))


@pytest.mark.parametrize("name", EXPORTABLE)
def test_every_exportable_family_matches_pytorch_on_a_padded_batch(name, tmp_path):
    model = odd_model(name)
    folder = export_onnx(model, tmp_path / name)
    ids, mask = padded_batch(model)
    feed = {"input_ids": ids, "attention_mask": mask}
    if model.config.text.num_languages:
        feed["language_ids"] = np.full(ids.shape, -1)  # -1: no language, as language_ids=None
    got = run_onnx(folder, **feed)
    with torch.no_grad():
        out = model(torch.from_numpy(ids), attention_mask=torch.from_numpy(mask))
    real = mask.astype(bool)
    want = out.last_hidden.numpy()
    assert np.abs(got["last_hidden_state"] - want)[real].max() <= 1e-4
    mean = (want * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    assert np.abs(got["sentence_embedding"] - mean).max() <= 1e-4
    assert json.loads((folder / INFO_FILE).read_text())["parity_fp32"]["last_hidden_state"] <= 1e-4


def test_language_ids_reach_the_language_embeddings(tmp_path):
    model = odd_model("xlm_tiny")
    folder = export_onnx(model, tmp_path / "xlm")
    ids, mask = padded_batch(model)
    languages = np.full(ids.shape, 2)
    got = run_onnx(folder, input_ids=ids, attention_mask=mask, language_ids=languages)
    with torch.no_grad():
        want = model(torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                     language_ids=torch.from_numpy(languages)).last_hidden.numpy()
    assert np.abs(got["last_hidden_state"] - want)[mask.astype(bool)].max() <= 1e-4


def test_a_middle_layer_and_cls_pooling(tmp_path):
    model = odd_model("xlmr_tiny")
    folder = export_onnx(model, tmp_path / "l1", layer=1, pooling="cls")
    ids, mask = padded_batch(model)
    got = run_onnx(folder, input_ids=ids, attention_mask=mask)
    with torch.no_grad():
        layer = model(torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                      output_hidden_states=True).hidden_states[1].numpy()
    assert np.abs(got["last_hidden_state"] - layer)[mask.astype(bool)].max() <= 1e-4
    assert np.abs(got["sentence_embedding"] - layer[:, 0]).max() <= 1e-4


@pytest.mark.parametrize("kind", ["sequence_classification", "token_classification"])
def test_the_task_head_exports_its_logits(kind, tmp_path):
    model = with_head(odd_model("xlmr_tiny"), {"kind": kind, "labels": ["a", "b", "c"], "dropout": 0.0}).eval()
    model.tokenizer = WordPieceTokenizer(VOCAB)
    folder = export_onnx(model, tmp_path / kind, head=True)
    ids, mask = padded_batch(model)
    got = run_onnx(folder, input_ids=ids, attention_mask=mask)["logits"]
    with torch.no_grad():
        want = model.head_logits(torch.from_numpy(ids), attention_mask=torch.from_numpy(mask)).numpy()
    if kind == "token_classification":
        got, want = got[mask.astype(bool)], want[mask.astype(bool)]
    assert got.shape == want.shape and np.abs(got - want).max() <= 1e-4
    info = json.loads((folder / INFO_FILE).read_text())
    assert info["head"] == {"kind": kind, "per_token": kind == "token_classification", "labels": ["a", "b", "c"]}


def test_the_encoder_gives_babel_encoders_vectors(tmp_path):
    model = odd_model("xlmr_tiny")
    folder = export_onnx(model, tmp_path / "m")
    for batch_size, pooling in ((3, None), (64, "cls"), (1, "max")):
        onnx = OnnxEncoder(folder, prefix="query: ", batch_size=batch_size, pooling=pooling).encode(SENTENCES)
        torch_vectors = BabelEncoder("m", model, model.tokenizer, prefix="query: ", pooling=pooling).encode(SENTENCES)
        assert onnx.shape == (len(SENTENCES), 30)
        np.testing.assert_allclose(onnx, torch_vectors, atol=1e-5)
    raw = OnnxEncoder(folder, normalize=False).encode(SENTENCES[:2])
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)
    with pytest.raises(OnnxExportError, match="holds layer -1, not 2; export it again with --layer 2"):
        OnnxEncoder(folder, layer=2)


def test_the_encoder_passes_no_language_unless_it_knows_it(tmp_path):
    model = odd_model("xlm_tiny")
    folder = export_onnx(model, tmp_path / "xlm")
    onnx = OnnxEncoder(folder).encode(SENTENCES, lang="xx")  # not a language of the tokenizer
    np.testing.assert_allclose(onnx, BabelEncoder("m", model, model.tokenizer).encode(SENTENCES, lang="xx"), atol=1e-5)


def test_int8_stays_close_and_records_how_it_was_quantized(tmp_path):
    model = odd_model("xlmr_tiny", hidden_size=48, num_heads=4, intermediate_size=96)
    fp32 = OnnxEncoder(export_onnx(model, tmp_path / "fp32")).encode(SENTENCES)
    folder = export_onnx(model, tmp_path / "int8", quantize="int8")
    int8 = OnnxEncoder(folder).encode(SENTENCES)
    cosines = (fp32 * int8).sum(1)
    assert cosines.min() > 0.98 and not np.allclose(fp32, int8, atol=1e-6)  # close, and really quantized
    info = json.loads((folder / INFO_FILE).read_text())
    assert info["quantization"]["scheme"] == "int8" and isinstance(info["quantization"]["reduce_range"], bool)
    import onnx

    ops = {node.op_type for node in onnx.load(str(folder / "model.onnx")).graph.node}
    assert "MatMulInteger" in ops or "DynamicQuantizeMatMul" in ops


def test_int8_keeps_the_feed_forward_outputs_in_float_when_asked(tmp_path):
    import onnx

    model = odd_model("xlmr_tiny", hidden_size=48, num_heads=4, intermediate_size=96)
    fp32 = OnnxEncoder(export_onnx(model, tmp_path / "fp32")).encode(SENTENCES)
    plain = OnnxEncoder(export_onnx(model, tmp_path / "int8", quantize="int8")).encode(SENTENCES)
    folder = export_onnx(model, tmp_path / "kept", quantize="int8", keep_fp32=("ffn_out",))
    kept = OnnxEncoder(folder).encode(SENTENCES)
    layers = model.config.text.num_layers
    info = json.loads((folder / INFO_FILE).read_text())["quantization"]
    assert info["kept_fp32"] == {"products": ["ffn_out"], "nodes": layers}
    graph = onnx.load(str(folder / "model.onnx")).graph
    made_by = {output: node.op_type for node in graph.node for output in node.output}
    float_matmuls = [node for node in graph.node if node.op_type == "MatMul" and made_by.get(node.input[0]) == "Gelu"]
    assert len(float_matmuls) == layers  # each layer's output projection reads the GELU output in float
    assert any(node.op_type in ("MatMulInteger", "DynamicQuantizeMatMul") for node in graph.node)  # the rest int8
    assert (kept * fp32).sum(1).min() > (plain * fp32).sum(1).min() - 1e-4  # no further from fp32 than all-int8
    smoothed_folder = export_onnx(model, tmp_path / "kept-sq", quantize="int8", keep_fp32=("ffn_out",),
                                  calibration=SENTENCES)  # through SmoothQuant's scaling too
    assert json.loads((smoothed_folder / INFO_FILE).read_text())["quantization"]["kept_fp32"]["nodes"] == layers
    with pytest.raises(OnnxExportError, match="named by ffn_out"):
        export_onnx(model, tmp_path / "bad", quantize="int8", keep_fp32=("attention",))
    with pytest.raises(OnnxExportError, match="apply to quantize='int8'"):
        export_onnx(model, tmp_path / "bad", keep_fp32=("ffn_out",))


def test_smoothquant_rescaling_is_exact_in_full_precision():
    model = odd_model("xlmr_tiny")
    texts = SENTENCES * 2
    smooth = smoothed(model, texts, alpha=0.5)
    swapped = [m for m in smooth.modules() if isinstance(m, SmoothedLinear)]
    assert len(swapped) == sum(1 for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)
                               and n.startswith("encoder."))
    assert any(not torch.allclose(m.inverse_scale, torch.ones_like(m.inverse_scale)) for m in swapped)
    ids, mask = (torch.from_numpy(a) for a in padded_batch(model))
    with torch.no_grad():
        want = model(ids, attention_mask=mask).last_hidden
        got = smooth(ids, attention_mask=mask).last_hidden
    assert torch.allclose(got[mask.bool()], want[mask.bool()], atol=1e-5)
    assert not any(isinstance(m, SmoothedLinear) for m in model.modules())  # the model itself is untouched


def test_calibrated_int8_export_records_smoothquant(tmp_path):
    model = odd_model("xlmr_tiny")
    folder = export_onnx(model, tmp_path / "sq", quantize="int8", calibration=SENTENCES)
    info = json.loads((folder / INFO_FILE).read_text())
    assert info["quantization"]["smoothing"] == {"method": "smoothquant", "alpha": 0.5, "texts": len(SENTENCES)}
    fp32 = BabelEncoder("m", model, model.tokenizer).encode(SENTENCES)
    assert (OnnxEncoder(folder).encode(SENTENCES) * fp32).sum(1).min() > 0.98


@pytest.mark.parametrize("name, reason", [("bilstm_tiny", "'bilstm_tiny' cannot be exported to ONNX: torch.export cannot trace its packed"),
                                          ("bart_tiny", "an encoder–decoder"),
                                          ("vl_dual_tiny", "got FusionModel")])
def test_what_cannot_export_says_why(name, reason, tmp_path):
    model = babelzoo.create_model(name)
    model.tokenizer = WordPieceTokenizer(VOCAB)
    with pytest.raises(OnnxExportError, match=reason):
        export_onnx(model, tmp_path / name)
    assert not (tmp_path / name).exists()


def test_refusals_name_the_problem(tmp_path):
    model = odd_model("xlmr_tiny")
    with pytest.raises(OnnxExportError, match="no task head"):
        export_onnx(model, tmp_path / "a", head=True)
    with pytest.raises(OnnxExportError, match="hidden states 0..3"):
        export_onnx(model, tmp_path / "a", layer=4)
    with pytest.raises(OnnxExportError, match="unknown ONNX quantization 'int4'"):
        export_onnx(model, tmp_path / "a", quantize="int4")
    model.tokenizer = None
    with pytest.raises(OnnxExportError, match="needs the model's tokenizer"):
        export_onnx(model, tmp_path / "a")
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("mine")
    with pytest.raises(FolderNotOwned, match=r"project: not a folder babelzoo wrote as an ONNX export \(it holds notes.txt\); nothing was deleted"):
        export_onnx(odd_model("xlmr_tiny"), project)
    assert (project / "notes.txt").read_text() == "mine"
    with pytest.raises(OnnxExportError, match="not a babelzoo ONNX export"):
        OnnxEncoder(project)


def test_convert_to_onnx_from_a_checkpoint_folder(tmp_path, capsys):
    from babelzoo.cli import main

    model = odd_model("xlmr_tiny")
    model.save_pretrained(tmp_path / "ckpt")
    calibration = tmp_path / "calibration.txt"
    calibration.write_text("\n".join(SENTENCES) + "\n")
    assert main(["convert", "--to-onnx", str(tmp_path / "onnx"), "--from", str(tmp_path / "ckpt"),
                 "--quantize", "int8", "--calibration", str(calibration)]) == 0
    out = capsys.readouterr().out
    assert (f"as ONNX opset 23, int8, SmoothQuant on {len(SENTENCES)} texts, outputs last_hidden_state, "
            "sentence_embedding") in out
    assert OnnxEncoder(tmp_path / "onnx").encode(["Go!"]).shape == (1, 30)
    assert main(["convert", "--to-hf", str(tmp_path / "hf"), "--from", str(tmp_path / "ckpt"), "--quantize",
                 "int8"]) == 2
    assert "--quantize: ONNX export options; they go with --to-onnx" in capsys.readouterr().err


def written_opset(folder) -> int:
    import onnx

    return next(e.version for e in onnx.load(str(folder / "model.onnx")).opset_import if e.domain in ("", "ai.onnx"))


def test_the_opsets_accepted_are_the_ones_torch_onnx_writes():
    from onnxscript.version_converter import _version_converter
    from torch.onnx._internal.exporter import _constants

    # torchlib's operators are written in this opset; the version converter reaches up to the other
    assert (OPSETS[0], OPSETS[-1]) == (_constants.TORCHLIB_OPSET, _version_converter.SUPPORTED_MAX_ONNX_OPSET)


def test_the_highest_opset_exports_runs_and_is_recorded(tmp_path):
    folder = export_onnx(odd_model("xlmr_tiny"), tmp_path / "top", opset=OPSETS[-1])
    info = json.loads((folder / INFO_FILE).read_text())
    assert info["opset"] == written_opset(folder) == 25 and info["parity_fp32"]["last_hidden_state"] <= 1e-4


def test_an_opset_outside_the_range_is_refused_before_any_work(tmp_path):
    with pytest.raises(OnnxExportError, match=r"^opset=17: torch.onnx writes opsets 18 to 25 \(default 23"):
        export_onnx(odd_model("xlmr_tiny"), tmp_path / "low", opset=17)
    assert not (tmp_path / "low").exists()


def test_the_recorded_opset_is_the_one_the_graph_has(tmp_path, monkeypatch):
    # let opset 17 through to the exporter, which cannot convert the graph down and keeps opset 18
    monkeypatch.setattr(deploy_onnx, "OPSETS", range(1, 100), raising=False)
    folder = export_onnx(odd_model("xlmr_tiny"), tmp_path / "low", opset=17)
    assert json.loads((folder / INFO_FILE).read_text())["opset"] == written_opset(folder) == 18


def test_the_int8_check_line_says_what_each_number_is(tmp_path, capsys):
    from babelzoo.cli import main
    from babelzoo.deploy.onnx import _example, _Graph

    model = odd_model("xlmr_tiny", hidden_size=48, num_heads=4, intermediate_size=96)
    model.save_pretrained(tmp_path / "ckpt")
    assert main(["convert", "--to-onnx", str(tmp_path / "onnx"), "--from", str(tmp_path / "ckpt"), "--quantize",
                 "int8"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    info = json.loads((tmp_path / "onnx" / INFO_FILE).read_text())
    parity, cosine = info["parity_int8"], info["sentence_cosine_int8"]
    assert line == ("  checked against PyTorch (fp32) on a padded batch: largest |difference| of any output value "
                    f"last_hidden_state {parity['last_hidden_state']:.1e}, sentence_embedding "
                    f"{parity['sentence_embedding']:.1e} (int8 rounding); smallest cosine of a sentence vector to "
                    f"PyTorch's {cosine:.4f}")
    # the numbers, computed again: ONNX Runtime's int8 graph against PyTorch on the export's check batch
    example = _example(4, 13, model.config.text.vocab_size, False, seed=1)
    with torch.no_grad():
        hidden, pooled = (t.numpy() for t in _Graph(model, -1, "mean", False, False).eval()(*example))
    got = run_onnx(tmp_path / "onnx", input_ids=example[0].numpy(), attention_mask=example[1].numpy())
    vectors, real = got["sentence_embedding"], example[1].numpy() == 1
    assert parity["last_hidden_state"] == pytest.approx(np.abs(got["last_hidden_state"] - hidden)[real].max(), rel=1e-4)
    assert parity["sentence_embedding"] == pytest.approx(np.abs(vectors - pooled).max(), rel=1e-4)
    want = ((vectors * pooled).sum(1) / np.linalg.norm(vectors, axis=1) / np.linalg.norm(pooled, axis=1)).min()
    assert cosine == pytest.approx(want, abs=1e-6)
    assert parity["last_hidden_state"] > 1e-3 and cosine > 0.98  # values move with int8; vectors keep their direction
