"""YAML files a user gives (recipes, leaderboard configs, ``--set`` values) are read by one
bounded loader: an alias bomb or a recursive alias is refused in milliseconds with its file and
line, text that is not UTF-8 names the byte's line, and the aliases the shipped recipes use
still expand as YAML says."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from babelzoo.cli import main
from babelzoo.errors import ConfigError
from babelzoo.train.config import load_recipe
from babelzoo.yaml_files import MAX_ALIAS_VALUES, MAX_DEPTH, load_yaml, read_yaml

RECIPES = Path(__file__).resolve().parents[2] / "babelzoo" / "recipes"
CONFIGS = Path(__file__).resolve().parents[2] / "benchmarks" / "configs"


def alias_bomb(levels: int = 8) -> str:
    """A "billion laughs" document: each level repeats the one before nine times (9^8 values
    from 8 lines, where PyYAML alone takes ~40 s and gigabytes to fail)."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * 9)}]")
    return "\n".join(["model: xlmr_tiny", *lines, f"objectives: {{mlm: {{max_length: *a{levels - 1}}}}}"]) + "\n"


def run(argv, capsys) -> tuple[int, str, float]:
    start = time.perf_counter()
    code = main([str(a) for a in argv])
    seconds = time.perf_counter() - start
    err = capsys.readouterr().err
    return code, err, seconds


def test_an_alias_bomb_is_refused_fast_with_its_line(tmp_path, capsys):
    (tmp_path / "bomb.yaml").write_text(alias_bomb(), encoding="utf-8")
    for argv in (["pretrain", "--config", tmp_path / "bomb.yaml", "--print-config"],
                 ["finetune", "--config", tmp_path / "bomb.yaml"],
                 ["eval", "--config", tmp_path / "bomb.yaml", "--out", tmp_path / "out"]):
        code, err, seconds = run(argv, capsys)
        # level 4 (line 6) is the first whose aliases add more than 10,000 values: 9 * 7381 at *a3
        assert (code, err) == (2, f"babelzoo {argv[0]}: {tmp_path}/bomb.yaml:6: aliases expand the document by "
                                  f"more than 10,000 values (at *a3); write the values out, or repeat fewer of "
                                  f"them\n"), err
        assert seconds < 2.0, f"{argv[0]} took {seconds:.1f} s to refuse 8 lines"
    assert not (tmp_path / "out").exists()


def test_the_bound_counts_values_not_lines():
    # each level adds 9 references to the level before: 10 + 9*10 + 9*91 ... values
    just_under = "a: &a [" + ", ".join(["x"] * 99) + "]\nb: [" + ", ".join(["*a"] * 99) + "]\n"
    data, _ = load_yaml(just_under)  # 99 aliases of 100 values each: 9,900 added
    assert len(data["b"]) == 99 and data["b"][0] is data["a"] and len(data["a"]) == 99
    over = "a: &a [" + ", ".join(["x"] * 100) + "]\nb: [" + ", ".join(["*a"] * 100) + "]\n"
    with pytest.raises(ConfigError, match=rf"^line 2: aliases expand the document by more than "
                                          rf"{MAX_ALIAS_VALUES:,} values \(at \*a\)"):
        load_yaml(over)  # 100 aliases of 101 values: 10,100


@pytest.mark.parametrize("text, line, what", [
    ("model: xlmr_tiny\nlangs: &l [en, *l]\n", 2, "alias *l is inside its own anchor &l (a recursive structure)"),
    ("a: &m\n  b: 1\n  c: *m\n", 3, "alias *m is inside its own anchor &m (a recursive structure)"),
    ("x: " + "[" * 200 + "]" * 200 + "\n", 1, f"mappings and lists nested more than {MAX_DEPTH} deep"),
])
def test_recursive_or_bottomless_documents_are_refused_with_their_line(tmp_path, capsys, text, line, what):
    (tmp_path / "r.yaml").write_text(text, encoding="utf-8")
    code, err, _ = run(["pretrain", "--config", tmp_path / "r.yaml", "--print-config"], capsys)
    assert (code, err) == (2, f"babelzoo pretrain: {tmp_path}/r.yaml:{line}: {what}\n")


