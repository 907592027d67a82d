"""English–X translation pairs for adapting a multilingual encoder to the languages it serves
poorly, gathered from installed packages only, with every test sentence kept out.

Sources, each read for one language at a time:

- ``gettext``: the human translations of application strings in the gettext catalogs of the
  installed ``packages`` (:func:`~babelzoo.offline.catalogs.gettext_corpus`; by default
  :data:`DEFAULT_PACKAGES`: Gramps, Django, pycountry's ISO 3166/639/4217/15924 name catalogs,
  Deluge, Weblate's language names, Sphinx, Wagtail, django-allauth and Trac, all installed
  with ``babelzoo[corpora]``; any other installed package with ``LC_MESSAGES`` catalogs can be
  named).
- ``cldr``: Unicode CLDR display data through ``babel``: the names of languages, territories,
  scripts and currencies, months and weekdays, and the relative date words ("yesterday",
  "next week"), each English name paired with the language's own.

- ``pairs_dir``: a user's own pairs, one file a language: ``DIR/<code>.tsv`` (``<code>`` a Tatoeba
  or ISO 639-3 code), English, a tab, the translation, one pair a line, UTF-8
  (:func:`read_pairs_dir`); and ``hf_pairs``: pairs a user keeps as a Hugging Face dataset
  (``hf_dataset`` sources with ``columns: [en, x]``). A language with pairs of its own joins the
  adapted languages whatever the rule says.

A pair is kept once, whichever source gave it first (a user's pairs first); a pair whose two sides are the same text
(case-folded) teaches nothing and is dropped; a pair either side of which is a sentence of a test
set in the data dir (:class:`~babelzoo.datasets.heldout.HeldOutSentences`) is removed and counted.

Languages are named by their Tatoeba (ISO 639-3) codes, as the benchmark that judges them does;
:func:`catalog_tag` maps one to the tag catalogs and CLDR use (``bre`` → ``br``, ``lvs`` → ``lv``).
With ``languages: auto`` the source picks them by the rule :func:`select_languages` states:
every Tatoeba language where multilingual-e5-small scores below ``threshold`` (its measured
accuracy, shipped as ``e5_small_tatoeba.json``) and the sources hold at least ``min_pairs``
pairs after the filter.
"""

from __future__ import annotations

import functools
import json
import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Optional, Sequence, Union

from ..datasets.heldout import HeldOutSentences, normalise_sentence
from ..datasets.sources import CorpusSource, Split, expand_path, register_source
from ..errors import ConfigError, InputError
from .catalogs import gettext_corpus
from .embedded import is_heldout

logger = logging.getLogger(__name__)

E5_TATOEBA = Path(__file__).with_name("e5_small_tatoeba.json")
# the installed distributions whose gettext catalogs give pairs (babelzoo[corpora] installs them). Also
# searched, and left out: ckan (it installs a pytest plugin that fails to import without Flask),
# pretix (a template catalog whose Plural-Forms is the placeholder "EXPRESSION"), gaphor and
# glances (no gettext catalogs in their wheels)
DEFAULT_PACKAGES = ("gramps", "django", "pycountry", "deluge", "weblate-language-data", "sphinx", "wagtail",
                    "django-allauth", "trac")
# Tatoeba codes whose catalog/CLDR tag is not pycountry's two-letter code of the same language
_TAG_OVERRIDES = {"lvs": "lv", "swh": "sw", "pes": "fa", "cmn": "zh", "zsm": "ms", "ekk": "et", "uzb": "uz",
                  "kur": "ku", "ara": "ar", "est": "et", "yid": "yi", "ber": "ber", "kab": "kab"}
_CLDR_NAME_KINDS = ("languages", "territories", "scripts", "currency_names")


def e5_small_accuracy() -> dict[str, float]:
    """multilingual-e5-small's Tatoeba accuracy@1 per language (mean of both directions)."""
    return json.loads(E5_TATOEBA.read_text(encoding="utf-8"))["accuracy"]


@functools.lru_cache(maxsize=None)
def catalog_tag(code: str) -> str:
    """The BCP 47 tag that gettext catalogs and CLDR use for a Tatoeba (ISO 639-3) code."""
    if code in _TAG_OVERRIDES:
        return _TAG_OVERRIDES[code]
    import pycountry

    found = pycountry.languages.get(alpha_3=code)
    return getattr(found, "alpha_2", None) or code


