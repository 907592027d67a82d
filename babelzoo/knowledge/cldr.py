"""The embedded multilingual knowledge base: Unicode CLDR (through ``babel``) and ISO 3166 /
ISO 4217 (through ``pycountry``), installed with the package, nothing downloaded.

Entities (ids carry their kind): ``territory:JP`` (countries and CLDR regions such as
``territory:419``), ``language:ja`` (and variants such as ``language:en_GB``), ``currency:JPY``,
``script:Jpan``, ``timezone:Asia/Tokyo``, ``subdivision:JP-13``.

Relations: ``uses_currency`` (territory → current legal tender), ``official_language``,
``regional_official_language``, ``spoken_language`` (territory → language, from CLDR's
territory-language data), ``uses_script`` and ``likely_territory`` (language → script /
territory, from CLDR likely subtags), ``dialect_of`` (language variant → language),
``located_in`` (time zone → territory, subdivision → parent subdivision or country).

Names: the CLDR display name in every language-level CLDR locale (``de``, ``ja``, ``sw``,
``zh_Hant``...) is the preferred label; ISO names from pycountry (official and common country
names, currency names, subdivision names) and their translations are aliases. Subdivision names
in their ISO (local) form are language-neutral (``und``). Time zones are named by their CLDR
exemplar city, falling back to the city in the zone id, as CLDR itself does.

The build takes a few seconds; the result is cached in memory and as JSON in the cache folder,
keyed by the babel and pycountry versions.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Optional

from .graph import UNDETERMINED, GraphKB

FORMAT = 3
# Linking prior by kind: a bare name most often means the country, then a language or currency;
# a time zone is named after its exemplar city, which a text rarely means by that name.
TYPE_PRIOR = {"territory": 3.0, "language": 2.0, "currency": 2.0, "subdivision": 1.0, "script": 0.5,
              "timezone": 0.0}
_MEMORY: dict[str, GraphKB] = {}
OFFICIAL = {"official": "official_language", "de_facto_official": "official_language",
            "official_regional": "regional_official_language"}
# pycountry's gettext folders → the CLDR-style codes used for names here
PYCOUNTRY_LOCALES = {"zh_CN": "zh_Hans", "zh_TW": "zh_Hant", "zh_HK": "zh_Hant", "sr@latin": "sr_Latn",
                     "nb_NO": "nb", "bn_BD": "bn", "pa_PK": "pa_Arab", "tt@iqtelif": "tt_Latn"}


def _cache_key() -> str:
    return f"cldr-babel{version('babel')}-pycountry{version('pycountry')}-v{FORMAT}"


def load_cldr(cache: bool = True, refresh: bool = False) -> GraphKB:
    """The CLDR knowledge base. The instance is shared within a process: copy it
    (``GraphKB.from_dict(kb.to_dict())``) before changing it."""
    key = _cache_key()
    if cache and not refresh and key in _MEMORY:
        return _MEMORY[key]
    path = _cache_path(key)
    kb = None
    if cache and not refresh and path.is_file():
        try:
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                kb = GraphKB.from_dict(json.load(handle))
        except (OSError, ValueError, KeyError):
            kb = None  # a truncated or stale cache file is rebuilt below
    if kb is None:
        kb = build_cldr_kb()
        if cache:
            _write_cache(path, kb)
    if cache:
        _MEMORY[key] = kb
    return kb


def _cache_path(key: str) -> Path:
    from ..datasets.download import cache_dir

    return cache_dir() / "knowledge" / f"{key}.json.gz"


def _write_cache(path: Path, kb: GraphKB) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6) as handle:
            handle.write(json.dumps(kb.to_dict(), ensure_ascii=False).encode("utf-8"))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def locales() -> list[str]:
    """CLDR locales at language level (``de``, ``sr_Latn``), i.e. without a territory."""
    from babel import Locale, localedata

    return sorted(code for code in localedata.locale_identifiers() if Locale.parse(code).territory is None)


def build_cldr_kb() -> GraphKB:
    """Build the knowledge base from the installed babel and pycountry data."""
    from babel import Locale
    from babel.core import get_global

    kb = GraphKB("cldr")
    kb.type_prior = dict(TYPE_PRIOR)
    en = Locale.parse("en")
    kinds = {"territory": set(en.territories), "language": set(en.languages),
             "currency": set(en.currencies), "script": set(en.scripts),
             "timezone": set(get_global("zone_territories"))}
    for kind, codes in kinds.items():
        for code in sorted(codes):
            kb.add_entity(f"{kind}:{code}", kind)
    _add_cldr_names(kb, kinds)
    _add_territory_facts(kb, get_global("territory_currencies"), get_global("territory_languages"))
    _add_language_facts(kb, kinds["language"], get_global("likely_subtags"))
    for zone, territory in sorted(get_global("zone_territories").items()):
        kb.add_triple(f"timezone:{zone}", "located_in", _territory(kb, territory))
        if not kb.labels(f"timezone:{zone}", "en"):
            kb.add_label(f"timezone:{zone}", "en", zone.rsplit("/", 1)[-1].replace("_", " "))
    _add_pycountry(kb)
    return kb


def _territory(kb: GraphKB, code: str) -> str:
    entity = f"territory:{code}"
    if entity not in kb:
        kb.add_entity(entity, "territory")
    return entity


def _add_cldr_names(kb: GraphKB, kinds: dict[str, set[str]]) -> None:
    from babel import Locale

    for code in locales():
        loc = Locale.parse(code)
        tables = {"territory": loc.territories, "language": loc.languages,
                  "currency": loc.currencies, "script": loc.scripts}
        for kind, table in tables.items():
            known = kinds[kind]
            for key, name in table.items():
                if key in known and name:
                    kb.add_label(f"{kind}:{key}", code, name, preferred=True)
        for zone, info in loc.time_zones.items():
            city = info.get("city") if hasattr(info, "get") else None
            if zone in kinds["timezone"] and city:
                kb.add_label(f"timezone:{zone}", code, city, preferred=True)


def _add_territory_facts(kb: GraphKB, currencies: dict, languages: dict) -> None:
    for territory, entries in sorted(currencies.items()):
        for code, _start, end, tender in entries:
            if end is None and tender:
                kb.add_triple(_territory(kb, territory), "uses_currency", _entity(kb, "currency", code))
    for territory, table in sorted(languages.items()):
        for lang, info in table.items():
            relation = OFFICIAL.get(info.get("official_status"), "spoken_language")
            kb.add_triple(_territory(kb, territory), relation, _entity(kb, "language", lang))


def _entity(kb: GraphKB, kind: str, code: str) -> str:
    entity = f"{kind}:{code}"
    if entity not in kb:
        kb.add_entity(entity, kind)
    return entity


def _add_language_facts(kb: GraphKB, languages: set[str], likely: dict) -> None:
    for lang in sorted(languages):
        base = lang.split("_")[0]
        if base != lang and base in languages:
            kb.add_triple(f"language:{lang}", "dialect_of", f"language:{base}")
        subtags = likely.get(lang)
        if subtags is None:
            continue
        parts = subtags.split("_")
        script = next((p for p in parts[1:] if len(p) == 4 and p.istitle()), None)
        territory = next((p for p in parts[1:] if len(p) in (2, 3) and (p.isupper() or p.isdigit())), None)
        if script:
            kb.add_triple(f"language:{lang}", "uses_script", _entity(kb, "script", script))
        if territory:
            kb.add_triple(f"language:{lang}", "likely_territory", _territory(kb, territory))


def _translations(domain: str) -> dict[str, object]:
    """gettext catalogs of one pycountry domain, keyed by CLDR-style language code."""
    import gettext

    import pycountry

    out = {}
    for folder in sorted(os.listdir(pycountry.LOCALES_DIR)):
        mo = Path(pycountry.LOCALES_DIR) / folder / "LC_MESSAGES" / f"{domain}.mo"
        if mo.is_file():
            with open(mo, "rb") as handle:
                out[PYCOUNTRY_LOCALES.get(folder, folder)] = gettext.GNUTranslations(handle)
    return out


def _add_aliases(kb: GraphKB, entity: str, names: list[str], catalogs: dict, source_lang: Optional[str]) -> None:
    for name in names:
        if source_lang is not None:
            kb.add_label(entity, source_lang, name)
        for lang, catalog in catalogs.items():
            # membership, not gettext(): a translation equal to the source is still a name there
            translated = catalog._catalog.get(name)
            if translated:
                kb.add_label(entity, lang, translated)


def _add_pycountry(kb: GraphKB) -> None:
    import pycountry

    countries = _translations("iso3166-1")
    for country in pycountry.countries:
        entity = _territory(kb, country.alpha_2)
        names = [getattr(country, field) for field in ("name", "official_name", "common_name") if hasattr(country, field)]
        _add_aliases(kb, entity, names, countries, "en")
    currencies = _translations("iso4217")
    for currency in pycountry.currencies:
        _add_aliases(kb, _entity(kb, "currency", currency.alpha_3), [currency.name], currencies, "en")
    subdivisions = _translations("iso3166-2")
    for sub in sorted(pycountry.subdivisions, key=lambda s: s.code):
        entity = _entity(kb, "subdivision", sub.code)
        kb.graph.nodes[entity]["subdivision_type"] = sub.type
        kb.add_label(entity, UNDETERMINED, sub.name, preferred=True)
        _add_aliases(kb, entity, [sub.name], subdivisions, None)
    for sub in sorted(pycountry.subdivisions, key=lambda s: s.code):
        # parent_code is a full ISO 3166-2 code ("AZ-NX"); top-level subdivisions lie in the country
        parent = f"subdivision:{sub.parent_code}" if sub.parent_code else _territory(kb, sub.country_code)
        kb.add_triple(f"subdivision:{sub.code}", "located_in", _entity(kb, "subdivision", parent.split(":", 1)[1])
                      if parent.startswith("subdivision:") else parent)
