"""The files of triples and of names that :class:`~babelzoo.knowledge.graph.GraphKB` reads.

Formats (UTF-8; blank lines are skipped, and so are comments: lines whose first character is
``#``). A ``#`` line that has the fields of a data line with ``#`` glued to its first id
(``#tag<TAB>P1<TAB>Q2``) is ambiguous and refused by line: write ``# `` (hash, space) to comment
a line out; an id that starts with ``#`` is written in a JSONL file (or not first on a TSV line).

- **Triples, TSV**: ``head<TAB>relation<TAB>tail``, exactly three non-empty fields a line.
- **Triples, JSONL**: one ``{"head": h, "relation": r, "tail": t}`` object (or ``[h, r, t]``
  list) a line.
- **Entity names, TSV** (``entities.tsv``): ``id<TAB>lang<TAB>label[<TAB>alias...]``: the label
  is the preferred name in ``lang``, further fields are aliases. Several lines may name the same
  entity (more languages, more aliases).
- **Entity names, JSONL** (``entities.jsonl``), Wikidata-like: ``{"id": "Q17", "type": "country",
  "labels": {"en": "Japan"}, "aliases": {"en": ["Nippon"]}}``; a label may also be written
  ``{"value": "Japan"}`` as in Wikidata dumps.
- **Relation names**: the same two formats in ``relations.tsv`` / ``relations.jsonl``.

Unknown-entity policy: when an entities file declares the entities, a triple naming any other
entity is an error (``file:line``) unless ``on_unknown="add"``, which adds it without names;
with no entities file the triples define the entities. The same holds for relations.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional

from .._files import refuse_utf16
from .base import KBError, Triple

if TYPE_CHECKING:
    from .graph import GraphKB


def _lines(path: Path, fields: int = 0, what: str = "", whitespace: bool = False) -> Iterator[tuple[int, str]]:
    """(line number, text) of the non-blank, non-comment lines of a UTF-8 text file (a leading
    byte-order mark is not part of the first line). A comment starts with ``#`` as its first
    character; one whose ``#`` is glued to the first of ``fields`` fields (tab-separated, or
    whitespace-separated with ``whitespace``) could be a line of ``what`` whose id starts with
    ``#``, and is refused rather than dropped."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if number == 1:
                refuse_utf16(path, raw, KBError)
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as err:
                raise KBError(f"{path}:{number}: not UTF-8 text (byte {err.start + 1} of the line: "
                              f"{raw[err.start:err.start + 1]!r})") from None
            text = line.rstrip("\r\n")
            if not text.strip():
                continue
            if text.startswith("#"):
                _check_comment(path, number, text, fields, what, whitespace)
                continue
            yield number, text


def _check_comment(path: Path, number: int, text: str, fields: int, what: str, whitespace: bool) -> None:
    if fields < 2 or _is_jsonl(path) or text[1:2].isspace() or text[1:2] in ("", "#"):
        return
    parts = text.split() if whitespace and "\t" not in text else text.split("\t")
    if len(parts) < fields:
        return
    jsonl = "" if whitespace else "; an id that starts with '#' goes in a JSONL file"
    raise KBError(f"{path}:{number}: a line starting with '#' is a comment, but this one has the {len(parts)} "
                  f"fields of {what}, so {parts[0].strip()!r} may be an id: write '# ' (hash, space) to comment a "
                  f"line out{jsonl}")


def _is_jsonl(path: Path) -> bool:
    return path.suffix in (".jsonl", ".json")


