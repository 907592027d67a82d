import pytest

from babelzoo.registry import Registry, RegistryError, choices_hint, close_matches


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


def test_duplicate_registration_is_an_error():
    reg = make()
    with pytest.raises(RegistryError, match="widget 'xlm_base' is already registered"):
        reg.register(lambda: None, name="xlm_base")
