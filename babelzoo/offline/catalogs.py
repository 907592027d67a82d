"""Multi-way parallel text from gettext catalogs shipped inside installed packages.

Software translated with gettext ships, for every language, a catalog that maps each English
source string (``msgid``) to its human translation (``msgstr``). Joining the catalogs of one
package on the ``msgid`` gives real, multi-way aligned sentences in dozens of languages (Django:
~100 locales). :func:`gettext_corpus` reads them (``.mo`` with its own parser, ``.po`` with
babel) into a :class:`MultiwayCorpus`:

- English comes from the ``msgid``; a plural message contributes its singular, and the
  translation form that the catalog's ``Plural-Forms`` rule picks for n = 1.
- Text is cleaned by :func:`clean_message`: placeholders (``%(name)s``, ``%s``, ``%1$d``,
  ``{0}``, ``{name}``), menu accelerators (``&File``, ``E&xit``, ``_File``, ``(&F)``), markup
  tags and HTML entities are removed, quote or bracket pairs left empty go too, and whitespace
  is collapsed; Unicode is NFC.
- Rows are keyed by the cleaned English text, so messages that differ only in placeholders or
  context merge; a second, different translation of a merged row is dropped as a conflict (the
  first file in path order wins).
- Locale codes become BCP 47 tags: ``pt_BR`` → ``pt-BR``, ``zh_Hans`` → ``zh-Hans``,
  ``sr@latin`` → ``sr-Latn``, ``ca@valencia`` → ``ca-valencia`` (:func:`normalize_locale`).

Nothing is dropped silently: every translation read is either kept or counted under a reason in
``corpus.stats`` (``fuzzy``, ``obsolete``, ``untranslated``, ``source_locale``,
``empty_after_cleaning``, ``source_empty_after_cleaning``, ``duplicate``, ``conflict``,
``below_min_languages``), overall and per language, and ``entries == kept + sum(dropped)``.
``.mo`` files carry no fuzzy entries (``msgfmt`` leaves them out), so only ``.po`` files can
report them. A malformed ``.po`` line or a corrupt ``.mo`` file is a :class:`CatalogError` naming
the file and line (or byte offset); the readers live in :mod:`~babelzoo.offline.gettext_files`.

    >>> corpus = gettext_corpus(["django"])
    >>> corpus.pairs("en", "de")[:1]
    [('...', '...')]
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Sequence, Union

from ..registry import RegistryError
from .gettext_files import Catalog, CatalogError, Entry, catalog_files, locale_of, read_mo, read_po

__all__ = ["CatalogError", "CatalogStats", "MultiwayCorpus", "catalog_files", "clean_message", "gettext_corpus",
           "normalize_locale", "read_mo", "read_po"]


class UnknownLanguage(RegistryError):
    """A language the corpus holds no sentences of (a ``KeyError``, as a missing key)."""


REASONS = ("fuzzy", "obsolete", "untranslated", "source_locale", "missing_plural_form", "empty_after_cleaning",
           "source_empty_after_cleaning", "duplicate", "conflict", "below_min_languages")


# ---- cleaning --------------------------------------------------------------------------------------

_PRINTF = re.compile(r"%%|%(?:\d+\$)?(?:\([^()]*\))?[#0+-]*(?:\d+|\*)?(?:\.(?:\d*|\*))?[hlL]?[diouxXeEfFgGcrsa]")
_BRACES = re.compile(r"\{[A-Za-z0-9_]*(?:[.\[][^{}\s]*)?(?:![rsa])?(?::[^{}]*)?\}")
_TAG = re.compile(r"</?([A-Za-z][A-Za-z0-9:-]*)(?:\s[^<>]*)?/?>")
_BLOCK_TAGS = {"br", "p", "div", "li", "ul", "ol", "tr", "td", "th", "table", "h1", "h2", "h3", "h4", "h5", "h6"}
_ENTITY = re.compile(r"&(?:#\d+|#x[0-9A-Fa-f]+|[A-Za-z]+\d*);")
_BRACKETED_ACCELERATOR = re.compile(r"\s*\((?:&|_)[^\W_]\)")  # "ファイル(&F)", "Datei (_D)"
_AMPERSAND = re.compile(r"&(?=[^\W_])")
_UNDERSCORE = re.compile(r"(?<!\w)_(?=[^\W_])")
_EMPTY_PAIR = re.compile(r"“\s*”|\"\s*\"|'\s*'|‘\s*’|«\s*»|„\s*[“”]|「\s*」|『\s*』|\(\s*\)|\[\s*\]")
_SPACE_BEFORE = re.compile(r"\s+([.,)\]])")
_SPACE_AFTER = re.compile(r"([(\[])\s+")
_WHITESPACE = re.compile(r"\s+")


def _strip_ampersands(text: str) -> str:
    """Remove ``&`` accelerators but keep ampersands that are text: an ``&`` is an accelerator
    at the start of a word (``&File``) or before a lower-case letter inside one (``E&xit``),
    and not one between capitals (``R&D``, ``AT&T``) or in an entity (``&amp;``)."""
    out, last = [], 0
    for m in _AMPERSAND.finditer(text):
        i = m.start()
        if _ENTITY.match(text, i) or (i and text[i - 1] == "&"):
            continue
        before = text[i - 1] if i else " "
        if not before.isalnum() or text[i + 1].islower():
            out.append(text[last:i])
            last = i + 1
    out.append(text[last:])
    return "".join(out)


def clean_message(text: str, accelerators: str = "&_") -> str:
    """Strip placeholders, accelerators, markup and entities; collapse whitespace (see the
    module docstring). ``accelerators`` names the mnemonic characters to remove."""
    text = unicodedata.normalize("NFC", text)
    if "%" in text:
        text = _PRINTF.sub(lambda m: "%" if m.group() == "%%" else "", text)
    if "{" in text:
        text = _BRACES.sub("", text)
    if "<" in text:
        text = _TAG.sub(lambda m: " " if m.group(1).lower() in _BLOCK_TAGS else "", text)
    if accelerators and "(" in text:
        text = _BRACKETED_ACCELERATOR.sub("", text)
    if "&" in text:
        if "&" in accelerators:
            text = _strip_ampersands(text).replace("&&", "&")
        if _ENTITY.search(text):
            text = html.unescape(text)
    if "_" in accelerators and "_" in text:
        text = _UNDERSCORE.sub("", text)
    text = _WHITESPACE.sub(" ", text)
    text = _EMPTY_PAIR.sub("", text)
    text = _SPACE_AFTER.sub(r"\1", _SPACE_BEFORE.sub(r"\1", text))
    return _WHITESPACE.sub(" ", text).strip()


def normalize_locale(code: str) -> str:
    """A gettext locale name as a BCP 47 tag: language lower-case, script title-case, region
    upper-case, joined by ``-``; ``@latin``/``@cyrillic`` become scripts, other modifiers
    variants; an encoding suffix (``.UTF-8``) is dropped."""
    code = code.split(".")[0]
    code, _, modifier = code.partition("@")
    parts = [p for p in re.split(r"[-_]", code) if p]
    if not parts:
        raise CatalogError(f"empty locale code {code!r}")
    lang, scripts, regions, variants = parts[0].lower(), [], [], []
    for p in parts[1:]:
        if len(p) == 4 and p.isalpha():
            scripts.append(p.title())
        elif (len(p) == 2 and p.isalpha()) or (len(p) == 3 and p.isdigit()):
            regions.append(p.upper())
        else:
            variants.append(p.lower())
    if modifier:
        script = {"latin": "Latn", "cyrillic": "Cyrl", "devanagari": "Deva", "arabic": "Arab"}.get(modifier.lower())
        (scripts if script else variants).append(script or modifier.lower())
    return "-".join([lang, *scripts, *regions, *variants])


# ---- the multi-way corpus --------------------------------------------------------------------------

@dataclass
class CatalogStats:
    """What happened to every translation read: ``entries == kept + sum(dropped.values())``."""

    files: int = 0
    entries: int = 0
    kept: int = 0
    dropped: Counter = field(default_factory=Counter)
    by_language: dict = field(default_factory=dict)  # lang -> Counter(kept=..., <reason>=...)
    warnings: list = field(default_factory=list)  # "file:line: message" for inconsistent catalogs

    def count(self, lang: str, reason: str, n: int = 1) -> None:
        lang_counter = self.by_language.setdefault(lang, Counter())
        lang_counter[reason] += n
        if reason == "kept":
            self.kept += n
        else:
            self.dropped[reason] += n

    def report(self) -> str:
        lines = [f"{self.files} files, {self.entries} translations: {self.kept} kept"]
        lines += [f"  dropped {self.dropped[reason]:>6} {reason}" for reason in REASONS if self.dropped[reason]]
        lines += [f"  warning {w}" for w in self.warnings]
        return "\n".join(lines)


@dataclass
class MultiwayCorpus:
    """Rows of aligned sentences, each a ``{language: text}`` dict that always holds the source
    language; ``keys[i]`` is the first original ``msgid`` behind row ``i``."""

    rows: list[dict[str, str]]
    keys: list[str]
    source_lang: str
    stats: CatalogStats

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def languages(self) -> list[str]:
        return sorted({lang for row in self.rows for lang in row})

    def counts(self) -> dict[str, int]:
        """Sentences per language."""
        return dict(sorted(Counter(lang for row in self.rows for lang in row).items()))

    def pairs(self, src: str, tgt: str) -> list[tuple[str, str]]:
        """``(src, tgt)`` sentence pairs from rows that hold both languages; a pair repeated by
        two rows is returned once."""
        self._check(src)
        self._check(tgt)
        return list(dict.fromkeys((row[src], row[tgt]) for row in self.rows if src in row and tgt in row))

    def monolingual(self, lang: str) -> list[str]:
        """The distinct sentences of one language, in row order."""
        self._check(lang)
        return list(dict.fromkeys(row[lang] for row in self.rows if lang in row))

    def _check(self, lang: str) -> None:
        if lang not in self.counts():
            raise UnknownLanguage(f"language {lang!r} is not in this corpus (languages: {', '.join(self.languages)})")


def gettext_corpus(packages: Sequence[str] = ("django",), min_languages: int = 2, source_lang: str = "en",
                   paths: Iterable[Union[str, Path]] = (), languages: Optional[Iterable[str]] = None,
                   prefer: str = "mo", accelerators: str = "&_") -> MultiwayCorpus:
    """Read the gettext catalogs of installed ``packages`` (and files or folders in ``paths``)
    into a multi-way corpus; see the module docstring for what is cleaned, merged and dropped.

    ``min_languages`` counts the source language: 2 keeps every row with one translation.
    ``languages`` (BCP 47 tags, as :func:`normalize_locale` writes them) limits the catalogs read.
    """
    if isinstance(packages, str):
        packages = (packages,)
    wanted = set(languages) if languages is not None else None
    stats = CatalogStats()
    rows: dict[str, dict[str, str]] = {}
    keys: dict[str, str] = {}
    for path in catalog_files(packages, paths, prefer):
        lang = normalize_locale(locale_of(path))
        if wanted is not None and lang not in wanted:
            continue
        catalog = read_mo(path) if path.suffix == ".mo" else read_po(path)
        stats.files += 1
        stats.warnings.extend(catalog.warnings)
        # msgid order (as in a .mo table), so that which of two clashing messages wins does not
        # depend on the file format
        for entry in sorted(catalog.entries, key=lambda e: (e.msgid, e.context or "", e.obsolete)):
            stats.entries += 1
            reason = _add(entry, catalog, lang, source_lang, rows, keys, accelerators)
            stats.count(lang, reason)
    kept_rows = []
    for english, row in sorted(rows.items()):
        if len(row) + 1 < min_languages:
            for lang in row:
                stats.count(lang, "below_min_languages")
                stats.by_language[lang]["kept"] -= 1
                stats.kept -= 1
            continue
        kept_rows.append((english, row))
    return MultiwayCorpus(rows=[{source_lang: english, **dict(sorted(row.items()))} for english, row in kept_rows],
                          keys=[keys[english] for english, _ in kept_rows], source_lang=source_lang, stats=stats)


@functools.lru_cache(maxsize=1 << 16)
def _clean_source(msgid: str, accelerators: str) -> str:
    return clean_message(msgid, accelerators)  # the same msgid recurs in every language


def _add(entry: Entry, catalog: Catalog, lang: str, source_lang: str, rows: dict, keys: dict,
         accelerators: str) -> str:
    """Put one translation into ``rows``; return "kept" or the reason it was dropped."""
    if entry.obsolete:
        return "obsolete"
    if entry.fuzzy:
        return "fuzzy"
    index = catalog.singular_index if entry.plural else 0
    if index >= len(entry.strings):
        return "missing_plural_form"
    target = entry.strings[index]
    if not target.strip():
        return "untranslated"
    if lang == source_lang:
        return "source_locale"  # the source text comes from the msgid
    english = _clean_source(entry.msgid, accelerators)
    if not any(ch.isalpha() for ch in english):
        return "source_empty_after_cleaning"
    text = clean_message(target, accelerators)
    if not any(ch.isalpha() for ch in text):
        return "empty_after_cleaning"
    row = rows.setdefault(english, {})
    keys.setdefault(english, entry.msgid)
    if lang not in row:
        row[lang] = text
        return "kept"
    return "duplicate" if row[lang] == text else "conflict"
