"""Reading gettext catalogs: GNU ``.mo`` files with an own parser (either byte order), ``.po``
files with babel after a line-by-line syntax check, and finding the catalogs an installed
package ships. Errors name the file and line (``.po``) or byte offset (``.mo``)."""

from __future__ import annotations

import gettext
import importlib.metadata
import importlib.util
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Union

from ..errors import BabelzooError, ConfigError

SUFFIXES = (".mo", ".po")


class CatalogError(BabelzooError, ValueError):
    """A catalog that cannot be read: the message names the file and line or offset."""


@dataclass
class Entry:
    """One catalog message. ``strings`` holds every plural form (one for a plain message)."""

    msgid: str
    strings: list[str]
    context: Optional[str] = None
    plural: bool = False
    fuzzy: bool = False
    obsolete: bool = False
    where: str = ""
    source_file: Optional[str] = None  # the first source file a .po reference (``#: file:line``) names


@dataclass
class Catalog:
    path: Path
    locale: str
    entries: list[Entry]
    singular_index: int  # the plural form used for n = 1
    warnings: list[str] = field(default_factory=list)


def _plural_index(plural_forms: Optional[str], where: str) -> int:
    if not plural_forms:
        return 0
    m = re.search(r"plural\s*=\s*([^;]+)", plural_forms)
    if not m:
        return 0
    try:
        return int(gettext.c2py(m.group(1).strip())(1))
    except (ValueError, SyntaxError, RecursionError) as err:
        raise CatalogError(f"{where}: invalid Plural-Forms expression {m.group(1)!r} ({err})") from None


def _header(text: str) -> dict[str, str]:
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip().lower()] = value.strip()
    return fields


def read_mo(path: Union[str, Path]) -> Catalog:
    """Parse a GNU ``.mo`` file (either byte order). Errors name the file and byte offset."""
    path = Path(path)
    data = path.read_bytes()
    if len(data) < 20:
        raise CatalogError(f"{path}: truncated .mo file ({len(data)} bytes)")
    magic = struct.unpack("<I", data[:4])[0]
    if magic == 0x950412DE:
        order = "<"
    elif magic == 0xDE120495:
        order = ">"
    else:
        raise CatalogError(f"{path}: not a .mo file (bad magic number 0x{magic:08x})")
    revision, count, ids_at, strs_at = struct.unpack(order + "4I", data[4:20])
    if revision >> 16 not in (0, 1):
        raise CatalogError(f"{path}: unsupported .mo revision {revision >> 16}")

    def string(table: int, i: int) -> bytes:
        at = table + 8 * i
        if at + 8 > len(data):
            raise CatalogError(f"{path}: byte {at}: string table runs past the end of the file")
        length, offset = struct.unpack_from(order + "2I", data, at)
        if offset + length > len(data):
            raise CatalogError(f"{path}: byte {at}: string of {length} bytes at {offset} runs past the end")
        return data[offset:offset + length]

    raw = [(string(ids_at, i), string(strs_at, i)) for i in range(count)]
    header = next((_header(s.decode("utf-8", "replace")) for k, s in raw if k == b""), {})
    charset_match = re.search(r"charset=([\w.-]+)", header.get("content-type", ""))
    charset = charset_match.group(1) if charset_match and charset_match.group(1).upper() != "CHARSET" else "utf-8"
    entries = []
    for i, (key, value) in enumerate(raw):
        if key == b"":
            continue
        where = f"{path}: entry {i}"
        try:
            key_text, value_text = key.decode(charset), value.decode(charset)
        except (UnicodeDecodeError, LookupError) as err:
            raise CatalogError(f"{where}: cannot decode as {charset} ({err})") from None
        context, _, key_text = key_text.rpartition("\x04")
        msgid, plural_sep, _ = key_text.partition("\x00")
        entries.append(Entry(msgid, value_text.split("\x00"), context or None, bool(plural_sep), where=where))
    index = _plural_index(header.get("plural-forms"), str(path))
    return Catalog(path, locale_of(path), entries, index)


_PO_LINE = re.compile(r'(?:(?:msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?)\s+)?"(?:[^"\\]|\\.)*"')