# --- reading the sources --------------------------------------------------------------------------

@functools.lru_cache(maxsize=4)
def _catalogs(packages: tuple[str, ...], paths: tuple[str, ...]):
    return gettext_corpus(packages, min_languages=2, paths=paths)


def gettext_pairs(tag: str, packages: Sequence[str], paths: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(English, X) pairs of the catalogs of installed ``packages`` and of the catalog files or
    folders ``paths``."""
    corpus = _catalogs(tuple(packages), tuple(str(p) for p in paths))
    return corpus.pairs("en", tag) if tag in corpus.languages else []


def _cldr_names(locale) -> dict[str, str]:
    """Key → text of one CLDR locale: display names, months, weekdays, relative date words."""
    out: dict[str, str] = {}
    for kind in _CLDR_NAME_KINDS:
        for key, name in dict(locale._data.get(kind, {})).items():
            if isinstance(name, str):
                out[f"{kind}:{key}"] = name
    for kind in ("months", "days"):
        for key, name in dict(locale._data[kind]["format"]["wide"]).items():
            out[f"{kind}:{key}"] = name
    for unit, forms in dict(locale._data.get("date_fields", {})).items():
        for offset, word in dict(dict(forms).get("relative", {})).items():  # "yesterday", "next week"
            if isinstance(word, str):
                out[f"date:{unit}:{offset}"] = word
    return out


def cldr_pairs(tag: str) -> list[tuple[str, str]]:
    """(English, X) pairs of CLDR display data; none when CLDR has no locale for ``tag``."""
    from babel import Locale, UnknownLocaleError

    try:
        theirs = _cldr_names(Locale.parse(tag.replace("-", "_")))
    except (UnknownLocaleError, ValueError):
        return []
    english = _cldr_names(Locale.parse("en"))
    return [(english[key], text) for key, text in theirs.items() if key in english]


@dataclass
class LanguagePairs:
    """The pairs of one language, and where they came from."""

    code: str
    tag: str
    pairs: list[tuple[str, str]]
    by_source: dict[str, int]
    removed_as_test: int
    same_text: int


def language_pairs(code: str, packages: Sequence[str], cldr: bool, heldout: HeldOutSentences,
                   paths: Sequence[str] = (), own: Optional[dict[str, list[tuple[str, str]]]] = None) -> LanguagePairs:
    """Every distinct English–X pair the sources hold for Tatoeba language ``code``, test
    sentences removed (see the module docstring). ``own``: a user's pairs of this language by
    where they came from (``pairs_dir``, ``hf_dataset``), read first."""
    tag = catalog_tag(code)
    gathered = {**(own or {}), "gettext": gettext_pairs(tag, packages, paths), "cldr": cldr_pairs(tag) if cldr else []}
    seen: set[tuple[str, str]] = set()
    pairs, by_source, removed, same = [], {}, 0, 0
    for source, found in gathered.items():
        count = 0
        for en, x in found:
            en, x = en.strip(), x.strip()
            key = (normalise_sentence(en), normalise_sentence(x))
            if key in seen:
                continue
            seen.add(key)
            if key[0] == key[1]:
                same += 1
            elif en in heldout or x in heldout:
                removed += 1
            else:
                pairs.append((en, x))
                count += 1
        by_source[source] = count
    return LanguagePairs(code, tag, pairs, by_source, removed, same)


def select_languages(threshold: float, min_pairs: int, packages: Sequence[str], cldr: bool,
                     heldout: HeldOutSentences, paths: Sequence[str] = (),
                     own: Optional[dict[str, dict[str, list[tuple[str, str]]]]] = None
                     ) -> tuple[list[str], dict[str, LanguagePairs]]:
    """The rule: every Tatoeba language where multilingual-e5-small's accuracy is below
    ``threshold`` and the sources hold at least ``min_pairs`` pairs after the test filter.
    Returns the chosen codes (weakest first) and the pairs of every candidate looked at.
    ``own``: a user's pairs by language (counted with the rest)."""
    scores = e5_small_accuracy()
    own = own or {}
    candidates = sorted((code for code, acc in scores.items() if acc < threshold), key=scores.get)
    looked = {code: language_pairs(code, packages, cldr, heldout, paths, own.get(code)) for code in candidates}
    return [code for code in candidates if len(looked[code].pairs) >= min_pairs], looked


def language_code(code: str, where: str) -> str:
    """``code`` when it is a Tatoeba or ISO 639-3 language code, else an error naming ``where``."""
    import pycountry

    if code in e5_small_accuracy() or pycountry.languages.get(alpha_3=code) is not None:
        return code
    raise ConfigError(f"{where}: {code!r} is not a Tatoeba or ISO 639-3 language code (e.g. bre, eus, "
                      f"fao): name the file <code>.tsv after the language of its translations")


def read_pairs_dir(folder: str | Path) -> dict[str, list[tuple[str, str]]]:
    """A user's pairs: every ``folder/<code>.tsv`` (English, a tab, the translation; UTF-8; one
    pair a line) as ``{code: [(english, translation), ...]}``, in file order. A line without
    exactly two fields, a blank line, an empty side or invalid UTF-8 is an error naming the file
    and line; a file named after no language is an error naming it."""
    from ..datasets.text import read_parallel_tsv

    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"pairs_dir: {folder}: no such folder (one <code>.tsv file a language: English, a tab, "
                          f"the translation)")
    files = sorted(folder.glob("*.tsv"))
    if not files:
        raise ConfigError(f"pairs_dir: {folder} holds no <code>.tsv file (e.g. bre.tsv: English, a tab, the "
                          f"Breton translation, one pair a line)")
    out = {}
    for path in files:
        code = language_code(path.stem, f"pairs_dir: {path}")
        corpus = read_parallel_tsv(path, "en", code, num_fields=2, empty="error")
        if not corpus.pairs:
            raise InputError(f"{path}: no pairs (English, a tab, the translation, one pair a line)")
        out[code] = list(corpus.pairs)
    return out