def _json_line(path: Path, number: int, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise KBError(f"{path}:{number}: invalid JSON ({err.msg})") from None


def read_triples(path: str | Path, kb: Optional[GraphKB] = None, entities: Optional[set[str]] = None,
                 relations: Optional[set[str]] = None, on_unknown: str = "error",
                 declared_in: Optional[dict[str, str]] = None) -> list[Triple]:
    """Parse a TSV or JSONL triples file (format in the module docstring). With ``entities`` /
    ``relations`` given (the declared sets), an undeclared id raises unless ``on_unknown="add"``;
    ``declared_in`` names the file that declares each kind (``{"entity": "entity2text.txt"}``)
    for the error."""
    if on_unknown not in ("error", "add"):
        raise KBError(f"on_unknown={on_unknown!r} must be 'error' or 'add'")
    path = Path(path)
    out: list[Triple] = []
    for number, text in _lines(path, 3, "a triple (head, relation, tail)"):
        if _is_jsonl(path):
            item = _json_line(path, number, text)
            if isinstance(item, dict):
                missing = [k for k in ("head", "relation", "tail") if k not in item]
                if missing:
                    raise KBError(f"{path}:{number}: triple object lacks {', '.join(missing)}")
                fields = [item["head"], item["relation"], item["tail"]]
            elif isinstance(item, list):
                fields = item
            else:
                raise KBError(f"{path}:{number}: expected a JSON object or list, got {type(item).__name__}")
        else:
            fields = text.split("\t")
        if len(fields) != 3:
            raise KBError(f"{path}:{number}: expected 3 fields (head, relation, tail), got {len(fields)}: {text!r}")
        fields = [f.strip() if isinstance(f, str) else f for f in fields]
        for value, what in zip(fields, ("head", "relation", "tail")):
            if not isinstance(value, str) or not value:
                raise KBError(f"{path}:{number}: empty or non-string {what} id {value!r}")
        head, relation, tail = fields
        for value, declared, what in ((head, entities, "entity"), (tail, entities, "entity"),
                                      (relation, relations, "relation")):
            if declared is not None and value not in declared:
                if on_unknown == "error" and declared_in:
                    raise KBError(f"{path}:{number}: unknown {what} {value!r}: it has no line in "
                                  f"{declared_in[what]}")
                if on_unknown == "error":
                    raise KBError(f"{path}:{number}: unknown {what} {value!r} (not declared in the {what} "
                                  f"names file); declare it or pass on_unknown='add'")
                declared.add(value)
        out.append(Triple(head, relation, tail))
    return out


def read_names(path: str | Path, kb: GraphKB, kind: str = "entity") -> set[str]:
    """Read an entity (``kind="entity"``) or relation names file into ``kb``; returns the ids it
    declares."""
    path = Path(path)
    add = kb.add_label if kind == "entity" else kb.add_relation_label
    declared: set[str] = set()
    for number, text in _lines(path, 3, f"an {kind} name line (id, lang, label)" if kind == "entity"
                               else f"a {kind} name line (id, lang, label)"):
        if _is_jsonl(path):
            item = _json_line(path, number, text)
            if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not item["id"].strip():
                raise KBError(f"{path}:{number}: expected an object with a non-empty string 'id'")
            unknown = sorted(set(item) - set(NAME_KEYS[kind]))
            if unknown:
                raise KBError(f"{path}:{number}: unknown key(s) {unknown}; {'an' if kind == 'entity' else 'a'} {kind} line takes "
                              f"{', '.join(NAME_KEYS[kind])}")
            ident = item["id"].strip()
            if kind == "entity":
                kind_of = item.get("type")
                if kind_of is not None and (not isinstance(kind_of, str) or not kind_of.strip()):
                    raise KBError(f"{path}:{number}: 'type' must be a non-empty string, got {kind_of!r}")
                kb.add_entity(ident, kind_of)
            else:
                kb.add_relation(ident)
            for lang, value in _mapping(item, "labels", path, number).items():
                add(ident, lang, _name_value(value, path, number), preferred=True)
            for lang, values in _mapping(item, "aliases", path, number).items():
                for value in values if isinstance(values, list) else [values]:
                    add(ident, lang, _name_value(value, path, number))
        else:
            fields = [f.strip() for f in text.split("\t")]
            if len(fields) < 3:
                raise KBError(f"{path}:{number}: expected at least 3 fields (id, lang, label[, alias...]), "
                              f"got {len(fields)}: {text!r}")
            ident, lang, *names = fields
            for value, what in ((ident, "id"), (lang, "language"), (names[0], "label")):
                if not value:
                    raise KBError(f"{path}:{number}: empty {what}")
            for i, name in enumerate(names):
                if not name:
                    raise KBError(f"{path}:{number}: empty alias in field {i + 3}")
                add(ident, lang, name, preferred=i == 0)
        declared.add(ident)
    return declared


NAME_KEYS = {"entity": ("id", "type", "labels", "aliases"), "relation": ("id", "labels", "aliases")}


def _mapping(item: dict, key: str, path: Path, number: int) -> dict:
    value = item.get(key) or {}
    if not isinstance(value, dict):
        raise KBError(f"{path}:{number}: '{key}' must map language codes to names, got {type(value).__name__}")
    return value


def _name_value(value: Any, path: Path, number: int) -> str:
    if isinstance(value, dict):
        value = value.get("value")
    if not isinstance(value, str) or not value.strip():
        raise KBError(f"{path}:{number}: a name must be a non-empty string, got {value!r}")
    return value
