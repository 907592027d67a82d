"""The Markdown page of a GPU check: one line per check, the training runs, the speed cells."""

from __future__ import annotations


def headline(name: str, result: dict) -> str:
    if result["status"] != "pass":
        return result.get("reason", "")[:300]
    if name == "peaks":
        return (f"bf16 {result['matmul_bf16_tflops']:.0f}, fp16 {result['matmul_fp16_tflops']:.0f}, tf32 "
                f"{result['matmul_tf32_tflops']:.0f}, fp32 {result['matmul_fp32_tflops']:.1f} TFLOP/s; copy "
                f"{result['copy_gb_per_s']:.0f} GB/s")
    if name == "train":
        cells = result["cells"]
        return (f"{len(cells)} runs, families {', '.join(result['families'])}; "
                f"{sum(c['skipped'] for c in cells.values())} fp16 steps skipped in all")
    if name == "grad_scaler":
        return f"overflow skipped on the device, scale {result['scale_before']:.0f} → {result['scale_after']:.0f}"
    if name == "fused_adamw":
        return f"fused vs foreach: relative difference {result['update_relative_difference']:.1e}"
    if name == "sdpa":
        row = result["padding_mask"]
        return "padding mask: " + ", ".join(f"{k} {v:.1e}" if isinstance(v, float) else f"{k} none"
                                            for k, v in row.items())
    if name == "unpadded":
        return ", ".join(f"{p}: cos ≥ {result[p]['min_cosine']:.5f}, {result[p]['speedup']:.2f}× padded"
                         for p in ("fp32", "bf16"))
    if name == "generate":
        return ", ".join(f"{k}: {result[k]['rows_equal_to_cpu']:.0%} rows = CPU, {result[k]['bf16_tokens_per_s']:.0f} tok/s"
                         for k in ("greedy", "beam4"))
    if name == "compile":
        return (f"loss Δ {result['max_relative_loss_difference']:.1e}; step {result['eager_step_s'] * 1000:.1f} → "
                f"{result['compiled_step_s'] * 1000:.1f} ms")
    if name == "faiss":
        return f"recall@10 {result['recall_at_10']:.4f}, {result['search_queries_per_s']:.0f} queries/s, on_gpu {result['on_gpu']}"
    if name == "fsdp":
        resumed = result.get("sharded_resume_max_relative_loss_difference")  # not in runs before it was checked
        return (f"loss Δ {result['max_relative_loss_difference']:.1e}, checkpoint {', '.join(result['checkpoints'])}"
                + (f"; sharded checkpoint resumed: loss Δ {resumed:.1e}" if resumed is not None else ""))
    if name == "speed":
        train = [f"train {k} {v['ratio']:.2f}× transformers (MFU {v['babelzoo_mfu']:.0%})"
                 for k, v in result["training"].items()]
        infer = [f"inference {k} {v['ratio']:.2f}× ({v['ratio_vs_sorted']:.2f}× sorted)"
                 for k, v in result["inference"].items()]
        return "; ".join(train + infer)
    return ""


def markdown(report: dict) -> str:
    lines = [f"# GPU check ({'dry run, CPU' if report['dry_run'] else report['machine'].get('gpu', 'GPU')})", "",
             f"`{report['command']}` at {report['commit']}, {report['date']}; {report['wall_s']:.0f} s in all.", "",
             "| check | status | s | result |", "| --- | --- | ---: | --- |"]
    for name, result in report["checks"].items():
        lines.append(f"| {name} | {result['status']} | {result['seconds']:.1f} | {headline(name, result)} |")
    train_cells = report["checks"].get("train", {}).get("cells")
    if train_cells:
        lines += ["", "## Training through the recipes", "",
                  "Start-up figures, not speeds: most of these few steps meet a new shape or precision, whose "
                  "first use loads kernels and builds cuDNN plans (see the module docstring).", "",
                  "| family / model / precision | parameters | loss first → last | skipped | ms/step | tokens/s | MFU | peak MB |",
                  "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
        for key, c in train_cells.items():
            if "error" in c:
                lines.append(f"| {key} | | {c['error'][:120]} | | | | | |")
                continue
            mfu = f"{c['mfu']:.3f}" if c["mfu"] is not None else ""
            peak = f"{c['peak_memory_mb']:.0f}" if c["peak_memory_mb"] is not None else ""
            lines.append(f"| {key} | {c['parameters']:,} | {c['losses'][0]:.3f} → {c['losses'][-1]:.3f} | "
                         f"{c['skipped']} | {c['step_s'] * 1000:.1f} | {c['tokens_per_s']:.0f} | {mfu} | {peak} |")
    speed = report["checks"].get("speed", {})
    if speed.get("markdown"):
        lines += ["", "## benchmarks/speed.py cells", "", speed["markdown"]]
    return "\n".join(lines) + "\n"
