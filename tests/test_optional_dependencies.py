"""FAISS is an extra (faiss-cpu or faiss-gpu), sacreBLEU another (translation scores); without them
the code that needs them says which extra to install."""

import sys

import pytest

from babelzoo.errors import BabelzooError


def test_missing_faiss_names_the_extras(monkeypatch):
    from babelzoo.knowledge.memory import RetrievalMemory

    monkeypatch.setitem(sys.modules, "faiss", None)  # what an environment without faiss gives
    with pytest.raises(ImportError, match=r"babelzoo\[cpu\].*faiss-cpu.*babelzoo\[gpu\].*faiss-gpu") as caught:
        RetrievalMemory(8)
    assert isinstance(caught.value, BabelzooError)


def test_setup_keeps_faiss_out_of_the_base_requirements():
    import ast
    from pathlib import Path

    tree = ast.parse((Path(__file__).resolve().parents[1] / "setup.py").read_text(encoding="utf-8"))
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
    options = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg in ("install_requires", "extras_require")}
    assert not [r for r in options["install_requires"] if r.startswith("faiss")]
    assert options["extras_require"]["gpu"] == ["faiss-gpu>=1.7"] and options["extras_require"]["cpu"] == ["faiss-cpu>=1.8"]
    assert "faiss-cpu>=1.8" in options["extras_require"]["test"]


def test_missing_sacrebleu_names_the_extra(monkeypatch):
    from babelzoo.evaluation.translation import corpus_scores

    monkeypatch.setitem(sys.modules, "sacrebleu", None)
    monkeypatch.setitem(sys.modules, "sacrebleu.metrics", None)
    with pytest.raises(BabelzooError, match=r"babelzoo\[translation\]"):
        corpus_scores(["a b"], ["a b"], "de")
