"""Cross-lingual sentence retrieval: Tatoeba (XTREME protocol), Multi30k, and held-out
multi-way aligned gettext sentences (embedded data, no download)."""

from __future__ import annotations

from typing import Optional, Sequence

from ..metrics import accuracy_at_1
from . import TASKS, Result, TaskContext, TaskSkipped, per_language

MULTI30K_LANGS = ("de", "fr", "cs")


def bitext_results(task: str, encoder, pairs: Sequence[tuple[str, str]], src: str, tgt: str,
                   protocol: dict, limit: Optional[int] = None) -> list[Result]:
    """accuracy@1 in both directions for aligned ``pairs`` (src_i translates to tgt_i)."""
    pairs = list(pairs)[:limit] if limit else list(pairs)
    src_vecs = encoder.encode([s for s, _ in pairs], lang=src)
    tgt_vecs = encoder.encode([t for _, t in pairs], lang=tgt)
    base = {**encoder.protocol, **protocol, "n": len(pairs)}
    return [Result(task, encoder.name, f"acc@1 {src}->{tgt}", accuracy_at_1(src_vecs, tgt_vecs),
                   {**base, "direction": f"{src}->{tgt}"}, family="acc@1 en→X"),
            Result(task, encoder.name, f"acc@1 {tgt}->{src}", accuracy_at_1(tgt_vecs, src_vecs),
                   {**base, "direction": f"{tgt}->{src}"}, family="acc@1 X→en")]


@TASKS.register
def tatoeba(encoder, context: TaskContext) -> list[Result]:
    """Tatoeba (Artetxe & Schwenk 2019), XTREME protocol (Hu et al. 2020): mean-pooled vectors,
    cosine nearest neighbour, accuracy@1 English→X and X→English, every language file present."""
    from ...datasets.text import TATOEBA_FILES, tatoeba_languages, tatoeba_pairs

    if context.data_dir is None or not (context.data_dir / "tatoeba").is_dir():
        raise TaskSkipped("Tatoeba needs --data-dir with a tatoeba/ folder")
    langs = context.languages or tatoeba_languages(context.data_dir)
    langs = [lang for lang in langs if lang in set(tatoeba_languages(context.data_dir))]
    if not langs:
        asked = f"none of the languages {context.languages} has a" if context.languages else "there is no"
        raise TaskSkipped(f"{asked} Tatoeba file ({TATOEBA_FILES}) in {context.data_dir / 'tatoeba'}")

    def run(lang: str) -> list[Result]:
        pairs = [(eng, x) for x, eng in tatoeba_pairs(context.data_dir, lang).pairs]
        return bitext_results("tatoeba", encoder, pairs, "eng", lang, {"split": "test"}, context.limit)

    return per_language(langs, run, lambda lang, at, rows: context.log(
        f"  tatoeba {lang} ({at}): {rows[0].value:.3f} / {rows[1].value:.3f}"))


@TASKS.register
def tatoeba_mteb(encoder, context: TaskContext) -> list[Result]:
    """Tatoeba under MTEB's protocol: X → English bitext mining, F1 (MTEB's main score) and
    accuracy per language, every language file present. The encoder's own prefix is the prompt,
    so give it the one MTEB applies to bitext mining (for e5: none, ``prefix: ""``)."""
    from ...datasets.text import tatoeba_languages, tatoeba_pairs
    from ..mteb_protocol import bitext_mining

    if context.data_dir is None or not (context.data_dir / "tatoeba").is_dir():
        raise TaskSkipped("Tatoeba needs --data-dir with a tatoeba/ folder")
    present = set(tatoeba_languages(context.data_dir))
    langs = [lang for lang in (context.languages or sorted(present)) if lang in present]
    if not langs:
        raise TaskSkipped(f"none of the languages {context.languages} has a Tatoeba file in "
                          f"{context.data_dir / 'tatoeba'}")

    def run(lang: str) -> list[Result]:
        pairs = tatoeba_pairs(context.data_dir, lang).pairs[:context.limit]
        scores = bitext_mining(encoder.encode([x for x, _ in pairs], lang=lang),
                               encoder.encode([en for _, en in pairs], lang="eng"))
        protocol = {**encoder.protocol, "protocol": "mteb", "split": "test", "n": len(pairs), "direction": f"{lang}->eng"}
        return [Result("tatoeba_mteb", encoder.name, f"{name} {lang}->eng", scores[name], protocol,
                       family=f"{name} X→en (MTEB)") for name in ("f1", "accuracy")]

    return per_language(langs, run, lambda lang, at, rows: context.log(
        f"  tatoeba_mteb {lang} ({at}): F1 {rows[0].value:.3f}, accuracy {rows[1].value:.3f}"))


@TASKS.register
def multi30k(encoder, context: TaskContext) -> list[Result]:
    """Multi30k test_2016_flickr (Elliott et al. 2016) cross-lingual caption retrieval,
    English↔{de, fr, cs}, same protocol as Tatoeba."""
    from ...datasets.text import multi30k_pairs

    if context.data_dir is None or not (context.data_dir / "multi30k").is_dir():
        raise TaskSkipped("Multi30k needs --data-dir with a multi30k/ folder")
    results = []
    for lang in MULTI30K_LANGS:
        corpus = multi30k_pairs(context.data_dir, "test_2016_flickr", "en", lang)
        results += bitext_results("multi30k", encoder, corpus.pairs, "en", lang, {"split": "test_2016_flickr"},
                                  context.limit)
    return results
