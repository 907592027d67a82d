"""benchmarks/gpu_check.py --dry-run: the GPU acceptance script runs its every check on the CPU
with tiny shapes, so that it is known to work before a GPU is lent; a check that fails is
reported as failed while the others still run."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("soundfile")

from benchmarks import gpu_check as G  # noqa: E402
from benchmarks._gpu_check.training import RUNS  # noqa: E402
from benchmarks._results import current_machine  # noqa: E402


@pytest.fixture(scope="module")
def dry_run(shared_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_check") / "gpu_check.json"
    report = G.main(["--dry-run", "--data-dir", str(shared_data), "--out", str(out)])
    return report, out


@pytest.mark.slow
def test_every_check_passes_on_the_cpu_with_the_figures_it_claims(dry_run):
    report, out = dry_run
    checks = report["checks"]
    assert list(checks) == list(G.CHECKS)
    assert {name: c["status"] for name, c in checks.items()} == {name: "pass" for name in G.CHECKS}, \
        {name: c.get("reason") for name, c in checks.items() if c["status"] != "pass"}
    scaler = checks["grad_scaler"]
    assert (scaler["scale_before"], scaler["scale_after"]) == (65536.0, 32768.0)
    assert scaler["parameters_unchanged"] and scaler["optimizer_steps"][0] == scaler["optimizer_steps"][1]
    assert scaler["skipped_total"] == 1 and scaler["updated_after"]
    assert checks["fused_adamw"]["update_relative_difference"] < 1e-5  # float32 on the CPU: rounding only
    assert checks["fsdp"]["strategy"] == "fsdp" and checks["fsdp"]["checkpoints"] == ["step-00000003"]
    # every registered family was trained, each run three steps with finite losses, in both precisions
    from babelzoo.zoo.family import FAMILIES, load_builtin_families

    load_builtin_families()
    assert set(FAMILIES.list()) <= set(checks["train"]["families"])
    cells = checks["train"]["cells"]
    assert len(cells) == 2 * len(RUNS)
    assert all(len(c["losses"]) == 3 and all(map(torch.isfinite, torch.tensor(c["losses"]))) for c in cells.values())
    assert checks["generate"]["greedy"]["rows_equal_to_cpu"] == 1.0  # the dry run compares the CPU with itself
    assert checks["unpadded"]["fp32"]["min_cosine"] > 0.9999
    assert checks["faiss"]["recall_at_10"] == 1.0


def test_the_results_files_hold_the_report_and_its_table(dry_run):
    report, out = dry_run
    run = json.loads(out.read_text(encoding="utf-8"))
    saved = run["results"]
    assert saved["dry_run"] is True and saved["checks"].keys() == report["checks"].keys()
    assert saved["machine"]["torch"] == torch.__version__ and saved["commit"] and saved["date"]
    assert run["suite"] == "gpu_check" and run["machine"]["tag"] == current_machine()["tag"]
    assert run["commit"] and run["date"] and run["command"].startswith("python ")
    table = out.with_suffix(".md").read_text(encoding="utf-8")
    for name in G.CHECKS:
        assert f"| {name} | pass |" in table
    assert "## Training through the recipes" in table and "## benchmarks/speed.py cells" in table


def test_a_failing_check_is_reported_and_the_others_still_run(monkeypatch, shared_data, tmp_path):
    def broken(ctx):
        raise RuntimeError("Expected all tensors to be on the same device")

    monkeypatch.setitem(G.CHECKS, "sdpa", broken)
    report = G.main(["--dry-run", "--only", "fused_adamw,sdpa,grad_scaler", "--data-dir", str(shared_data),
                     "--out", str(tmp_path / "g.json")])
    statuses = {name: c["status"] for name, c in report["checks"].items()}
    assert statuses == {"fused_adamw": "pass", "sdpa": "fail", "grad_scaler": "pass"}
    assert "same device" in report["checks"]["sdpa"]["reason"] and "Traceback" in report["checks"]["sdpa"]["traceback"]


def test_an_unknown_check_or_a_missing_gpu_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="unknown check"):
        G.main(["--dry-run", "--only", "sdpa,warp_drive", "--out", str(tmp_path / "g.json")])
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="no CUDA device"):
            G.main(["--out", str(tmp_path / "g.json")])


def test_the_docs_quote_the_committed_gpu_run():
    from pathlib import Path

    repo = Path(G.__file__).resolve().parents[1]
    report = json.loads((repo / "benchmarks/results/gpu_check/h200.json").read_text(encoding="utf-8"))["results"]
    readme = (repo / "docs" / "performance.md").read_text(encoding="utf-8")
    statuses = {name: c["status"] for name, c in report["checks"].items()}
    assert statuses == {**{name: "pass" for name in G.CHECKS}, "faiss": "skip"} and "H200" in report["machine"]["gpu"]
    speed = report["checks"]["speed"]
    ratios = [speed["training"][f"base/{d}"]["ratio"] for d in ("bf16", "fp16")]
    mfu = {f"{100 * speed['training'][f'base/{d}']['babelzoo_mfu']:.0f}" for d in ("bf16", "fp16")}
    unpadded = sorted([report["checks"]["unpadded"]["bf16"]["speedup"], speed["inference"]["bf16"]["ratio_vs_padded"]])
    quoted = (f"{report['wall_s']:.0f} s", f"{ratios[0]:.2f}× (bf16) and {ratios[1]:.2f}× (fp16)",
              f"{'–'.join(sorted(mfu))}% MFU", f"{speed['peaks']['bf16']['wall'] / 1e12:.0f} TFLOP/s bf16",
              f"{unpadded[0]:.2f}–{unpadded[1]:.2f}×")
    for text in quoted:
        assert text in readme.replace("\n", " "), text
