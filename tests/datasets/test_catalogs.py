"""gettext catalogs → multi-way aligned sentences: cleaning rules by hand, the real Django
catalogs (hand-checked translations, plural forms, full accounting), .po/.mo agreement and
parity with the stdlib ``gettext`` reader, and clear errors on malformed files."""

from __future__ import annotations

import gettext
import textwrap
from pathlib import Path

import pytest

from babelzoo.offline.catalogs import (
    CatalogError,
    catalog_files,
    clean_message,
    gettext_corpus,
    normalize_locale,
    read_mo,
    read_po,
)

pytest.importorskip("babel")


@pytest.mark.parametrize("raw, clean", [
    ("Hello %(name)s, you have %d new messages", "Hello, you have new messages"),
    ("%1$s of %2$d pages", "of pages"),
    ("%(value).s billion, %.2f%%", "billion, %"),
    ("{0} items in {name}, {obj.attr!r:>10} and {}", "items in, and"),
    ("100%% sure, 50 % off", "100% sure, 50 % off"),
    ("Added “%(object)s”.", "Added."),
    ("(Hidden field %(name)s)", "(Hidden field)"),
    ("&File", "File"),
    ("E&xit", "Exit"),
    ("Save &As…", "Save As…"),
    ("R&D and AT&T stay, Q&A too", "R&D and AT&T stay, Q&A too"),
    ("Tom &amp; Jerry &lt;3", "Tom & Jerry <3"),
    ("a && b", "a & b"),
    ("ファイル(&F)", "ファイル"),
    ("Datei (_D)", "Datei"),
    ("_Open the file", "Open the file"),
    ("snake_case and __init__", "snake_case and __init__"),
    ('<b>Bold</b> and <a href="x">link</a><br/>next', "Bold and link next"),
    ("  multiple\n\twhitespace   here ", "multiple whitespace here"),
    ("%(value)s: %(error)s", ":"),
])
def test_clean_message(raw, clean):
    assert clean_message(raw) == clean


def test_clean_message_keeps_chosen_accelerators():
    assert clean_message("&File _Edit", accelerators="") == "&File _Edit"
    assert clean_message("&File _Edit", accelerators="_") == "&File Edit"


@pytest.mark.parametrize("code, tag", [
    ("pt_BR", "pt-BR"), ("zh_Hans", "zh-Hans"), ("sr_Latn", "sr-Latn"), ("sr@latin", "sr-Latn"),
    ("sr_RS@latin", "sr-Latn-RS"), ("ca@valencia", "ca-valencia"), ("de_DE.UTF-8", "de-DE"), ("es_419", "es-419"),
    ("EN", "en"), ("ar_DZ", "ar-DZ"),
])
def test_normalize_locale(code, tag):
    assert normalize_locale(code) == tag


# ---- real catalogs: Django -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def django_dir() -> Path:
    django = pytest.importorskip("django")
    return Path(django.__file__).parent


@pytest.fixture(scope="module")
def corpus(django_dir):
    return gettext_corpus(["django"])


def row(corpus, english: str) -> dict:
    found = [r for r in corpus.rows if r["en"] == english]
    assert len(found) == 1, english
    return found[0]


def test_django_hand_checked_translations(corpus):
    assert row(corpus, "Delete")["de"] == "Löschen"
    assert row(corpus, "Delete")["fr"] == "Supprimer"
    required = row(corpus, "This field is required.")
    assert required["de"] == "Dieses Feld ist zwingend erforderlich."
    assert required["ja"] == "このフィールドは必須です。"
    assert required["pt-BR"] == "Este campo é obrigatório."
    # placeholders stripped on both sides
    step = row(corpus, "Ensure this value is a multiple of step size.")
    assert step["es-AR"] == "Asegúrese de que este valor sea múltiplo de."
    assert not any("%(" in text or "{0}" in text for r in corpus.rows for text in r.values())


def test_django_languages_counts_and_views(corpus):
    langs = corpus.languages
    assert len(langs) >= 90 and {"en", "de", "pt-BR", "zh-Hans", "sr-Latn", "ar-DZ"} <= set(langs)
    counts = corpus.counts()
    assert counts["en"] == len(corpus) >= 800
    assert counts["de"] >= 700
    en_de = corpus.pairs("en", "de")
    assert len(en_de) == counts["de"] and ("Delete", "Löschen") in en_de
    de_fr = corpus.pairs("de", "fr")
    assert len(de_fr) == len(set(de_fr)) > 500
    mono = corpus.monolingual("de")
    assert len(mono) == len(set(mono)) and "Löschen" in mono
    with pytest.raises(KeyError, match="'xx' is not in this corpus"):
        corpus.pairs("en", "xx")