def read_po(path: Union[str, Path]) -> Catalog:
    """Parse a ``.po`` file with babel, after checking every line's syntax so that a malformed
    line is an error naming ``file:line`` (babel alone would guess or only print a warning).
    Babel's remarks on well-formed but inconsistent catalogs (more plural forms than the header
    declares) land in ``Catalog.warnings``."""
    from babel.messages.catalog import Catalog as BabelCatalog
    from babel.messages.pofile import PoFileParser

    path = Path(path)
    data = path.read_bytes()
    charset_match = re.search(rb"charset=([\w.-]+)", data)
    charset = charset_match.group(1).decode("ascii") if charset_match else "utf-8"
    if charset.upper() == "CHARSET":
        charset = "utf-8"
    try:
        text = data.decode(charset)
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise CatalogError(f"{path}:{line}: invalid {charset}") from None
    except LookupError:
        raise CatalogError(f"{path}: unknown charset {charset!r}") from None
    lines = text.splitlines(keepends=True)
    for number, line in enumerate(lines, 1):
        s = line.strip()
        if s.startswith("#~"):
            s = s[2:].strip()
            if s.startswith("|"):
                continue
        elif s.startswith("#"):
            continue
        if s and not _PO_LINE.fullmatch(s):
            raise CatalogError(f"{path}:{number}: malformed line {line.rstrip()!r}")

    warnings: list[str] = []

    class Parser(PoFileParser):
        def _invalid_pofile(self, line, lineno, msg) -> None:  # babel would print it
            warnings.append(f"{path}:{lineno + 1}: {msg}")

    catalog = BabelCatalog(charset=charset)
    Parser(catalog, ignore_obsolete=False, abort_invalid=False).parse(lines)
    entries = []
    for message, obsolete in [(m, False) for m in catalog] + [(m, True) for m in catalog.obsolete.values()]:
        if not message.id:
            continue
        plural = isinstance(message.id, (tuple, list))
        strings = list(message.string) if isinstance(message.string, (tuple, list)) else [message.string or ""]
        entries.append(Entry(message.id[0] if plural else message.id, [s or "" for s in strings], message.context,
                             plural, message.fuzzy, obsolete, where=f"{path}:{message.lineno}",
                             source_file=message.locations[0][0] if message.locations else None))
    plural_forms = catalog.mime_headers and dict(catalog.mime_headers).get("Plural-Forms")
    index = _plural_index(plural_forms or None, str(path))
    return Catalog(path, locale_of(path), entries, index, warnings)


def locale_of(path: Path) -> str:
    # <...>/locale/<locale>/LC_MESSAGES/<domain>.mo; a file outside that layout names its locale itself
    return path.parent.parent.name if path.parent.name == "LC_MESSAGES" else path.stem


def catalog_files(packages: Iterable[str] = (), paths: Iterable[Union[str, Path]] = (),
                  prefer: str = "mo") -> list[Path]:
    """Catalog files of installed ``packages`` (found through their installed file lists, so
    data files outside the import package count too) and under ``paths``, one file per catalog:
    the ``.mo`` when both it and the ``.po`` exist (``prefer="po"`` picks the ``.po``)."""
    if prefer not in ("mo", "po"):
        raise ConfigError(f"prefer must be 'mo' or 'po', got {prefer!r}")
    found: list[Path] = []
    for name in packages:
        found.extend(_package_catalogs(name))
    for p in map(Path, paths):
        if p.is_file():
            found.append(p)
        elif p.is_dir():
            found.extend(f for f in p.rglob("*") if f.suffix in SUFFIXES and f.parent.name == "LC_MESSAGES")
        else:
            raise FileNotFoundError(f"{p}: no such file or directory")
    by_catalog: dict[Path, dict[str, Path]] = {}
    for f in found:
        by_catalog.setdefault(f.with_suffix(""), {})[f.suffix] = f
    order = (".mo", ".po") if prefer == "mo" else (".po", ".mo")
    return sorted(next(v[s] for s in order if s in v) for v in by_catalog.values())


def _package_catalogs(name: str) -> list[Path]:
    def is_catalog(path: str) -> bool:
        parts = path.replace("\\", "/").split("/")
        return len(parts) >= 2 and parts[-2] == "LC_MESSAGES" and parts[-1].endswith(SUFFIXES)

    try:
        files = importlib.metadata.files(name) or []
        return [Path(f.locate()) for f in files if is_catalog(str(f)) and Path(f.locate()).is_file()]
    except importlib.metadata.PackageNotFoundError:
        pass
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise CatalogError(f"package {name!r} is not installed (pip install {name})")
    return [f for root in spec.submodule_search_locations for f in Path(root).rglob("*")
            if f.suffix in SUFFIXES and is_catalog(str(f))]
