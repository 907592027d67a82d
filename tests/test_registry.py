import pytest

from babelzoo.registry import PlugInError, Registry, RegistryError, choices_hint, close_matches


def make():
    reg = Registry("widget")

    @reg.register
    def xlm_base():
        return "xb"

    @reg.register
    def xlm_tiny():
        return "xt"

    @reg.register(name="xlmr_tiny")
    def anything():
        return "xrt"

    return reg


def test_register_get_and_wildcards():
    reg = make()
    assert reg.get("xlmr_tiny")() == "xrt"
    assert reg.list() == ["xlm_base", "xlm_tiny", "xlmr_tiny"]
    assert reg.list("xlm_*") == ["xlm_base", "xlm_tiny"]
    assert reg.list("*tiny") == ["xlm_tiny", "xlmr_tiny"]
    assert reg.list("bert*") == []
    assert "xlm_base" in reg and len(reg) == 3


def test_unknown_name_suggests_close_matches():
    with pytest.raises(KeyError) as err:
        make().get("xlmr_tiy")
    message = str(err.value)
    assert message.startswith("unknown widget 'xlmr_tiy'; did you mean 'xlmr_tiny'")
    assert "known: xlm_base, xlm_tiny, xlmr_tiny" in message


def test_suggestions_and_the_names_listed_agree():
    """A suggestion is one of the names listed, never the name asked for; a single name is stated
    as the only one, not both suggested and listed; a far-off name gets no suggestion."""
    one = Registry("language")
    one.register(lambda: None, name="deu")
    assert one.unknown_message("de") == "unknown language 'de'; did you mean 'deu'? (the only language known)"
    assert one.unknown_message("zzz") == "unknown language 'zzz'; the only language known is 'deu'"
    assert Registry("language").unknown_message("de") == "unknown language 'de' (known: none)"
    assert make().unknown_message("bert") == "unknown widget 'bert' (known: xlm_base, xlm_tiny, xlmr_tiny)"
    assert close_matches("xlmr_tiny", ["xlmr_tiny", "xlmr_tin", "bert"]) == ["xlmr_tin"]
    assert choices_hint("deu", ["deu", "fra"]) == " (known: deu, fra)"


def test_a_listed_registry_names_its_listing_command_instead_of_every_name():
    reg = Registry("widget", listed_by="widgets list")
    for name in ("xlm_base", "xlm_tiny", "xlmr_tiny"):
        reg.register(lambda: None, name=name)
    assert reg.unknown_message("xlmr_tiy") == ("unknown widget 'xlmr_tiy'; did you mean 'xlmr_tiny', 'xlm_tiny'? "
                                               "(every widget: widgets list)")
    assert reg.unknown_message("bert") == "unknown widget 'bert' (every widget: widgets list)"


def test_duplicate_registration_is_an_error():
    reg = make()
    with pytest.raises(RegistryError, match="widget 'xlm_base' is already registered"):
        reg.register(lambda: None, name="xlm_base")


WIDGETS = Registry("widget", group="babelzoo_test.widgets")

PLUG_IN = """
from test_registry import WIDGETS

IMPORTS = globals().setdefault("IMPORTS", 0) + 1
WIDGETS.register(lambda: "spun", name="spinner")

def wobble():
    return "wobbled"
"""


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """A package installed on sys.path that declares widgets: one registered when its module is
    imported, one named as the object itself, one whose module fails, one that registers nothing."""
    (tmp_path / "widget_plug.py").write_text(PLUG_IN, encoding="utf-8")
    (tmp_path / "widget_broken.py").write_text("raise RuntimeError('no such backend')\n", encoding="utf-8")
    info = tmp_path / "widgets-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: widgets\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[babelzoo_test.widgets]\nspinner = widget_plug\nwobble = widget_plug:wobble\n"
                                           "broken = widget_broken\nsilent = widget_plug\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    import sys

    importlib.invalidate_caches()
    yield
    WIDGETS._entries.clear()
    WIDGETS._loaded.clear()
    WIDGETS._listed = False
    for name in ("widget_plug", "widget_broken"):
        sys.modules.pop(name, None)


def test_a_plug_in_is_imported_on_the_first_lookup_of_its_name_and_once(installed):
    import sys

    assert "widget_plug" not in sys.modules  # nothing is imported before a name is asked for
    assert WIDGETS.get("spinner")() == "spun"
    assert WIDGETS.get("wobble")() == "wobbled"  # an entry point that names the part itself
    assert sys.modules["widget_plug"].IMPORTS == 1
    assert "widget_broken" not in sys.modules  # looking up one name imports only its entry point


def test_a_broken_plug_in_is_an_error_naming_its_entry_point(installed):
    with pytest.raises(PlugInError, match=r"entry point broken = widget_broken \(group babelzoo_test.widgets\) "
                                          r"failed to load: RuntimeError: no such backend"):
        WIDGETS.get("broken")
    with pytest.raises(PlugInError, match=r"entry point silent = widget_plug \(group babelzoo_test.widgets\) "
                                          r"registers no widget 'silent' \(registered: spinner\)"):
        WIDGETS.get("silent")
    with pytest.raises(PlugInError, match="failed to load"):  # asked again, it fails again
        WIDGETS.get("broken")
    with pytest.raises(PlugInError, match="entry point broken = widget_broken"):  # listing imports every one
        WIDGETS.list()


def test_a_listing_imports_every_plug_in_once(installed, monkeypatch, tmp_path):
    (tmp_path / "widget_broken.py").write_text("", encoding="utf-8")  # the broken one is mended, but says nothing
    (tmp_path / "widgets-0.1.dist-info" / "entry_points.txt").write_text(
        "[babelzoo_test.widgets]\nspinner = widget_plug\nwobble = widget_plug:wobble\n", encoding="utf-8")
    assert WIDGETS.list() == ["spinner", "wobble"]
    scans = []
    monkeypatch.setattr("babelzoo.registry.entry_points", lambda **kw: scans.append(kw) or [])
    assert WIDGETS.list("w*") == ["wobble"] and scans == []  # listed once: no second scan
    with pytest.raises(RegistryError, match="unknown widget 'gear'"):
        WIDGETS.get("gear")  # an unknown name is looked for among the installed entry points again
    assert scans == [{"group": "babelzoo_test.widgets"}]  # by its name; the listing is not made again


@pytest.mark.parametrize("registry, package", [("babelzoo.objectives.base:OBJECTIVES", "babelzoo.objectives"),
                                               ("babelzoo.evaluation.tasks:TASKS", "babelzoo.evaluation.tasks"),
                                               ("babelzoo.datasets.sources:SOURCES", "babelzoo.datasets")])
def test_every_built_in_part_of_a_layer_is_declared_in_its_registrys_table(registry, package):
    """A layer's parts are its registry's built-in entry points, found by name the way a plug-in's
    are: every part a module of the layer registers is in the table, under its own module."""
    import importlib

    module, name = registry.split(":")
    table = getattr(importlib.import_module(module), name)
    table.list()  # every entry point imported
    own = {key: value for key, value in table._entries.items()
           if getattr(value, "__module__", "").startswith(package + ".") and getattr(value, "__module__", "") != module}
    assert own and set(own) <= set(table.builtin), sorted(set(own) - set(table.builtin))  # (families: test_plugins)
    for key, value in own.items():
        assert table.builtin[key].split(":")[0] == value.__module__, key