# --- the data source ---------------------------------------------------------------------------------

@register_source
@dataclass
class AdaptationPairs(CorpusSource):
    """``{kind: adaptation_pairs, languages: auto | [bre, eus, ...], exclude: DATA_DIR}``: English–X
    pairs of the languages to adapt to, from installed packages (the module docstring), with
    every sentence of the test sets under ``exclude`` removed; one corpus per language, capped at
    ``max_pairs`` (a seeded sample). ``split: heldout`` gives instead the tenth of the pairs that
    training never reads (chosen by the English side, :func:`~babelzoo.offline.embedded.is_heldout`),
    a development set for choosing settings without looking at a test set. ``anchors`` (catalog tags such as ``de``) add up to
    ``anchor_pairs`` pairs each of languages the model already serves well, so that training on
    the new ones does not pull the others out of place.

    A user's own pairs: ``pairs_dir: DIR`` (every ``DIR/<code>.tsv``, :func:`read_pairs_dir`; a
    run's ``--set pairs_dir=DIR`` sets it) and ``hf_pairs`` (``hf_dataset`` sources, e.g.
    ``{path: json, data_files: pairs.jsonl, columns: [en, text], src_lang: en, tgt_lang: fao}``).
    Each such language joins the adapted languages even where the rule would not pick it, its
    pairs go through the same test-sentence filter, and one with fewer than ``min_pairs`` is
    said (a warning and ``below_min_pairs`` in the record), not skipped."""

    kind: ClassVar[str] = "adaptation_pairs"
    provides: ClassVar[str] = "pair"
    exclude: Optional[str]
    languages: Union[str, list[str]] = "auto"
    threshold: float = 0.70
    min_pairs: int = 1000
    max_pairs: int = 4000
    packages: list[str] = field(default_factory=lambda: list(DEFAULT_PACKAGES))
    paths: list[str] = field(default_factory=list)  # more catalog files or folders (LC_MESSAGES/*.po|.mo)
    cldr: bool = True
    anchors: list[str] = field(default_factory=list)
    anchor_pairs: int = 300
    pairs_dir: Optional[str] = None
    hf_pairs: list[dict] = field(default_factory=list)
    split: Split = "train"
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.languages, str) and self.languages != "auto":
            raise ConfigError(f"{self.where}.languages: 'auto' or a list of Tatoeba codes, got {self.languages!r}")
        for name in ("min_pairs", "max_pairs", "anchor_pairs"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{self.where}.{name}={getattr(self, name)!r} must be at least 1")
        if not 0.0 < self.threshold <= 1.0:
            raise ConfigError(f"{self.where}.threshold={self.threshold!r} must be in (0, 1]")

    def heldout(self) -> HeldOutSentences:
        if self.exclude is None:
            return HeldOutSentences.of(())
        return HeldOutSentences.from_data_dir(expand_path(self.exclude, f"{self.where}.exclude"))

    def gather(self) -> tuple[list[LanguagePairs], list[LanguagePairs], dict]:
        """(adapted languages, anchors, the rule's record)."""
        heldout = self.heldout()
        own, own_record = self.own_pairs()
        if self.languages == "auto":
            chosen, looked = select_languages(self.threshold, self.min_pairs, self.packages, self.cldr, heldout,
                                              self._paths(), own)
            chosen += [code for code in own if code not in chosen]  # a user's languages join whatever the rule says
            looked.update({code: language_pairs(code, self.packages, self.cldr, heldout, self._paths(), own[code])
                           for code in chosen if code not in looked})
            if not chosen:
                raise ConfigError(f"{self.where}.languages: no Tatoeba language below {self.threshold} has "
                                  f"{self.min_pairs} pairs in {self.packages}" + (" + CLDR" if self.cldr else ""))
            rule = {"rule": f"Tatoeba languages where multilingual-e5-small scores below {self.threshold} "
                            f"and the sources hold at least {self.min_pairs} pairs after the test filter",
                    "candidates": {code: len(p.pairs) for code, p in looked.items()}}
            adapted = [looked[code] for code in chosen]
        else:
            unknown = [code for code in self.languages if code not in e5_small_accuracy()]
            if unknown:
                raise ConfigError(f"{self.where}.languages: {unknown} are not Tatoeba codes (known: "
                                  f"{', '.join(sorted(e5_small_accuracy()))})")
            adapted = [language_pairs(code, self.packages, self.cldr, heldout, self._paths(), own.get(code))
                       for code in [*self.languages, *(c for c in own if c not in self.languages)]]
            rule = {"rule": "given"}
            empty = [p.code for p in adapted if not p.pairs]
            if empty:
                raise ConfigError(f"{self.where}.languages: the sources hold no pairs of {empty}")
        anchors = [self._anchor(tag, heldout) for tag in self.anchors]
        if own:
            few = {p.code: len(p.pairs) for p in adapted if p.code in own and len(p.pairs) < self.min_pairs}
            for code, n in few.items():
                logger.warning(f"{self.where}: {code} has {n} pairs after the test-sentence filter, fewer than the "
                               f"rule's min_pairs={self.min_pairs}; it is adapted because pairs of it were given")
            rule["own_pairs"] = {**own_record, "below_min_pairs": few}
        rule["test_sentences"] = len(heldout)
        rule["test_files"] = len(heldout.files)
        return adapted, anchors, rule

    def own_pairs(self) -> tuple[dict[str, dict[str, list[tuple[str, str]]]], dict]:
        """A user's pairs (``pairs_dir``, ``hf_pairs``) as ``{code: {where from: pairs}}``, and
        what the record says of them."""
        from ..datasets.sources import parse_source
        from ..typed import Where

        own: dict[str, dict[str, list[tuple[str, str]]]] = {}
        record: dict = {}
        if self.pairs_dir is not None:
            folder = expand_path(self.pairs_dir, f"{self.where}.pairs_dir")
            for code, pairs in read_pairs_dir(folder).items():
                own.setdefault(code, {})["pairs_dir"] = pairs
            record["pairs_dir"] = {"folder": folder, "files": {code: len(p["pairs_dir"]) for code, p in own.items()}}
        for i, spec in enumerate(self.hf_pairs):
            where = Where(label=f"{self.where}.hf_pairs").key(i)
            source = parse_source({**spec, "kind": "hf_dataset"}, where)
            if source.columns is None or source.src_lang != "en":
                raise ConfigError(f"{where}: pairs are columns: [english, translation] with src_lang: en and "
                                  f"tgt_lang: the translation's language code")
            code = language_code(source.tgt_lang, f"{where}.tgt_lang")
            pairs = [pair for corpus in source.read() for pair in corpus.pairs]
            own.setdefault(code, {}).setdefault("hf_dataset", []).extend(pairs)
            record.setdefault("hf_dataset", []).append({"source": source.describe(), "language": code,
                                                        "pairs": len(pairs)})
        return own, record

    def _paths(self) -> list[str]:
        return [expand_path(p, f"{self.where}.paths[{i}]") for i, p in enumerate(self.paths)]

    def _anchor(self, tag: str, heldout: HeldOutSentences) -> LanguagePairs:
        found = gettext_pairs(tag, self.packages, self._paths())
        if not found:
            raise ConfigError(f"{self.where}.anchors: no catalog pairs of {tag!r} in {self.packages}")
        kept, removed = heldout.split(found)
        return LanguagePairs(tag, tag, kept, {"gettext": len(kept)}, removed, 0)

    def read(self) -> list:
        from ..datasets.text import ParallelCorpus, ReadReport

        adapted, anchors, rule = self.gather()
        corpora = []
        self.record = {**rule, "languages": [p.code for p in adapted], "tags": [p.tag for p in adapted],
                       "pairs": {}, "anchors": {}}
        for group, cap in (("pairs", self.max_pairs), ("anchors", self.anchor_pairs)):
            for lp in adapted if group == "pairs" else anchors:
                split = [p for p in lp.pairs if is_heldout(p[0]) == (self.split == "heldout")]
                pairs = _sample(split, cap, self.seed)
                source = f"{lp.code}: " + ", ".join(f"{k} {v}" for k, v in lp.by_source.items())
                report = ReadReport((source,), len(lp.pairs), len(pairs), len(lp.pairs) - len(pairs))
                corpora.append(ParallelCorpus("en", lp.tag, pairs, report))
                self.record[group][lp.code] = {"tag": lp.tag, "sources": lp.by_source, "available": len(lp.pairs),
                                               self.split: len(split), "used": len(pairs),
                                               "removed_as_test": lp.removed_as_test, "same_text": lp.same_text}
        self.record["removed_as_test"] = sum(v["removed_as_test"] for g in ("pairs", "anchors")
                                             for v in self.record[g].values())
        return corpora

    record_file: ClassVar[str] = "adaptation.json"

    def describe(self) -> str:
        return "English–X pairs from installed catalogs" + (" and CLDR" if self.cldr else "")

    def card(self) -> str:
        """The model card's words on the languages and the data (after :meth:`read`)."""
        r = self.record
        rows = [f"| {code} | {v['tag']} | {v['available']} | {v['used']} | "
                + ", ".join(f"{k} {n}" for k, n in v["sources"].items()) + f" | {v['removed_as_test']} |"
                for code, v in r["pairs"].items()]
        anchors = ", ".join(f"{code} ({v['used']})" for code, v in r["anchors"].items())
        own = r.get("own_pairs")
        chosen = (f"Adapted languages ({len(r['languages'])}, Tatoeba codes): {', '.join(r['languages'])}. "
                  f"Chosen by: {r['rule']}.")
        sources = ("English–X translation pairs from the gettext catalogs of installed packages "
                   f"({', '.join(self.packages)})" + (" and Unicode CLDR display data (babel)" if self.cldr else "")
                   + f"; a language's pairs are capped at {self.max_pairs} (a seeded sample).")
        held = (f"Test-sentence filter: {r['removed_as_test']} pairs removed because a side equals (NFKC, whitespace "
                f"collapsed, case-folded) one of the {r['test_sentences']} sentences of {r['test_files']} Tatoeba, "
                "SIB-200/Flores and Multi30k test files in the data dir.")
        return "\n".join(["## Languages and data", "", chosen, "", sources, "",
                          "| language | tag | pairs available | pairs used | by source | removed as test sentences |",
                          "|---|---|---:|---:|---|---:|", *rows, "",
                          f"Anchor languages (pairs each): {anchors}." if anchors else "No anchor languages.", "",
                          *([own_pairs_words(own), ""] if own else []), held])


def own_pairs_words(own: dict) -> str:
    """The model card's sentence on the pairs a user brought."""
    parts = []
    if "pairs_dir" in own:
        files = ", ".join(f"{code}.tsv ({n})" for code, n in own["pairs_dir"]["files"].items())
        parts.append(f"from `{own['pairs_dir']['folder']}`: {files}")
    parts += [f"from {entry['source']}: {entry['language']} ({entry['pairs']})" for entry in own.get("hf_dataset", [])]
    few = ", ".join(f"{code} ({n})" for code, n in own["below_min_pairs"].items())
    return (f"Pairs the user brought (pairs read, before the filter): {'; '.join(parts)}."
            + (f" Below the rule's minimum of pairs, adapted because given: {few}." if few else ""))


def _sample(pairs: list, cap: int, seed: int) -> list:
    if len(pairs) <= cap:
        return list(pairs)
    return random.Random(seed).sample(pairs, cap)
