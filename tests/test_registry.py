import pytest

from babelzoo.registry import Registry, RegistryError


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


def test_duplicate_registration_is_an_error():
    reg = make()
    with pytest.raises(RegistryError, match="widget 'xlm_base' is already registered"):
        reg.register(lambda: None, name="xlm_base")
