"""Multilingual entity linking by alias matching.

Every alias of a knowledge base and every input text are normalised the same way: Unicode
compatibility decomposition (NFKD), case folding, typographic quotes and dashes mapped to ASCII,
whitespace collapsed, and spaces between characters of scripts written without spaces (Han,
kana, Thai, Lao, Khmer, Myanmar, Tibetan) removed, so that ``東京 都`` (tokenised) matches
``東京都``. A match must start and end on a word boundary, except inside those scripts, where any
character boundary is one. Overlapping matches are resolved longest first (then leftmost). A name
shared by several entities keeps all of them as ranked candidates (``prior``: by default the
entity's degree in the knowledge base).

    linker = EntityLinker.from_kb(load_kb("cldr"))
    linker.link_text("Le Japon utilise le yen.", lang="fr")
    # [Mention(start=3, end=8, text='Japon', entity='territory:JP', ...),
    #  Mention(start=20, end=23, text='yen', entity='currency:JPY', ...)]
    linker.link_tokens(["日本", "の", "首都", "は", "東京", "です"], lang="ja")   # token offsets

With ``lang`` given, only names in that language (and language-neutral ones) are matched: the
French "or" (gold) is not linked in English text.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence

from ..errors import InputError

_PUNCT = str.maketrans({"\u2018": "'", "\u2019": "'", "\u02bc": "'", "\u201c": '"', "\u201d": '"',
                        "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-"})
_NO_SPACE_RANGES = ((0x0E00, 0x0EFF), (0x0F00, 0x0FFF), (0x1000, 0x109F), (0x1780, 0x17FF), (0x3040, 0x30FF),
                    (0x31F0, 0x31FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2FFFF))


def no_space_script(char: str) -> bool:
    """True for characters of scripts written without spaces between words."""
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in _NO_SPACE_RANGES)


def _wordlike(char: str) -> bool:
    return char.isalnum() or unicodedata.category(char).startswith("M")


_CHAR_CACHE: dict[tuple[str, bool], str] = {}


def _norm_char(char: str, strip_accents: bool) -> str:
    key = (char, strip_accents)
    out = _CHAR_CACHE.get(key)
    if out is None:
        out = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", char).casefold()).translate(_PUNCT)
        if strip_accents:
            out = "".join(c for c in out if unicodedata.category(c) != "Mn")
        out = " " if out.isspace() else out
        _CHAR_CACHE[key] = out
    return out


def normalize(text: str, strip_accents: bool = False) -> tuple[str, list[int], list[int]]:
    """Normalise ``text`` for matching. Returns the normalised string and, for each of its
    characters, the [start, end) span of the original character it came from."""
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for index, char in enumerate(text):
        for out in _norm_char(char, strip_accents):
            if out == " " and (not chars or chars[-1] == " "):
                continue
            chars.append(out)
            starts.append(index)
            ends.append(index + 1)
    # drop spaces between two characters of no-space scripts, and a trailing space
    keep = [not (c == " " and (i + 1 == len(chars) or (i > 0 and no_space_script(chars[i - 1])
                                                        and no_space_script(chars[i + 1]))))
            for i, c in enumerate(chars)]
    return ("".join(c for c, k in zip(chars, keep) if k), [s for s, k in zip(starts, keep) if k],
            [e for e, k in zip(ends, keep) if k])


_NO_SPACE_CLASS = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _NO_SPACE_RANGES)
_INNER_SPACE = re.compile(f"(?<=[{_NO_SPACE_CLASS}]) (?=[{_NO_SPACE_CLASS}])")


def normalize_alias(alias: str, strip_accents: bool = False) -> str:
    """The normalised form of a name: what :func:`normalize` gives, without offsets (faster;
    casefolding and NFKD act character by character, so both agree)."""
    out = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", alias).casefold()).translate(_PUNCT)
    if strip_accents:
        out = "".join(c for c in out if unicodedata.category(c) != "Mn")
    out = " ".join(out.split())
    return _INNER_SPACE.sub("", out) if " " in out else out


@dataclass(frozen=True)
class Mention:
    """A linked span: ``start``/``end`` are character offsets for text input and token offsets
    for token input (end exclusive); ``entity`` is the best candidate, ``candidates`` all of
    them, best first."""

    start: int
    end: int
    text: str
    entity: str
    candidates: tuple[str, ...]


def base_language(lang: str) -> str:
    """``zh_Hant`` / ``pt-BR`` → ``zh`` / ``pt``: names match by base language."""
    return lang.replace("-", "_").split("_")[0].lower()


ANY_LANGUAGE = "und"


class EntityLinker:
    """Longest-match alias linker over names → candidate entities, optionally per language."""

    def __init__(self, aliases: Mapping[str, Sequence[str]] | Mapping[str, Mapping[str, Sequence[str]]],
                 prior: Optional[Mapping[str, float]] = None, min_chars: int = 2, stopwords: Iterable[str] = (),
                 strip_accents: bool = False):
        """``aliases``: name → entities (valid in any language), or language → name → entities
        (names under ``"und"`` are valid in any language; written capitalised there, they are
        proper names and do not match a lower-case word). ``prior``: entity → score ranking the
        candidates of an ambiguous name (ties keep first appearance). ``min_chars``: shorter
        names are ignored, except in no-space scripts where one character can be a word (円).
        ``stopwords``: names never linked."""
        self.strip_accents = strip_accents
        self.prior = dict(prior or {})
        per_language = next(iter(aliases.values()), None)
        flat = not isinstance(per_language, Mapping)
        if flat:
            aliases = {ANY_LANGUAGE: aliases}  # type: ignore[dict-item]
        blocked = {normalize_alias(w, strip_accents) for w in stopwords}
        keys: dict[str, str] = {}
        table: dict[str, dict[str, Optional[set[str]]]] = {}
        lowercase_ok: set[tuple[str, str]] = set()  # (key, entity) with a language-neutral name not capitalised
        for lang, names in aliases.items():  # type: ignore[union-attr]
            code = None if lang in (None, ANY_LANGUAGE) else base_language(lang)
            for alias, entities in names.items():
                key = keys.get(alias)
                if key is None:
                    key = keys[alias] = normalize_alias(alias, strip_accents)
                if not key or key in blocked or (len(key) < min_chars and not all(map(no_space_script, key))):
                    continue
                slot = table.setdefault(key, {})
                for entity in entities:
                    if code is None:
                        slot[entity] = None
                        if flat or not alias[:1].isupper():
                            lowercase_ok.add((key, entity))
                    elif entity not in slot:
                        slot[entity] = {code}
                    elif slot[entity] is not None:
                        slot[entity].add(code)
        # key -> ((entity, languages: frozenset, or None for a language-neutral proper name,
        # or "" for a language-neutral name that may also be written in lower case), ...)
        self.table = {key: tuple((e, frozenset(langs) if langs is not None else "" if (key, e) in lowercase_ok else None)
                                 for e, langs in sorted(slot.items(), key=lambda item: -self.prior.get(item[0], 0.0)))
                      for key, slot in table.items()}
        self.max_length = max((len(k) for k in self.table), default=0)

    @classmethod
    def from_kb(cls, kb, languages: Optional[Iterable[str]] = None, prior: Optional[Mapping[str, float]] = None,
                **kwargs) -> "EntityLinker":
        """A linker over the knowledge base's names in ``languages`` (default: all). Ambiguous
        names are ranked by ``prior`` or, by default, by how many facts mention each entity plus
        the KB's ``type_prior`` for its type."""
        known = kb.languages() if hasattr(kb, "languages") else None
        if languages is None and known is None:
            aliases = {ANY_LANGUAGE: kb.aliases(None)}  # a KB that cannot list its languages
        else:
            langs = list(known if languages is None else languages)
            if ANY_LANGUAGE not in langs and ANY_LANGUAGE in (known or ()):
                langs.append(ANY_LANGUAGE)
            aliases = {lang: kb.aliases(lang) for lang in langs}
        if prior is None:
            entities = {e for names in aliases.values() for candidates in names.values() for e in candidates}
            prior = _default_prior(kb, entities)
        return cls(aliases, prior, **kwargs)

    def __len__(self) -> int:
        return len(self.table)

    def candidates(self, key: str, lang: Optional[str], lowercase: bool = False) -> tuple[str, ...]:
        """Candidates of a normalised name that are valid in ``lang`` (None: any language).
        ``lowercase``: the text wrote the name in lower case, which a language-neutral proper
        name (an ISO place name such as "Male") does not match: "male" is a word."""
        entries = self.table.get(key, ())
        code = None if lang is None else base_language(lang)
        return tuple(e for e, langs in entries
                     if (not langs and not (lowercase and langs is None)) or (langs and (code is None or code in langs)))

    # --- matching --------------------------------------------------------------------------------
    def _matches(self, norm: str, lang: Optional[str], lowercase: list[bool], allowed_start=None,
                 allowed_end=None) -> list[tuple[int, int, tuple[str, ...]]]:
        n = len(norm)
        starts = [i for i in range(n) if norm[i] != " " and (i == 0 or _boundary(norm, i))]
        ends = [j for j in range(1, n + 1) if norm[j - 1] != " " and (j == n or _boundary(norm, j))]
        found = []
        for i in starts:
            if allowed_start is not None and i not in allowed_start:
                continue
            lo, hi = bisect.bisect_right(ends, i), bisect.bisect_right(ends, i + self.max_length)
            for j in ends[lo:hi]:
                if allowed_end is None or j in allowed_end:
                    candidates = self.candidates(norm[i:j], lang, lowercase[i])
                    if candidates:
                        found.append((i, j, candidates))
        chosen = []
        taken = [False] * n
        for i, j, candidates in sorted(found, key=lambda m: (m[0] - m[1], m[0])):  # longest, then leftmost
            if not any(taken[i:j]):
                chosen.append((i, j, candidates))
                taken[i:j] = [True] * (j - i)
        return sorted(chosen)

    def link_text(self, text: str, lang: Optional[str] = None) -> list[Mention]:
        """Mentions in raw text (character offsets into ``text``), using the names of ``lang``
        (and language-neutral names); ``lang=None`` uses every language."""
        norm, starts, ends = normalize(text, self.strip_accents)
        out = []
        for i, j, candidates in self._matches(norm, lang, _lowercase(text, starts)):
            s, e = starts[i], ends[j - 1]
            out.append(Mention(s, e, text[s:e], candidates[0], candidates))
        return out

    def link_tokens(self, tokens: Sequence[str], lang: Optional[str] = None) -> list[Mention]:
        """Mentions in a tokenised sentence, with token offsets; a mention always covers whole
        tokens."""
        text, token_of_start, token_of_end = "", {}, {}
        for index, token in enumerate(tokens):
            if text:
                text += " "
            token_of_start[len(text)] = index
            text += token
            token_of_end[len(text)] = index + 1
        norm, starts, ends = normalize(text, self.strip_accents)
        allowed_start = {i for i, s in enumerate(starts) if s in token_of_start and (i == 0 or starts[i - 1] != s)}
        allowed_end = {j + 1 for j, e in enumerate(ends) if e in token_of_end and (j + 1 == len(ends) or ends[j + 1] != e)}
        out = []
        for i, j, candidates in self._matches(norm, lang, _lowercase(text, starts), allowed_start, allowed_end):
            first, last = token_of_start[starts[i]], token_of_end[ends[j - 1]]
            out.append(Mention(first, last, " ".join(tokens[first:last]), candidates[0], candidates))
        return out

    def __call__(self, batch: Sequence[str] | Sequence[Sequence[str]],
                 lang: Optional[str | Sequence[Optional[str]]] = None) -> list[list[Mention]]:
        """Link a batch of raw strings (character offsets) or token lists (token offsets);
        ``lang`` is one language for the batch or one per item."""
        langs = [lang] * len(batch) if lang is None or isinstance(lang, str) else list(lang)
        if len(langs) != len(batch):
            raise InputError(f"got {len(langs)} languages for a batch of {len(batch)}")
        return [self.link_text(item, code) if isinstance(item, str) else self.link_tokens(item, code)
                for item, code in zip(batch, langs)]


def _lowercase(text: str, starts: list[int]) -> list[bool]:
    return [text[s].islower() for s in starts]


def _boundary(norm: str, i: int) -> bool:
    """Whether a mention may start or end between ``norm[i-1]`` and ``norm[i]``."""
    left, right = norm[i - 1], norm[i]
    return (not _wordlike(left) or not _wordlike(right) or no_space_script(left) or no_space_script(right))


def _default_prior(kb, entities: Iterable[str]) -> dict[str, float]:
    """Facts mentioning the entity, plus the KB's per-type bonus (``kb.type_prior``)."""
    type_prior = getattr(kb, "type_prior", None) or {}
    entity_type = getattr(kb, "entity_type", lambda e: None)
    degree = getattr(kb, "degree", None)
    if degree is None:
        counts: dict[str, float] = {}
        for h, _, t in kb.triples():
            counts[h] = counts.get(h, 0.0) + 1
            counts[t] = counts.get(t, 0.0) + 1
        degree = lambda e: counts.get(e, 0.0)  # noqa: E731
    return {e: float(degree(e)) + type_prior.get(entity_type(e), 0.0) for e in entities}
