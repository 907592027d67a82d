"""benchmarks/deploy.py: the peers' path (transformers' model exported by torch.onnx, run by ONNX
Runtime) gives the vectors babelzoo's export gives for the same weights, so the speed columns
compare the same work; the targets are read off the rows as the issue states them."""

from __future__ import annotations

import string

import numpy as np
import pytest
import torch

import babelzoo
from babelzoo.datasets.wordpiece import WordPieceTokenizer

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")
pytest.importorskip("transformers")

from babelzoo.deploy import OnnxEncoder, export_onnx  # noqa: E402
from benchmarks import deploy as D  # noqa: E402

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(string.ascii_lowercase + ":.,?!'") + \
    ["##" + c for c in string.ascii_lowercase + ":"]
SENTENCES = ["Tom left.", "Where is the station?", "Yes.", "Mary and Tom want to sing with us again next week.", "Go!"]


def test_the_peer_export_gives_babelzoos_vectors(tmp_path):
    torch.manual_seed(0)
    model = babelzoo.create_model("mbert_tiny", vocab_size=len(VOCAB), hidden_size=384, num_heads=6, num_layers=2,
                                  intermediate_size=64, max_positions=600).eval()
    model.tokenizer = WordPieceTokenizer(VOCAB)
    fp32, int8, tokenizer = D.peer_exports(model, tmp_path / "peer")
    peer = D.PeerOnnx("peer", fp32, tokenizer, threads=1, batch_size=2, sort=False)
    export_onnx(model, tmp_path / "ours")
    ours = OnnxEncoder(tmp_path / "ours", prefix=D.PREFIX, batch_size=3).encode(SENTENCES)
    np.testing.assert_allclose(peer.encode(SENTENCES), ours, atol=1e-5)
    quantized = D.PeerOnnx("peer int8", int8, tokenizer, threads=1, batch_size=2, sort=True).encode(SENTENCES)
    assert (quantized * ours).sum(1).min() > 0.9 and not np.allclose(quantized, ours, atol=1e-4)


def row(arm, rate, tatoeba=None):
    return {"arm": f"e5-small {arm}", "sentences_per_s": rate, "cosine_to_fp32_mean": 1.0, "cosine_to_fp32_min": 1.0,
            "tatoeba": None if tatoeba is None else {"mean": tatoeba}}


def test_the_targets_read_the_rows():
    rows = {r["arm"]: r for r in [row("babelzoo fp32", 100, 0.90), row("babelzoo ONNX fp32", 200, 0.90),
                                  row("babelzoo ONNX int8 + SmoothQuant", 290, 0.885),
                                  row("transformers ONNX fp32 (input order)", 150),
                                  row("transformers ONNX fp32 (sorted)", 210),
                                  {"arm": "e5-small babelzoo encode (command, PyTorch fp32)", "sentences_per_s": 96}]}
    lines = D.targets(rows)
    int8 = "e5-small babelzoo ONNX int8 + SmoothQuant"
    assert f"| {int8}: ≤ 1 Tatoeba point lost | +1.50 points lost | **no** |" in lines
    assert f"| {int8}: ≥ 1.5× ONNX fp32 sentences/s | 1.45× | **no** |" in lines
    assert "| babelzoo ONNX fp32 ≥ transformers ONNX fp32 (input order) | 1.33× | yes |" in lines
    assert "| babelzoo ONNX fp32 ≥ transformers ONNX fp32 (sorted) | 0.95× | **no** |" in lines
    assert "| babelzoo encode within 5 % of BabelEncoder | 0.960× | yes |" in lines
    assert D._fp32_of("e5-small transformers ONNX int8 (sorted)", rows)["sentences_per_s"] == 210
