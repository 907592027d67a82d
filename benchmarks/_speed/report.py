"""The targets and the Markdown table of a speed report."""

from __future__ import annotations

from typing import Any, Optional


def targets(report: dict) -> list[dict[str, Any]]:
    """Each target of the comparison, with the measured value and whether it is met."""
    rows = []

    def add(name: str, value: Optional[float], goal: float, higher: bool = True) -> None:
        if value is not None:
            rows.append({"target": name, "value": value, "goal": f"{'≥' if higher else '≤'} {goal:g}",
                         "met": bool(value >= goal if higher else value <= goal)})

    for name, goal in (("base", 1.2), ("base120k", 1.6)):
        for dname, d in report.get("training", {}).get(name, {}).get("dtypes", {}).items():
            add(f"training tokens/s ratio, {name} {dname}", d["ratio"], goal)
            if "ratio_cpu_time" in d:
                add(f"training tokens/s ratio by CPU time, {name} {dname}", d["ratio_cpu_time"], goal)
    for dname, d in report.get("inference", {}).get("dtypes", {}).items():
        add(f"inference real tokens/s ratio, {dname}", d["ratio"], 1.8)
        if dname == "fp32":
            add("inference real tokens/s ratio, fp32, vs transformers in input order", d["ratio"], 2.5)
            add("inference real tokens/s ratio, fp32, vs transformers sorted by length", d["ratio_vs_sorted"], 1.3)
            if "ratio_aten_vs_sorted" in d:
                add("the same, babelzoo on ATen's matrix product (as transformers)", d["ratio_aten_vs_sorted"], 1.3)
    for name, r in report.get("memory", {}).items():
        for dname, d in r.items():
            add(f"peak training memory ratio, {name} {dname}", d["ratio"], 1.0, higher=False)
    base = report.get("training", {}).get("base", {}).get("dtypes", {}).get("fp32")
    if base:
        add("MFU of the base fp32 training step (babelzoo)", base["babelzoo"]["mfu"], 0.7)
        if "mfu_adjacent" in base["babelzoo"]:
            add("MFU of the base fp32 training step vs the peak measured beside it (babelzoo)",
                base["babelzoo"]["mfu_adjacent"], 0.7)
        if "mfu_cpu_time" in base["babelzoo"]:
            add("MFU by CPU time of the base fp32 training step (babelzoo)", base["babelzoo"]["mfu_cpu_time"], 0.7)
    add("import babelzoo, seconds", report.get("import_s"), 2.0, higher=False)
    if report.get("trainer"):
        add("trainer data time share of a step", report["trainer"]["data_share"], 0.05, higher=False)
    return rows


