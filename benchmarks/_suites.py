"""Every benchmark suite, by name: the script that runs it and the options that make its
configuration. ``python -m benchmarks list`` shows them, ``python -m benchmarks run NAME`` runs one.

A suite is a script (a module with ``main(argv)``) plus the options that fix what it measures:
``long_documents_clm_multi30k`` is ``long_documents.py`` with ``--objectives segment_clm
--extra-train multi30k --steps 600``. Its results live in ``benchmarks/results/<suite>/``, one
``<machine-tag>.json`` per machine (see :mod:`benchmarks._results`); the same configuration on
another machine is another file of the same suite, never another suite. A suite runs from any
directory: the repository's files among its options are :class:`InRepo` paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Union

from babelzoo.registry import Registry

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class InRepo:
    """A file of the repository among a suite's options, by its path from the repository root
    (``benchmarks/configs/default.yaml``)."""

    path: str

    def argument(self) -> str:
        """The path as the script opens it from the current directory: relative when the
        current directory holds it (from the root, as typed there), else absolute."""
        full, here = REPO / self.path, Path.cwd().resolve()
        return str(full.relative_to(here)) if full.is_relative_to(here) else str(full)


@dataclass(frozen=True)
class Suite:
    """One registered benchmark: ``module.main(list(args) + user options)`` runs it; the
    module's ``markdown(results)`` (and ``plot(results, path)`` where it has one) renders it;
    ``headline(results)`` is its figure in the results index."""

    name: str
    module: str
    description: str
    args: tuple[Union[str, InRepo], ...] = ()
    gpu: bool = False  # its machine is the GPU it ran on (tag h200), not the CPU
    writes_out: bool = True  # takes --out FILE.json; False: a leaderboard, whose --out is its results folder
    headline: Optional[Callable[[dict], str]] = None

    def arguments(self) -> list[str]:
        """:attr:`args` as the script's argv, each repository path as it opens from here."""
        return [arg.argument() if isinstance(arg, InRepo) else arg for arg in self.args]


SUITES: Registry[Suite] = Registry("benchmark suite", listed_by="python -m benchmarks list")


def _adapted(results: dict) -> str:
    e5, recipe = (results["arms"][arm].get("eval") for arm in ("e5", "recipe"))
    if not (e5 and recipe):
        return ""
    return (f"Tatoeba, adapted languages: e5 {100 * e5['adapted_mean']:.1f} → "
            f"recipe {100 * recipe['adapted_mean']:.1f}")


def _fastest_variant(results: dict) -> str:
    base, *rows = results["variants"]
    key = "sentences_per_s" if "sentences_per_s" in base else "tokens_per_s"
    best = max(rows, key=lambda row: row[key])
    share = 100 * best["tatoeba"]["mean"] / base["tatoeba"]["mean"]
    return f"{best['variant']}: {best[key] / base[key]:.2f}× {base['variant']}, {share:.1f} % of its Tatoeba"


def _contention(results: dict) -> str:
    demo = results.get("demo")
    return f"demo beside a competitor: {demo['contended_s'] / demo['quiet_s']:.2f}× its quiet time" if demo else ""


def _gpu_checks(results: dict) -> str:
    statuses = [check["status"] for check in results["checks"].values()]
    counts = ", ".join(f"{statuses.count(s)} {word}" for s, word in (("pass", "pass"), ("skip", "skipped"),
                                                                     ("fail", "failed")) if s in statuses)
    return f"{counts}, {results['wall_s']:.0f} s"


def _inference(results: dict) -> str:
    return ", ".join(f"{dtype} {d['ratio']:.2f}× transformers ({d['ratio_vs_sorted']:.2f}× sorted)"
                     for dtype, d in results["inference"]["dtypes"].items())


def _generation(results: dict) -> str:
    return ", ".join(f"{name} {row['ratio']:.2f}× transformers" for name, row in results["runs"].items())


def _training(results: dict) -> str:
    training = results.get("training") or {}
    config = "base" if "base" in training else next(iter(training), None)
    if config is None:
        return ""
    ratios = [f"{dtype} {row['ratio']:.2f}×" for dtype, row in training[config]["dtypes"].items() if "ratio" in row]
    return f"training {config}: {', '.join(ratios)} transformers' tokens/s" if ratios else ""


def _streaming(results: dict) -> str:
    runs = results["runs"]
    cached = max(run["tokens_per_s"] for name, run in runs.items() if name.startswith("cached"))
    return f"streamed {runs['streamed']['tokens_per_s'] / cached:.2f}× the fastest cached run's tokens/s"


def _memory_gain(results: dict) -> str:
    gains = [f"{name} {settings['memory_gain']['mean']:+.4f}" for name, settings in results["results"].items()
             if "memory_gain" in settings]
    return f"memory gain (held-out loss): {', '.join(gains)}" if gains else ""


