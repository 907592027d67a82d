"""The documentation site (``mkdocs.yml``, ``docs/``) builds with every warning an error: a broken
link, an anchor that is not there, a page missing from the navigation, an API page whose module
or docstring cannot be read."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=REPO, env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr[-4000:]
    assert "WARNING" not in run.stderr, run.stderr[-4000:]
    # every page of the navigation was written, and the API reference holds the docstrings
    pages = sorted(str(p.relative_to(REPO / "docs").with_suffix("")) for p in (REPO / "docs").rglob("*.md"))
    built = [page for page in pages if (tmp_path / "site" / page.removesuffix("index") / "index.html").exists()
             or (tmp_path / "site" / f"{page}.html").exists()]
    assert built == pages
    factory = (tmp_path / "site" / "reference" / "zoo" / "index.html").read_text(encoding="utf-8")
    assert "babelzoo.zoo.factory.create_model" in factory
    # the docstrings' reST roles (:class:`~a.B`) became links (docs/_ext/rst_roles.py), none is left as text
    reference = " ".join(p.read_text(encoding="utf-8") for p in (tmp_path / "site" / "reference").rglob("*.html"))
    assert re.search(r":(class|func|meth|mod|data|attr|exc):`", reference) is None
    assert '<a class="autorefs autorefs-internal" title="BabelzooError (babelzoo.errors.BabelzooError)"' in reference


# Every figure quoted in the README or the docs: (page, quoted text, results file, key path, format).
# The quoted text ends with the figure; the key path names the value in the results file ("a/b/c");
# a format "< N" is a bound the value stays under.
# The sentences of docs/performance.md are checked by their benchmarks' tests:
# tests/test_threads.py (CPU contention), tests/benchmarks/test_gpu_check.py (GPU) and
# tests/benchmarks/test_adaptation.py (adaptation).
SPEED_CPU = "benchmarks/results/speed/epyc.json"
UNPADDED = "benchmarks/results/speed_inference/epyc-avx512.json"
LONG_DOCUMENTS = "benchmarks/results/archive/long_documents_clm_multi30k/unrecorded.json"
KG_COMPLETION = "benchmarks/results/kg_completion/epyc-avx512.json"
KG_INJECTION = "benchmarks/results/kg_completion/xeon-avx512.json"
KG_MULTILINGUAL = "benchmarks/results/kg_multilingual/epyc-avx512.json"
ADAPTATION = "benchmarks/results/adaptation/epyc-avx512.json"
PERFORMANCE = "docs/performance.md"
CONTENTION = "benchmarks/results/cpu_contention/xeon.json"
FIGURES = [
    ("README.md", "print the leaderboard (under 10 minutes", CONTENTION, "demo/contended_s", "< 600"),
    ("docs/getting-started.md", "print the leaderboard (under 10 minutes", CONTENTION, "demo/contended_s", "< 600"),
    (PERFORMANCE, "BERT-small training tokens/s, fp32 | 2.11×", SPEED_CPU, "training/small/dtypes/fp32/ratio", "{:.2f}×"),
    (PERFORMANCE, "BERT-small training tokens/s, bf16 | 2.08×", SPEED_CPU, "training/small/dtypes/bf16/ratio", "{:.2f}×"),
    (PERFORMANCE, "BERT-base training tokens/s, fp32 | 1.35×", SPEED_CPU, "training/base/dtypes/fp32/ratio", "{:.2f}×"),
    (PERFORMANCE, "BERT-base training tokens/s, bf16 | 1.44×", SPEED_CPU, "training/base/dtypes/bf16/ratio", "{:.2f}×"),
    (PERFORMANCE, "BERT-base, 120k vocabulary, training tokens/s, fp32 | 1.85×", SPEED_CPU,
     "training/base120k/dtypes/fp32/ratio", "{:.2f}×"),
    (PERFORMANCE, "BERT-base, 120k vocabulary, training tokens/s, bf16 | 1.80×", SPEED_CPU,
     "training/base120k/dtypes/bf16/ratio", "{:.2f}×"),
    (PERFORMANCE, "BERT-small peak training memory, fp32 | 0.70×", SPEED_CPU, "memory/small/fp32/ratio", "{:.2f}×"),
    (PERFORMANCE, "BERT-base peak training memory, fp32 | 0.90×", SPEED_CPU, "memory/base/fp32/ratio", "{:.2f}×"),
    (PERFORMANCE, "BERT-base fp32 training MFU (against the run's measured matmul peak) | 88%", SPEED_CPU,
     "training/base/dtypes/fp32/babelzoo/mfu", "{:.0%}"),
    (PERFORMANCE, "BERT-base inference on real sentences, real tokens/s, fp32 | 2.11×", SPEED_CPU,
     "inference/dtypes/fp32/ratio", "{:.2f}×"),
    (PERFORMANCE, "BERT-base inference on real sentences, real tokens/s, bf16 | 2.18×", SPEED_CPU,
     "inference/dtypes/bf16/ratio", "{:.2f}×"),
    (PERFORMANCE, "unpadded fp32 inference, 512 Tatoeba sentences, in input order | 5.57×", UNPADDED,
     "inference/dtypes/fp32/ratio", "{:.2f}×"),
    (PERFORMANCE, "the same against transformers sorted by length | 2.62×", UNPADDED,
     "inference/dtypes/fp32/ratio_vs_sorted", "{:.2f}×"),
    (PERFORMANCE, "the unpadding alone (babelzoo's linear layers on ATen), against transformers sorted | 1.38×", UNPADDED,
     "inference/dtypes/fp32/ratio_aten_vs_sorted", "{:.2f}×"),
    (PERFORMANCE, "Transformer-XL causal LM, held-out EWT loss without memory | 5.194", LONG_DOCUMENTS,
     "results/segment_clm/without_memory/mean/held_loss", "{:.3f}"),
    (PERFORMANCE, "the same with memory | 5.046", LONG_DOCUMENTS, "results/segment_clm/with_memory/mean/held_loss", "{:.3f}"),
    (PERFORMANCE, "WN18RR link prediction, filtered test MRR, text + structure (kgc_e5_small) | 0.459", KG_COMPLETION,
     "arms/text_structure/test/mrr", "{:.3f}"),
    (PERFORMANCE, "the same, Hits@10 | 0.555", KG_COMPLETION, "arms/text_structure/test/hits@10", "{:.3f}"),
    (PERFORMANCE, "WN18RR, score ensemble of kgc_e5_small with ComplEx, filtered test MRR | 0.482", KG_COMPLETION,
     "arms/ensemble/test/mrr", "{:.3f}"),
    (PERFORMANCE, "the same re-ranked by the names in the entity texts (`kb eval --ensemble --names`), filtered test "
                  "MRR | 0.557", KG_COMPLETION, "arms/names/test/mrr", "{:.3f}"),
    (PERFORMANCE, "the same, Hits@10 | 0.671", KG_COMPLETION, "arms/names/test/hits@10", "{:.3f}"),
    (PERFORMANCE, "WN18RR, text-only scorer over frozen e5 (25 CPU min), filtered test MRR | 0.172", KG_INJECTION,
     "arms/inject_none/test/mrr", "{:.3f}"),
    (PERFORMANCE, "the same after 15 CPU min of entity-level MLM on the graph's facts | 0.073", KG_INJECTION,
     "arms/inject_entity_mlm/test/mrr", "{:.3f}"),
    (PERFORMANCE, "the same after 15 CPU min of ERNIE fusion + dEA on the graph's facts | 0.157", KG_INJECTION,
     "arms/inject_dea/test/mrr", "{:.3f}"),
    (PERFORMANCE, "WN18RR, the same text-only scorer on the 2-core EPYC (25 CPU min), filtered test MRR | 0.160",
     KG_COMPLETION, "arms/inject_none/test/mrr", "{:.3f}"),
    (PERFORMANCE, "the same after 15 CPU min of K-BERT sentence trees over the entity texts | 0.053", KG_COMPLETION,
     "arms/inject_kbert/test/mrr", "{:.3f}"),
    (PERFORMANCE, "the same, the K-BERT prediction head trained alone for the first 5 of the 15 CPU min | 0.176",
     KG_COMPLETION, "arms/inject_kbert_warm/test/mrr", "{:.3f}"),
    (PERFORMANCE, "the same warm-up before 15 CPU min of entity-level MLM | 0.158", KG_COMPLETION,
     "arms/inject_entity_mlm_warm/test/mrr", "{:.3f}"),
    (PERFORMANCE, "the same warm-up before 15 CPU min of ERNIE fusion + dEA | 0.161", KG_COMPLETION,
     "arms/inject_dea_warm/test/mrr", "{:.3f}"),
    (PERFORMANCE, "DBP-5L Greek, five graphs together, Hits@1 (KEnS's protocol) | 0.332", KG_MULTILINGUAL,
     "link_prediction/el/together/test/kens/hits@1", "{:.3f}"),
    (PERFORMANCE, "DBP-5L Greek, one model over the five graphs (kgc_dbp5l_joint), Hits@1 (KEnS's protocol) | 0.657",
     KG_MULTILINGUAL, "link_prediction/el/joint/test/kens/hits@1", "{:.3f}"),
    (PERFORMANCE, "the same, on the Greek test facts no other graph holds | 0.422", KG_MULTILINGUAL,
     "link_prediction/el/joint/by_part/new/kens/hits@1", "{:.3f}"),
    (PERFORMANCE, "the Greek graph alone (kgc_e5_small), on those facts | 0.339", KG_MULTILINGUAL,
     "link_prediction/el/text_structure/by_part/new/kens/hits@1", "{:.3f}"),
    (PERFORMANCE, "DBP-5L Japanese, one model over the five graphs, Hits@1 (KEnS's protocol) | 0.625", KG_MULTILINGUAL,
     "link_prediction/ja/joint/test/kens/hits@1", "{:.3f}"),
    (PERFORMANCE, "DBP-5L Japanese, text + structure alone, Hits@1 (KEnS's protocol) | 0.321", KG_MULTILINGUAL,
     "link_prediction/ja/text_structure/test/kens/hits@1", "{:.3f}"),
    (PERFORMANCE, "DBP-5L entity alignment Greek–English, Hits@1 (70% of the seeds held out) | 0.889", KG_MULTILINGUAL,
     "alignment/el-en/test/hits@1", "{:.3f}"),
    (PERFORMANCE, 'adapt_e5_small, Tatoeba mean of its 18 languages, accuracy@1 (e5\'s protocol: "query: ", both '
     'directions) | 0.616', ADAPTATION, "arms/recipe/eval/adapted_mean", "{:.3f}"),
    (PERFORMANCE, "multilingual-e5-small, the same, e5's protocol | 0.508", ADAPTATION, "arms/e5/eval/adapted_mean", "{:.3f}"),
    (PERFORMANCE, "adapt_e5_small, the same languages under MTEB's protocol (F1, X→English, no prefix) | 0.561",
     ADAPTATION, "arms/recipe/eval/mteb_f1", "{:.3f}"),
    (PERFORMANCE, "multilingual-e5-small, the same, MTEB's protocol | 0.506", ADAPTATION, "arms/e5/eval/mteb_f1", "{:.3f}"),
]


@pytest.mark.parametrize("page, quoted, results, path, form", FIGURES, ids=[q.rsplit(" | ", 1)[0] for _, q, *_ in FIGURES])
def test_quoted_figure_is_the_results_files(page, quoted, results, path, form):
    value = json.loads((REPO / results).read_text(encoding="utf-8"))["results"]
    for key in path.split("/"):
        value = value[key]
    text = (REPO / page).read_text(encoding="utf-8")
    assert quoted in " ".join(text.split())
    if form.startswith("< "):
        assert value < float(form[2:])
        return
    assert quoted.endswith(" " + form.format(value))
    # the table names the file the figure comes from
    assert f"{quoted} | `{Path(results).relative_to('benchmarks/results')}` |" in text


def test_every_figure_in_the_performance_table_is_checked():
    table = [line for line in (REPO / PERFORMANCE).read_text(encoding="utf-8").split("## Measured figures", 1)[1]
             .split("\n## ", 1)[0].splitlines() if line.startswith("| ") and not line.startswith(("| what", "|---"))]
    checked = {quoted for page, quoted, *_ in FIGURES if page == PERFORMANCE}
    assert len(table) >= 10 and [row for row in table if row.rsplit(" | `", 1)[0].removeprefix("| ") not in checked] == []


def test_the_api_reference_documents_every_package_and_the_top_level_names():
    import babelzoo

    documented = {line.removeprefix("::: ").strip() for page in (REPO / "docs" / "reference").glob("*.md")
                  for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("::: ")}
    packages = sorted(p.name for p in (REPO / "babelzoo").iterdir() if (p / "__init__.py").exists())
    assert [name for name in packages if not any(m.startswith(f"babelzoo.{name}") for m in documented)] == []
    # the modules that define what `import babelzoo` offers
    assert sorted(set(babelzoo._API.values()) - documented) == []