def markdown(report: dict) -> str:
    m, a = report["machine"], report["args"]
    lines = [f"# babelzoo vs transformers: speed ({a['device']})", "",
             f"Machine: {m.get('gpu') or m['cpu']}, {m['cpus']} CPUs, {m['threads']} torch threads; "
             f"torch {m['torch']}, transformers {m['transformers']}, Python {m['python']}.  ",
             f"Command: `{report['command']}`  ",
             f"Load average at start / end: {report['load_start']} / {report['load_end']}.  ",
             f"CPU allocator: {report.get('allocator', 'default')}.  ",
             "Matmul peak (best n×n, wall / CPU-time): " + ", ".join(
                 f"{k} {v['wall'] / 1e9:.0f} / {v['cpu_time'] / 1e9:.0f} GFLOP/s" for k, v in report["peaks"].items())]
    if report.get("training"):
        lines += ["", "## Training (MLM, one step = forward + loss + backward + fused AdamW)", "",
                  "| config | dtype | babelzoo tok/s | transformers tok/s | ratio | ratio fwd+bwd | ratio CPU-time "
                  "| model GFLOP/tok | executed GFLOP/tok (bz / hf) | MFU bz / hf | MFU bz, adjacent peak "
                  "| MFU CPU-time bz | loss Δ |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in report.get("training", {}).items():
        for dname, d in r["dtypes"].items():
            b, h = d["babelzoo"], d["transformers"]
            lines.append(
                f"| {name} | {dname} | {b['tokens_per_s']:.0f} | {h['tokens_per_s']:.0f} | **{d['ratio']:.2f}×** | "
                f"{d['ratio_fwd_bwd']:.2f}× | {d.get('ratio_cpu_time', float('nan')):.2f}× | "
                f"{r['model_flops_per_token'] / 1e9:.3f} | {b['executed_flops_per_token'] / 1e9:.3f} / "
                f"{h['executed_flops_per_token'] / 1e9:.3f} | {100 * b['mfu']:.0f}% / {100 * h['mfu']:.0f}% | "
                f"{100 * b.get('mfu_adjacent', float('nan')):.0f}% | "
                f"{100 * b.get('mfu_cpu_time', float('nan')):.0f}% | {r['loss_check']['abs_diff']:.1e} |")
    profiled = [(name, dname, d["babelzoo"]["profile"]) for name, r in report.get("training", {}).items()
                for dname, d in r["dtypes"].items() if "gemm_efficiency" in d["babelzoo"].get("profile", {})]
    if profiled:
        lines += ["", "Where babelzoo's step goes (one profiled step, torch.profiler self time): matrix multiplies "
                      "(mm, addmm, bmm) and everything else (dropout, GELU, layer norm, softmax, AdamW, copies).", "",
                  "| config | dtype | operator s | matmul s | matmul share | matmuls alone, % of peak |",
                  "|---|---|---|---|---|---|"]
        for name, dname, p in profiled:
            lines.append(f"| {name} | {dname} | {p['op_s']:.2f} | {p['gemm_s']:.2f} | {100 * p['gemm_share']:.0f}% | "
                         f"{100 * p['gemm_efficiency']:.0f}% |")
    if report.get("memory"):
        lines += ["", "## Peak training memory (fresh subprocess per cell)", "",
                  "| config | dtype | babelzoo MiB | transformers MiB | ratio |", "|---|---|---|---|---|"]
        for name, r in report["memory"].items():
            for dname, d in r.items():
                lines.append(f"| {name} | {dname} | {d['babelzoo']['peak_bytes'] / 2**20:.0f} | "
                             f"{d['transformers']['peak_bytes'] / 2**20:.0f} | **{d['ratio']:.2f}×** |")
    if report.get("inference"):
        r = report["inference"]
        lines += ["", f"## Inference (base, {r['sentences']} sentences, {r['real_tokens']} real tokens, "
                      f"batch {r['batch']}, mean-pooled last layer)", "",
                  "babelzoo runs each length-sorted batch on its real tokens only (`BabelEncoder`'s default, "
                  "`unpad=True`); *babelzoo, padded* is the same encoder with `unpad=False`; *babelzoo, ATen "
                  "GEMM* is the unpadded encoder with its linear layers on ATen's matrix product, as "
                  "transformers' (`cpu_gemm(\"aten\")`; by default fp32 CPU inference runs them on oneDNN on "
                  "AMD processors with AVX-512, where MKL takes its AVX2 path).", "",
                  "| dtype | babelzoo real tok/s | babelzoo, ATen GEMM | babelzoo, padded | transformers | "
                  "transformers, sorted | ratio | ratio vs sorted | ratio vs babelzoo padded | tokens computed "
                  "bz / bz padded / hf | max abs Δ (vs hf / vs padded) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for dname, d in r["dtypes"].items():
            aten = (f"{d['babelzoo_aten']['real_tokens_per_s']:.0f} ({d['ratio_aten_vs_sorted']:.2f}× sorted)"
                    if "babelzoo_aten" in d else "–")
            padded = d.get("babelzoo_padded")  # none in runs from before the padded arm was measured
            pad_rate, pad_ratio, pad_tokens, pad_diff = (
                (f"{padded['real_tokens_per_s']:.0f}", f"{d['ratio_vs_padded']:.2f}×", padded["padded_tokens"],
                 f"{d['max_abs_diff_padded']:.1e}") if padded else ("–",) * 4)
            lines.append(
                f"| {dname} | {d['babelzoo']['real_tokens_per_s']:.0f} | {aten} | "
                f"{pad_rate} | {d['transformers']['real_tokens_per_s']:.0f} | "
                f"{d['transformers_sorted']['real_tokens_per_s']:.0f} | **{d['ratio']:.2f}×** | "
                f"**{d['ratio_vs_sorted']:.2f}×** | {pad_ratio} | {d['babelzoo']['padded_tokens']} / "
                f"{pad_tokens} / {d['transformers']['padded_tokens']} | "
                f"{d['max_abs_diff']:.1e} / {pad_diff} |")
    if report.get("trainer"):
        t = report["trainer"]
        lines += ["", f"## babelzoo Trainer (small, batch {t['batch_sentences']} sentences, num_workers=0)", "",
                  f"data_time {1000 * t['data_time_s']:.1f} ms of step_time {1000 * t['step_time_s']:.0f} ms: "
                  f"**{100 * t['data_share']:.2f}%** (median of {t['steps']} steps)."]
    if report.get("import_s") is not None:
        lines += ["", f"`import babelzoo`: {report['import_s']:.2f} s (submodules and torch load on first use); "
                      f"`import babelzoo` and a first tiny model (`create_model('mbert_tiny')`, which loads torch): "
                      f"{report.get('import_first_use_s', float('nan')):.2f} s (fresh interpreter, median of 3)."]
    if report.get("targets"):
        lines += ["", "## Targets", "", "| target | measured | goal | met |", "|---|---|---|---|"]
        for t in report["targets"]:
            lines.append(f"| {t['target']} | {t['value']:.3g} | {t['goal']} | {'yes' if t['met'] else '**no**'} |")
    return "\n".join(lines) + "\n"
