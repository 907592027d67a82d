"""babelzoo convert --to-onnx refuses, in one line and before the model loads, what it cannot do:
an opset torch.onnx does not write, an environment without the onnx extra."""

import ast
import re
import sys
from pathlib import Path

import pytest

from babelzoo.cli import main
from babelzoo.deploy.onnx import EXTRA

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_loading(monkeypatch):
    """Loading the model fails the test: the refusals come before it."""
    def load_model(source, *args, **kwargs):
        raise AssertionError(f"the model {source} was loaded")

    monkeypatch.setattr("babelzoo.zoo.factory.load_model", load_model)


@pytest.mark.parametrize("opset", [17, 26])
def test_an_opset_the_exporter_cannot_write_is_refused_before_the_model_loads(opset, no_loading, tmp_path, capsys):
    assert main(["convert", "--to-onnx", str(tmp_path / "onnx"), "--from", "xlmr_tiny", "--opset", str(opset)]) == 2
    assert capsys.readouterr().err == (f"babelzoo convert: --opset {opset}: torch.onnx writes opsets 18 to 25 (default "
                                       "23, whose Attention operator ONNX Runtime runs fused; 18 for older runtimes)\n")
    assert not (tmp_path / "onnx").exists()


@pytest.mark.parametrize("package", EXTRA)
def test_without_the_onnx_extra_the_export_names_it_before_the_model_loads(package, no_loading, tmp_path,
                                                                           monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, package, None)  # what an environment without the package gives
    assert main(["convert", "--to-onnx", str(tmp_path / "onnx"), "--from", "xlmr_tiny"]) == 2
    missing, message = capsys.readouterr().err.split(" not installed: ")
    assert package in missing.removeprefix("babelzoo convert: ").split(", ")  # onnxscript fails with onnx too
    assert message == ("ONNX export and inference need babelzoo's onnx extra; install it from the babelzoo checkout "
                       "with pip install -c requirements/constraints.txt -e \".[onnx]\"\n")


def test_the_extra_checked_is_setups_onnx_extra():
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf-8"))
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
    extras = next(ast.literal_eval(k.value) for k in call.keywords if k.arg == "extras_require")
    assert tuple(re.split(r"[<>=!~\[; ]", requirement)[0] for requirement in extras["onnx"]) == EXTRA
