"""The embedded CLDR knowledge base: facts and multilingual names against CLDR / ISO data."""

from __future__ import annotations

import pytest

from babelzoo.knowledge import load_kb
from babelzoo.knowledge.cldr import load_cldr


@pytest.fixture(scope="module")
def kb():
    return load_kb("cldr")


def test_facts(kb):
    assert ("territory:JP", "uses_currency", "currency:JPY") in kb.triples(head="territory:JP")
    assert ("territory:JP", "official_language", "language:ja") in kb.triples(head="territory:JP")
    assert kb.triples(head="territory:CH", relation="uses_currency") == [("territory:CH", "uses_currency", "currency:CHF")]
    assert {t.tail for t in kb.triples(head="territory:CH", relation="official_language")} >= {
        "language:de", "language:fr", "language:it"}
    assert {t.head for t in kb.triples(relation="uses_currency", tail="currency:EUR")} >= {
        "territory:DE", "territory:FR", "territory:IT", "territory:ES"}
    assert kb.triples(head="language:ja", relation="uses_script") == [("language:ja", "uses_script", "script:Jpan")]
    assert kb.triples(head="language:ru", relation="uses_script") == [("language:ru", "uses_script", "script:Cyrl")]
    assert kb.triples(head="timezone:Asia/Tokyo") == [("timezone:Asia/Tokyo", "located_in", "territory:JP")]
    assert kb.triples(head="subdivision:JP-13") == [("subdivision:JP-13", "located_in", "territory:JP")]
    assert kb.triples(head="subdivision:AZ-BAB") == [("subdivision:AZ-BAB", "located_in", "subdivision:AZ-NX")]
    assert kb.triples(head="language:en_GB", relation="dialect_of") == [("language:en_GB", "dialect_of", "language:en")]
    assert kb.entity_type("currency:JPY") == "currency"
    assert "territory:JP" in kb.neighbors("currency:JPY")


def test_labels_in_many_languages(kb):
    assert kb.labels("territory:JP", "de")[0] == "Japan"
    assert kb.labels("territory:JP", "ja")[0] == "日本"
    assert kb.labels("territory:JP", "sw")[0] == "Japani"
    assert kb.labels("territory:JP", "fr")[0] == "Japon"
    assert kb.labels("currency:JPY", "de")[0] == "Japanischer Yen"
    assert kb.labels("language:de", "de")[0] == "Deutsch"
    assert kb.labels("timezone:Asia/Tokyo", "de")[0] == "Tokio"
    assert kb.label("subdivision:JP-13", "und") == "Tokyo"
    # ISO names from pycountry are aliases: official and common names, currency names
    assert "United Kingdom of Great Britain and Northern Ireland" in kb.labels("territory:GB", "en")
    assert "Yen" in kb.labels("currency:JPY", "en")
    assert len(kb.languages()) > 300
    names = {lang for lang in kb.languages() if kb.labels("territory:JP", lang)}
    assert len(names) > 300  # Japan is named in (nearly) every CLDR locale


def test_size(kb):
    kinds = {}
    for entity in kb.entities():
        kinds[kb.entity_type(entity)] = kinds.get(kb.entity_type(entity), 0) + 1
    assert kinds["territory"] >= 249 and kinds["currency"] >= 250 and kinds["language"] >= 500
    assert kinds["subdivision"] >= 5000 and kinds["timezone"] >= 400 and kinds["script"] >= 150
    assert len(kb.triples()) > 8000


def test_disk_cache_round_trip(tmp_path, monkeypatch, kb):
    monkeypatch.setenv("BABELZOO_CACHE", str(tmp_path))
    from babelzoo.knowledge import cldr

    monkeypatch.setattr(cldr, "_MEMORY", {})
    monkeypatch.setattr(cldr, "build_cldr_kb", lambda: kb)  # the build itself is covered above
    first = load_cldr()
    assert list((tmp_path / "knowledge").glob("cldr-*.json.gz"))
    monkeypatch.setattr(cldr, "_MEMORY", {})
    monkeypatch.setattr(cldr, "build_cldr_kb", lambda: pytest.fail("should read the cache"))
    second = load_cldr()
    assert second is not first
    assert second.triples() == first.triples() and second.aliases("ja") == first.aliases("ja")
    assert second.type_prior == first.type_prior
