"""babelzoo.typed: the one coercion/validation helper of every config."""

from dataclasses import dataclass, field
from typing import Annotated, Literal, Optional, Union

import pytest

from babelzoo.errors import ConfigError
from babelzoo.typed import Section, Where, build, check, check_fields, coerce
from babelzoo.yaml_files import key_lines


@dataclass
class Inner:
    size: int = 1


@dataclass
class Outer:
    name: str
    rate: float = 0.1
    steps: Optional[int] = None
    mode: Literal["a", "b"] = "a"
    sizes: tuple[int, ...] = ()
    inner: Inner = field(default_factory=Inner)
    either: Union[int, list[str]] = 0

    def __post_init__(self):
        check_fields(self)
        if self.rate > 1:
            raise ConfigError(f"Outer.rate={self.rate!r} must be at most 1")


TEXT = """name: x
rate: 2
inner:
  size: big
sizes: [1, 2]
"""


def test_yaml_spellings_are_coerced():
    where = Where("rate")
    assert coerce("1e-3", float, where) == 1e-3 and coerce(2, float, where) == 2.0
    assert coerce(3.0, int, where) == 3 and coerce([1, 2], tuple[int, ...], where) == (1, 2)
    assert coerce({"size": 4}, Inner, where) == Inner(4)
    with pytest.raises(ConfigError, match=r"^rate=3.5 must be an integer, got float$"):
        coerce(3.5, int, where)


def test_strict_check_converts_nothing():
    where = Where("x", label="Model.")
    assert check(2, float, where) == 2 and isinstance(check(2, float, where), int)
    for value, hint, message in [("1e-3", float, "Model.x='1e-3' must be a number, got str"),
                                 (2.0, int, "Model.x=2.0 must be an integer, got float"),
                                 ([1], tuple[int, ...], "Model.x=[1] must be a list of integers, got list"),
                                 ("3", Optional[int], "Model.x='3' must be an integer or null, got str")]:
        with pytest.raises(ConfigError) as err:
            check(value, hint, where)
        assert str(err.value) == message


def test_build_names_file_line_and_key_path():
    lines = key_lines(TEXT)
    assert lines == {"name": 1, "rate": 2, "inner": 3, "inner.size": 4, "sizes": 5, "sizes[0]": 5, "sizes[1]": 5}
    where = Where(file="o.yaml", lines=lines)
    with pytest.raises(ConfigError, match=r"^o.yaml:4 inner.size='big' must be an integer, got str$"):
        build(Outer, {"name": "x", "inner": {"size": "big"}}, where)
    # the class's own check on one field gets that field's line
    with pytest.raises(ConfigError, match=r"^o.yaml:2: Outer.rate=2.0 must be at most 1$"):
        build(Outer, {"name": "x", "rate": 2}, where)
    with pytest.raises(ConfigError, match=r"^o.yaml rte: unknown Outer key 'rte'; did you mean 'rate'\? Valid keys"):
        build(Outer, {"name": "x", "rte": 1}, where)
    with pytest.raises(ConfigError, match=r"^config: Outer needs name$"):
        build(Outer, {}, Where())
    with pytest.raises(ConfigError, match=r"mode='c' must be one of 'a', 'b'"):
        build(Outer, {"name": "x", "mode": "c"}, where)


def test_a_dataclass_built_in_python_is_held_to_its_types():
    assert Outer("x", rate=1, sizes=[3]).sizes == (3,)
    assert Outer("x", either=["a"]).either == ["a"]
    with pytest.raises(ConfigError, match=r"^Outer.either='a' must be an integer or a list of strings, got str$"):
        Outer("x", either="a")
    with pytest.raises(ConfigError, match=r"^Outer.name=3 must be a string, got int$"):
        Outer(3)


# --- sections kept as written, read by the one loader ------------------------------------

def _positive_keys(value, where):
    for key, number in value.items():
        if number <= 0:
            raise ConfigError(f"{where.key(key)}={number} must be positive")


@dataclass
class WithSection:
    part: Annotated[dict, Section(_positive_keys)] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_fields(self)


def test_a_section_is_kept_as_written_and_read_whenever_the_config_is_built(tmp_path):
    from babelzoo.config_files import load_config

    assert WithSection({"a": 1}).part == {"a": 1}
    with pytest.raises(ConfigError, match=r"^WithSection.part.b=0 must be positive$"):
        WithSection({"a": 1, "b": 0})
    path = tmp_path / "c.yaml"
    path.write_text("part:\n  a: 1\n  b: -2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{path}:3 WithSection.part.b=-2 must be positive$"):
        load_config(WithSection, path)
    path.write_text("part:\n  a: 1\n  b: 2\n", encoding="utf-8")
    config, where = load_config(WithSection, path, ["part.b=3", "part.c=4"])
    assert config.part == {"a": 1, "b": 3, "c": 4} and where.lines == {"part": 1, "part.a": 2}