def test_text_that_is_not_utf8_names_the_file_line_and_byte(tmp_path, capsys):
    (tmp_path / "latin.yaml").write_bytes("model: xlmr_tiny\n# caf\xe9 au lait\nmax_steps: 3\n".encode("latin-1"))
    (tmp_path / "board.yaml").write_bytes("title: r\xe9sultats\ntasks: [tatoeba]\n".encode("latin-1"))
    code, err, _ = run(["pretrain", "--config", tmp_path / "latin.yaml", "--print-config"], capsys)
    assert (code, err) == (2, f"babelzoo pretrain: {tmp_path}/latin.yaml:2: not UTF-8 text (byte 0xe9); "
                              f"save it as UTF-8\n")
    code, err, _ = run(["eval", "--config", tmp_path / "board.yaml"], capsys)
    assert (code, err) == (2, f"babelzoo eval: {tmp_path}/board.yaml:1: not UTF-8 text (byte 0xe9); "
                              f"save it as UTF-8\n")
    # a byte-order mark is UTF-8 and is read
    (tmp_path / "bom.yaml").write_bytes(b"\xef\xbb\xbfmodel: bert_tiny\n")
    assert load_recipe(tmp_path / "bom.yaml").model == "bert_tiny"


def test_a_utf16_recipe_is_named_as_utf16(tmp_path, capsys):
    """Notepad's "Unicode": the byte-order mark, not the first byte that is not UTF-8."""
    (tmp_path / "notepad.yaml").write_bytes("model: xlmr_tiny\nmax_steps: 3\n".encode("utf-16"))
    code, err, _ = run(["pretrain", "--config", tmp_path / "notepad.yaml", "--print-config"], capsys)
    assert (code, err) == (2, f"babelzoo pretrain: {tmp_path}/notepad.yaml: UTF-16 text (byte-order mark 0xff 0xfe); "
                              "save it as UTF-8\n")


@pytest.mark.parametrize("encoding, said", [
    ("utf-16", "UTF-16 text (byte-order mark 0xff 0xfe)"),
    ("utf-16-be", "UTF-16 text (big-endian, no byte-order mark)"),
    ("utf-32", "UTF-32 text (byte-order mark 0xff 0xfe 0x00 0x00)"),
    ("utf-32-le", "UTF-32 text (little-endian, no byte-order mark)"),
])
def test_read_utf8_names_utf16_and_utf32_text(tmp_path, encoding, said):
    from babelzoo._files import read_utf8

    path = tmp_path / "r.yaml"
    path.write_bytes("model: xlmr_tiny\nlr: 0.001  # café\n".encode(encoding))
    with pytest.raises(ConfigError) as err:
        read_utf8(path, ConfigError)
    assert str(err.value) == f"{path}: {said}; save it as UTF-8"


@pytest.mark.parametrize("override, reason", [
    ("lr=[unclosed", "invalid YAML (expected ',' or ']', but got '<stream end>')"),
    ("lr=!!python/object/apply:os.system [echo hi]",
     "invalid YAML (could not determine a constructor for the tag "
     "'tag:yaml.org,2002:python/object/apply:os.system')"),
    ("data=&a [*a]", "alias *a is inside its own anchor &a (a recursive structure)"),
    ("lr={a: 1, a: 2", "invalid YAML (expected ',' or '}', but got '<stream end>')"),
])
def test_set_values_yaml_cannot_parse_are_one_line(tmp_path, capsys, override, reason):
    (tmp_path / "r.yaml").write_text("model: xlmr_tiny\n", encoding="utf-8")
    code, err, _ = run(["pretrain", "--config", tmp_path / "r.yaml", "--set", override, "--print-config"], capsys)
    assert (code, err) == (2, f"babelzoo pretrain: --set {override!r}: {reason}\n")


def test_python_tags_in_a_recipe_are_refused_with_their_line(tmp_path, capsys):
    (tmp_path / "r.yaml").write_text("model: xlmr_tiny\nlr: !!python/object/apply:os.getpid []\n", encoding="utf-8")
    code, err, _ = run(["pretrain", "--config", tmp_path / "r.yaml", "--print-config"], capsys)
    assert (code, err) == (2, f"babelzoo pretrain: {tmp_path}/r.yaml:2: invalid YAML (could not determine a "
                              f"constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.getpid')\n")


@pytest.mark.parametrize("path", sorted(RECIPES.glob("*.yaml")) + sorted(CONFIGS.glob("*.yaml")),
                         ids=lambda p: p.name)
def test_every_shipped_file_reads_as_plain_yaml_reads_it(path):
    data, lines = read_yaml(path)
    assert data == yaml.safe_load(path.read_text(encoding="utf-8"))
    assert lines and min(lines.values()) >= 1


def test_the_aliases_shipped_recipes_use_still_expand():
    data, lines = read_yaml(RECIPES / "demo.yaml")
    pairs = data["data"]["tlm"]
    assert data["data"]["clwr"] == pairs and data["data"]["xlco"] == pairs and pairs[0]["kind"] == "catalog_pairs"
    assert pairs[0]["langs"] == data["data"]["mlm"][0]["langs"] == ["en", "de", "fr", "es", "ru", "zh-CN", "ja", "ar"]
    assert lines["data.tlm"] == 27 and lines["data.clwr"] == 29
