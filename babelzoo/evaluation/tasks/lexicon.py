"""Bilingual lexicon induction on CLDR names (embedded: the ``babel`` package).

Each CLDR code (territory, language, currency, script) has a name in English and in language X;
the English names are queries, the X names the candidates, and the gold translation is the X name
of the same code. P@1 by cosine nearest neighbour and by CSLS (k=10), as in MUSE (Conneau et al.
2018).

Queries are the held-out entities only (:func:`babelzoo.knowledge.facts.is_heldout_entity`, a
fixed 25% of entity ids such as ``territory:JP``): models pre-trained on the CLDR knowledge base
(``babelzoo demo``) never see their facts, so no model is scored on names it trained on. The
candidates are all X names, held out or not."""

from __future__ import annotations

from ..metrics import bli_precision_at_1
from . import TASKS, Result, TaskContext, TaskSkipped

# babelzoo language code -> CLDR locale
CLDR_LOCALES = {"de": "de", "fr": "fr", "es": "es", "ru": "ru", "ar": "ar", "zh-hans": "zh_Hans", "ja": "ja",
                "hi": "hi", "cs": "cs", "sw": "sw", "el": "el", "he": "he", "th": "th", "ko": "ko"}
DEFAULT_LANGS = ("de", "fr", "es", "ru", "ar", "zh-hans", "ja", "hi")
CATEGORIES = ("territories", "languages", "currencies", "scripts")
ENTITY_KIND = {"territories": "territory", "languages": "language", "currencies": "currency", "scripts": "script"}


def cldr_lexicon(lang: str, heldout_only: bool = True) -> tuple[list[str], list[str], list[list[int]]]:
    """English names, distinct X names, and for each English name the indices of its gold X
    names. Codes whose English or X name is missing are left out; X names shared by several
    codes are one candidate that is gold for each of them. With ``heldout_only`` the English
    queries are the held-out entities' names."""
    from babel import Locale

    from ...knowledge.facts import is_heldout_entity

    en, other = Locale.parse("en"), Locale.parse(CLDR_LOCALES[lang])
    sources, gold, index = [], [], {}
    targets: list[str] = []
    seen_src: dict[str, int] = {}
    for category in CATEGORIES:
        en_names, x_names = getattr(en, category), getattr(other, category)
        for code, en_name in sorted(en_names.items()):
            x_name = x_names.get(code)
            if not x_name or not en_name or (category == "territories" and code.isdigit()):
                continue
            if x_name not in index:
                index[x_name] = len(targets)
                targets.append(x_name)
            if heldout_only and not is_heldout_entity(f"{ENTITY_KIND[category]}:{code}"):
                continue
            if en_name in seen_src:
                gold[seen_src[en_name]].append(index[x_name])
                continue
            seen_src[en_name] = len(sources)
            sources.append(en_name)
            gold.append([index[x_name]])
    return sources, targets, gold


@TASKS.register
def bli_cldr(encoder, context: TaskContext) -> list[Result]:
    """BLI P@1 (nearest neighbour and CSLS) from English CLDR names to their translations."""
    langs = [lang for lang in (context.languages or DEFAULT_LANGS) if lang in CLDR_LOCALES]
    if not langs:
        raise TaskSkipped(f"no CLDR locale for {context.languages}; known: {', '.join(CLDR_LOCALES)}")
    results = []
    for lang in langs:
        sources, targets, gold = cldr_lexicon(lang)
        if context.limit:
            sources, gold = sources[: context.limit], gold[: context.limit]
        src, tgt = encoder.encode(sources, lang="en"), encoder.encode(targets, lang=lang)
        protocol = {**encoder.protocol, "source": "CLDR " + "+".join(CATEGORIES), "n": len(sources),
                    "queries": "held-out entities (sha1 split, 25%)",
                    "candidates": len(targets), "direction": f"en->{lang}"}
        for method in ("nn", "csls"):
            value = bli_precision_at_1(src, tgt, gold, method, k=10)
            results.append(Result("bli_cldr", encoder.name, f"P@1 {method} en->{lang}", value,
                                  {**protocol, "retrieval": method, "csls_k": 10 if method == "csls" else None},
                                  family=f"P@1 {method.upper()}"))
    return results