def test_django_accounting_is_complete(corpus):
    stats = corpus.stats
    assert stats.files >= 1000
    assert stats.entries == stats.kept + sum(stats.dropped.values())
    assert stats.kept == sum(c for lang, c in corpus.counts().items() if lang != "en")
    for lang, counter in stats.by_language.items():
        assert counter["kept"] == corpus.counts().get(lang, 0)
    assert stats.dropped["duplicate"] > 0 and stats.dropped["empty_after_cleaning"] > 0
    assert "kept" in stats.report()


def test_plural_messages_take_the_form_for_one(corpus, django_dir):
    from babel.messages.pofile import read_po as babel_read_po

    # Arabic: plural=n==0 ? 0 : n==1 ? 1 : ..., so the singular is form 1, not form 0
    path = django_dir / "conf" / "locale" / "ar" / "LC_MESSAGES" / "django.po"
    with open(path, "rb") as handle:
        catalog = babel_read_po(handle)
    checked = 0
    for message in catalog:
        if isinstance(message.id, tuple) and message.string[1]:
            one, zero = clean_message(message.string[1]), clean_message(message.string[0])
            found = [r for r in corpus.rows if r["en"] == clean_message(message.id[0])]
            if one != zero and found and found[0].get("ar") in (one, zero):
                assert found[0]["ar"] == one
                checked += 1
    assert checked >= 1


def test_mo_and_po_agree(django_dir):
    langs = ["de", "ar", "ja", "pt-BR", "es-AR"]
    from_mo = gettext_corpus(["django"], languages=langs, prefer="mo")
    from_po = gettext_corpus(["django"], languages=langs, prefer="po")
    assert from_mo.rows == from_po.rows and len(from_mo) > 700
    assert from_po.stats.dropped["untranslated"] > 0  # .po files list untranslated messages
    assert any("more translations than num_plurals" in w for w in from_po.stats.warnings)  # es_AR's header


def test_min_languages(django_dir):
    small = gettext_corpus(["django"], languages=["de", "fr", "ja"], min_languages=4)
    assert all(len(r) == 4 for r in small.rows)
    assert small.stats.dropped["below_min_languages"] > 0
    assert small.stats.entries == small.stats.kept + sum(small.stats.dropped.values())


def test_mo_reader_equals_stdlib_gettext(django_dir):
    for lang in ("de", "ar", "zh_Hans"):
        path = django_dir / "conf" / "locale" / lang / "LC_MESSAGES" / "django.mo"
        with open(path, "rb") as handle:
            reference = gettext.GNUTranslations(handle)._catalog
        ours = {}
        for e in read_mo(path).entries:
            key = e.msgid if e.context is None else f"{e.context}\x04{e.msgid}"
            if e.plural:
                ours.update({(key, i): s for i, s in enumerate(e.strings)})
            else:
                ours[key] = e.strings[0]
        reference.pop("", None)
        assert ours == reference


# ---- hand-written catalogs -----------------------------------------------------------------------

PO_HEADER = '''msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"
"Plural-Forms: nplurals=3; plural=(n==0 ? 0 : n==2 ? 1 : 2);\\n"

'''


def write_po(directory: Path, locale: str, body: str) -> Path:
    path = directory / "locale" / locale / "LC_MESSAGES" / "app.po"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(PO_HEADER + textwrap.dedent(body), encoding="utf-8")
    return path