def _tatoeba_mean(results: dict) -> str:
    means = results["tatoeba_mean"]
    return f"Tatoeba mean en→x {means['en2x']:.3f}, x→en {means['x2en']:.3f}" if means else ""


def _link_prediction(results: dict) -> str:
    return "test MRR " + ", ".join(f"{row['model']} {row['test']['mrr']:.3f}" for row in results["results"])


def _kg_completion(results: dict) -> str:
    """The best arm this run trained (rows carried over from another file are that file's)."""
    carried = set((results.get("carried") or {}).get("arms", ()))
    ran = {arm: row for arm, row in results["arms"].items() if arm not in carried}
    best = max(ran, key=lambda arm: ran[arm]["test"]["mrr"])
    line = f"{best}: test MRR {ran[best]['test']['mrr']:.3f}, Hits@10 {ran[best]['test']['hits@10']:.3f}"
    injected = [f"{arm} {row['test']['mrr']:.3f}" for arm, row in ran.items() if arm.startswith("inject_") and arm != best]
    return line + (f"; {', '.join(injected)}" if injected else "")


def _kg_multilingual(results: dict) -> str:
    lp = results["link_prediction"]
    best = {lang: max(arms, key=lambda a: arms[a]["test"]["kens"]["hits@1"]) for lang, arms in lp.items() if arms}
    return "KEnS-protocol Hits@1: " + ", ".join(f"{lang} {100 * lp[lang][arm]['test']['kens']['hits@1']:.1f} ({arm})"
                                                for lang, arm in best.items())


def _tokenize(results: dict) -> str:
    ours, base = results["results"]["this tree"], results["results"].get("baseline", {})
    return ", ".join(f"{name} {row['sentences_per_s'] / base[name]['sentences_per_s']:.1f}× the baseline"
                     for name, row in ours.items() if name in base)


def _transfer(results: dict) -> str:
    return f"SIB-200 zero-shot mean {100 * results['arms']['babelzoo']['mean_zero_shot']:.1f}"


def _deploy(results: dict) -> str:
    rows = {row["arm"]: row["sentences_per_s"] for row in results["rows"]}
    ours = max((speed, arm) for arm, speed in rows.items() if arm.startswith("e5-small babelzoo"))
    peer = max(speed for arm, speed in rows.items() if arm.startswith("e5-small transformers"))
    return f"{ours[1].removeprefix('e5-small ')}: {ours[0] / peer:.2f}× the fastest transformers ONNX export"


def _memory_search(results: dict) -> str:
    exact = [row for row in results["results"] if row["recall@10"] == 1.0]
    best = max(exact, key=lambda row: row["speedup_wall"])
    return f"{best['index']} ({best['params']}): recall@10 1.0 at {best['speedup_wall']:.1f}× exact search"


def _throughput(results: dict) -> str:
    arms = {name: arm["train"]["tokens_per_s"] for name, arm in results["arms"].items()}
    if not {"recipe", "st"} <= set(arms):
        return ""
    return f"recipe {arms['recipe'] / arms['st']:.2f}× sentence-transformers' training tokens/s"


def _bleu(results: dict) -> str:
    bleu = (f"{arm} {row['finetune']['en-de']['bleu']:.1f}" for arm, row in results["arms"].items())
    return "en→de BLEU " + ", ".join(bleu)


def suite(name: str, script: str, description: str, *args: Union[str, InRepo], **options) -> None:
    SUITES.register(Suite(name, f"benchmarks.{script}", description, tuple(args), **options), name=name)


STUDENT_RUN = ("--limit", "300", "--variants", "e5-small fp32", "distilled student", "--heldout-langs", "ara", "cmn",
               "jpn", "tur")

suite("adaptation", "adaptation", "e5-small adapted to the languages it serves poorly: the recipe, its ablations, "
      "sentence-transformers' distillation (Tatoeba, SIB-200)", headline=_adapted)
suite("adaptation_throughput", "adaptation", "training throughput of the adaptation arms (40 steps, no evaluation)",
      "--train-only", "--max-steps", "40", "--arms", "recipe,st,distill", headline=_throughput)
suite("adaptation_vocabulary", "adaptation_vocabulary", "how finely e5-small's tokenizer cuts the adapted languages, "
      "and what vocabulary extension saves")
suite("codex_link_prediction", "codex_link_prediction", "CoDEx-S link prediction: TransE, DistMult, ComplEx, RotatE "
      "beside the paper",
      headline=_link_prediction)
suite("kg_completion", "kg_completion", "WN18RR link prediction: e5 zero-shot, structure, text, text + structure, "
      "ensemble and re-ranking beside SimKGC, RotatE, StAR, KG-BERT", headline=_kg_completion)
suite("kg_multilingual", "kg_multilingual", "DBP-5L: link prediction in five DBpedia graphs alone and together "
      "through the seed alignments, and entity alignment between every pair", headline=_kg_multilingual)
