"""Text is never lost without a word: CR-only line endings are an error naming the file, and
``babelzoo pretrain`` says what reading dropped (or that a source holds nothing)."""

import pytest
import yaml

from babelzoo.cli import main
from babelzoo.datasets.text import CorpusError, read_monolingual, read_parallel


def test_cr_only_line_endings_are_an_error(tmp_path):
    path = tmp_path / "old_mac.txt"
    path.write_bytes(b"first sentence\rsecond sentence\rthird sentence\r")
    with pytest.raises(CorpusError, match=rf"{path}:1: carriage return inside a line \(CR-only line endings\?\)"):
        read_monolingual(path, "en")
    crlf = tmp_path / "windows.txt"
    crlf.write_bytes(b"first sentence\r\nsecond sentence\r\n")
    assert read_monolingual(crlf, "en").sentences == ["first sentence", "second sentence"]
    one = tmp_path / "one.txt"
    one.write_bytes(b"one line\n")
    with pytest.raises(CorpusError, match=rf"{path}:1: carriage return inside a line"):
        read_parallel(one, path, "en", "de")  # same line count: the CR file would pass as one pair


def test_pretrain_reports_dropped_lines_and_refuses_an_empty_source(tmp_path, capsys):
    (tmp_path / "de.txt").write_text("ein Satz\n\nnoch ein Satz\n\n\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n\n\n", encoding="utf-8")
    (tmp_path / "fr.txt").write_text("\n\n\n", encoding="utf-8")
    recipe = {"model": "xlm_tiny", "tokenizer": {"vocab_size": 50},
              "objectives": {"mlm": {}, "tlm": {}},
              "data": {"mlm": [{"kind": "text", "path": str(tmp_path / "de.txt"), "lang": "de"}],
                       "tlm": [{"kind": "parallel", "src": str(tmp_path / "en.txt"), "tgt": str(tmp_path / "fr.txt"),
                                "src_lang": "en", "tgt_lang": "fr"}]},
              "output_dir": str(tmp_path / "run"), "progress": False, "tensorboard": False}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    assert main(["pretrain", "--config", str(path)]) == 2  # the command shows the warnings on stderr
    err = capsys.readouterr().err
    assert f"data.mlm[0] ({tmp_path / 'de.txt'}): 5 lines, kept 2, skipped 3" in err
    assert f"data.tlm[0] ({tmp_path / 'en.txt'}, {tmp_path / 'fr.txt'}): no sentences to train on" in err