def test_hand_written_po_rules(tmp_path):
    write_po(tmp_path, "de_AT", '''
        msgid "Open %(name)s"
        msgstr "%(name)s öffnen"

        #, fuzzy
        msgid "Close"
        msgstr "Schließen"

        msgid "Quit"
        msgstr ""

        msgid "%d file"
        msgid_plural "%d files"
        msgstr[0] "keine Datei"
        msgstr[1] "zwei Dateien"
        msgstr[2] "%d Datei"

        msgctxt "menu"
        msgid "Open {0}"
        msgstr "{0} öffnen"

        msgid "%s"
        msgstr "%s"

        #~ msgid "Old"
        #~ msgstr "Alt"
        ''')
    write_po(tmp_path, "fr", '''
        msgid "Open %(name)s"
        msgstr "Ouvrir %(name)s"

        msgid "&Quit"
        msgstr "&Quitter"
        ''')
    corpus = gettext_corpus(packages=(), paths=[tmp_path])
    assert corpus.rows == [
        {"en": "Open", "de-AT": "öffnen", "fr": "Ouvrir"},
        {"en": "Quit", "fr": "Quitter"},
        {"en": "file", "de-AT": "Datei"},  # n = 1 is form 2 under this Plural-Forms rule
    ]
    stats = corpus.stats
    assert stats.by_language["de-AT"] == {"kept": 2, "fuzzy": 1, "untranslated": 1, "duplicate": 1,
                                          "source_empty_after_cleaning": 1, "obsolete": 1}
    assert stats.entries == 9 and stats.kept == 4
    assert corpus.keys[0] == "Open %(name)s"


def test_mo_written_by_babel_reads_like_the_po(tmp_path):
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po as babel_read_po

    po = write_po(tmp_path, "de", '''
        msgid "Yes"
        msgstr "Ja"

        msgctxt "verb"
        msgid "Set"
        msgstr "Setzen"

        msgid "%d apple"
        msgid_plural "%d apples"
        msgstr[0] "keine Äpfel"
        msgstr[1] "zwei Äpfel"
        msgstr[2] "%d Apfel"
        ''')
    with open(po, "rb") as handle:
        catalog = babel_read_po(handle)
    with open(po.with_suffix(".mo"), "wb") as handle:
        write_mo(handle, catalog)
    assert catalog_files(paths=[tmp_path]) == [po.with_suffix(".mo")]
    assert catalog_files(paths=[tmp_path], prefer="po") == [po]
    mo, parsed = read_mo(po.with_suffix(".mo")), read_po(po)
    assert mo.singular_index == parsed.singular_index == 2
    as_tuples = lambda c: sorted((e.context or "", e.msgid, tuple(e.strings), e.plural) for e in c.entries)  # noqa: E731
    assert as_tuples(mo) == as_tuples(parsed)
    assert gettext_corpus((), paths=[tmp_path]).rows == gettext_corpus((), paths=[tmp_path], prefer="po").rows


@pytest.mark.parametrize("body, line, what", [
    ('msgid "Yes"\nmsgstr "Ja\n', 7, "malformed line"),
    ('msgid "Yes"\nmsgstr "Ja"\n\nthis is not gettext\n', 9, "malformed line"),
    ('msgid "Yes"\nmsgstrr "Ja"\n', 7, "malformed line"),
])
def test_malformed_po_names_file_and_line(tmp_path, body, line, what):
    path = write_po(tmp_path, "de", body)
    with pytest.raises(CatalogError, match=rf"app\.po:{line}: {what}"):
        read_po(path)
    with pytest.raises(CatalogError, match=rf"app\.po:{line}"):
        gettext_corpus((), paths=[tmp_path])


def test_invalid_utf8_and_corrupt_mo(tmp_path):
    path = write_po(tmp_path, "de", 'msgid "Yes"\nmsgstr "Ja"\n')
    path.write_bytes(path.read_bytes().replace(b"Ja", b"J\xff"))
    with pytest.raises(CatalogError, match=r"app\.po:7: invalid UTF-8"):
        read_po(path)
    bad = tmp_path / "bad.mo"
    bad.write_bytes(b"\x00" * 40)
    with pytest.raises(CatalogError, match=r"bad\.mo: not a \.mo file"):
        read_mo(bad)
    good = read_mo_bytes(tmp_path)
    (tmp_path / "cut.mo").write_bytes(good[: len(good) - 10])
    with pytest.raises(CatalogError, match=r"cut\.mo: byte \d+: string .* runs past the end"):
        read_mo(tmp_path / "cut.mo")


def read_mo_bytes(tmp_path: Path) -> bytes:
    from babel.messages.catalog import Catalog
    from babel.messages.mofile import write_mo

    catalog = Catalog(locale="de")
    catalog.add("Yes", "Ja")
    path = tmp_path / "ok.mo"
    with open(path, "wb") as handle:
        write_mo(handle, catalog)
    return path.read_bytes()


def test_unknown_package_is_a_clear_error():
    with pytest.raises(CatalogError, match="package 'no_such_package_xyz' is not installed"):
        gettext_corpus(["no_such_package_xyz"])