suite("compression", "compression", "e5-small and its compressed variants: size, CPU speed, Tatoeba, SIB-200 "
      "zero-shot", headline=_fastest_variant)
suite("compression_students", "compression", "distilled students of e5-small (give --student DIR ...), fp32 and "
      "int8", *STUDENT_RUN, "--repeats", "5", headline=_fastest_variant)
suite("compression_student", "compression", "one 4-layer distill_mlm student of e5-small (give --student DIR)",
      *STUDENT_RUN, "--repeats", "3", headline=_fastest_variant)
suite("compression_student_sentence800", "compression", "one 4-layer distill_sentence student, 800 steps (give "
      "--student DIR)", *STUDENT_RUN, "--repeats", "3", headline=_fastest_variant)
suite("cpu_contention", "cpu_contention", "training and encoding beside a competing CPU-bound process, and the "
      "demo's time", "--demo", headline=_contention)
suite("deploy", "deploy", "serving e5-small on the CPU: sentences/s and Tatoeba of every deployment path",
      headline=_deploy)
suite("e5_tatoeba", "e5_tatoeba", "pretrained multilingual-e5-small on Tatoeba and Multi30k against its reference "
      "numbers",
      headline=_tatoeba_mean)
suite("generate_speed", "generate_speed", "BART generation speed beside transformers (greedy and beam search)",
      headline=_generation)
suite("generate_speed_tiny", "generate_speed", "generation speed of a tiny BART on one thread",
      "--size", "tiny", "--threads", "1", headline=_generation)
suite("gpu_check", "gpu_check", "GPU acceptance: every CUDA path babelzoo claims, run, checked and timed", gpu=True,
      headline=_gpu_checks)
for _config in ("default", "transfer", "multimodal"):
    suite(f"leaderboard_{_config}", "leaderboard", f"the leaderboard of benchmarks/configs/{_config}.yaml",
          "--config", InRepo(f"benchmarks/configs/{_config}.yaml"), writes_out=False)
suite("long_documents", "long_documents", "Transformer-XL's segment memory on long documents (segment MLM and CLM)",
      headline=_memory_gain)
suite("long_documents_clm_3seeds", "long_documents", "segment memory with causal LM, three seeds",
      "--objectives", "segment_clm", "--seeds", "3",
      headline=_memory_gain)
suite("long_documents_clm_multi30k", "long_documents", "segment memory with causal LM and Multi30k captions as more "
      "training text", "--objectives", "segment_clm", "--extra-train", "multi30k", "--steps", "600",
      headline=_memory_gain)
suite("long_documents_mlm_multi30k", "long_documents", "segment memory with masked LM and Multi30k captions as more "
      "training text", "--objectives", "segment_mlm", "--extra-train", "multi30k", "--steps", "600",
      headline=_memory_gain)
suite("memory_search", "memory_search", "retrieval-memory search: FAISS indexes against exact top-k",
      headline=_memory_search)
suite("multimodal_retrieval", "multimodal_retrieval", "image-text and speech-text retrieval on multilingual pairs")
suite("objectives_zoo", "objectives_zoo", "the shipped pre-training recipes side by side at one step budget")
suite("speed", "speed", "training, inference and memory beside transformers, same BERT weights (CPU)",
      headline=_training)
suite("speed_compile", "speed", "training speed with torch.compile (CPU, BERT-base)",
      "--configs", "base", "--skip", "memory,inference,trainer", "--compile",
      headline=_training)
suite("speed_inference", "speed", "unpadded inference beside transformers (CPU, fp32)",
      "--skip", "training,memory,trainer", "--dtypes", "fp32", "--infer-repeats", "5", headline=_inference)
suite("speed_gpu", "speed", "training and inference beside transformers on a GPU", "--gpu", "--configs", "base",
      "--skip", "memory", gpu=True,
      headline=_training)
suite("streaming", "streaming", "streaming pre-training beside the cached path, and resuming a stream",
      headline=_streaming)
suite("tokenize_speed", "tokenize_speed", "batch-encode speed of babelzoo's tokenizers beside a baseline revision "
      "and the peers",
      headline=_tokenize)
suite("transfer", "transfer", "zero-shot cross-lingual transfer on SIB-200 beside transformers",
      headline=_transfer)
suite("translation", "translation", "Multi30k translation: does multilingual pre-training of an encoder-decoder "
      "help?", headline=_bleu)
suite("xlingual_objectives", "xlingual_objectives", "do cross-lingual pre-training objectives align languages?")
suite("xlingual_transfer_e5", "xlingual_transfer", "cross-lingual objectives judged by zero-shot transfer, from "
      "e5-small", "--setting", "e5")
suite("xlingual_transfer_scratch", "xlingual_transfer", "cross-lingual objectives judged by zero-shot transfer, "
      "from scratch", "--setting", "scratch")
