"""Inference on real sentences of mixed length: babelzoo's encoder (length-sorted batches run on
their real tokens only) against transformers batching in input order and sorted by length, and
babelzoo's padded pass over the same sorted batches."""

from __future__ import annotations

import numpy as np
import torch

from babelzoo.evaluation.encoders import BabelEncoder
from babelzoo.zoo.layers.linear import cpu_gemm

from .common import DTYPES, autocast, build_pair, load_average, median, paired_ratio, timed


def hf_encode(model, rows: list[list[int]], batch_size: int, pad: int, device, order=None) -> tuple:
    """Mean-pooled last layer of transformers' BertModel, batches in ``order`` (input order by
    default), each padded to its longest row; returns the vectors and the padded token count."""
    order = list(range(len(rows))) if order is None else order
    out = np.zeros((len(rows), model.config.hidden_size), dtype=np.float32)
    padded = 0
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            index = order[start:start + batch_size]
            width = max(len(rows[i]) for i in index)
            ids = torch.full((len(index), width), pad, dtype=torch.long)
            mask = torch.zeros((len(index), width), dtype=torch.long)
            for r, i in enumerate(index):
                ids[r, :len(rows[i])] = torch.tensor(rows[i])
                mask[r, :len(rows[i])] = 1
            ids, mask = ids.to(device), mask.to(device)
            hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            out[index] = ((hidden * weights).sum(1) / weights.sum(1)).float().cpu().numpy()
            padded += ids.numel()
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.maximum(norms, 1e-12), padded


def inference_section(rows: list[list[int]], tok, dtypes: list[str], args, device, log) -> dict:
    ours, hf = build_pair("base", device, args.seed)
    ours.eval(), hf.eval()
    encoder = BabelEncoder("bert_base", ours, tok, batch_size=args.infer_batch, max_length=args.seq)
    padded_encoder = BabelEncoder("bert_base", ours, tok, batch_size=args.infer_batch, max_length=args.seq,
                                  unpad=False)
    pad = tok.specials.pad
    by_length = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    real = sum(len(r) for r in rows)
    def aten_gemm():
        with cpu_gemm("aten"):
            return encoder.encode_ids(rows), None

    sides = {
        "babelzoo": lambda: (encoder.encode_ids(rows), None),
        "babelzoo_padded": lambda: (padded_encoder.encode_ids(rows), None),
        "transformers": lambda: hf_encode(hf.bert, rows, args.infer_batch, pad, device),
        "transformers_sorted": lambda: hf_encode(hf.bert, rows, args.infer_batch, pad, device, by_length),
    }
    if device.type == "cpu":  # babelzoo on the matrix product transformers uses: the unpadding alone
        sides["babelzoo_aten"] = aten_gemm
    ours_padded = sum(len(by_length[i:i + args.infer_batch]) * max(len(rows[j]) for j in by_length[i:i + args.infer_batch])
                      for i in range(0, len(rows), args.infer_batch))
    result = {"sentences": len(rows), "real_tokens": real, "batch": args.infer_batch, "dtypes": {}}
    for dname in dtypes:
        times: dict[str, list[float]] = {k: [] for k in sides}
        cpu: dict[str, list[float]] = {k: [] for k in sides}
        vectors, padded = {}, {"babelzoo": real if encoder.unpad else ours_padded, "babelzoo_padded": ours_padded,
                               "babelzoo_aten": real}
        warm = rows[:2 * args.infer_batch]
        with autocast(device, DTYPES[dname]):  # warm-up on a few batches
            encoder.encode_ids(warm)
            padded_encoder.encode_ids(warm)
            hf_encode(hf.bert, warm, args.infer_batch, pad, device)
        for i in range(args.infer_repeats):
            for side in (list(sides) if i % 2 == 0 else list(sides)[::-1]):
                holder = {}
                with autocast(device, DTYPES[dname]):
                    w, c = timed(lambda: holder.setdefault("v", sides[side]()), device)
                times[side].append(w)
                cpu[side].append(c)
                vectors.setdefault(side, holder["v"][0])
                if holder["v"][1] is not None:
                    padded[side] = holder["v"][1]
        out = {}
        for side in sides:
            t = median(times[side])
            out[side] = {"real_tokens_per_s": real / t, "seconds": t, "seconds_all": times[side],
                         "padded_tokens": padded[side]}
            if device.type == "cpu":
                out[side]["cpu_time_real_tokens_per_s"] = real / (median(cpu[side]) / torch.get_num_threads())
        out["max_abs_diff"] = float(np.abs(vectors["babelzoo"] - vectors["transformers"]).max())
        out["max_abs_diff_padded"] = float(np.abs(vectors["babelzoo"] - vectors["babelzoo_padded"]).max())
        paired = {side: {"wall": times[side], "cpu": cpu[side]} for side in sides}
        out["ratio"] = paired_ratio(paired, "wall")
        out["ratio_vs_sorted"] = paired_ratio(paired, "wall", theirs="transformers_sorted")
        out["ratio_vs_padded"] = paired_ratio(paired, "wall", theirs="babelzoo_padded")
        if "babelzoo_aten" in sides:
            out["ratio_aten_vs_sorted"] = paired_ratio(paired, "wall", ours="babelzoo_aten", theirs="transformers_sorted")
        if device.type == "cpu":
            out["ratio_cpu_time"] = paired_ratio(paired, "cpu")
        out["load_average"] = load_average()
        result["dtypes"][dname] = out
        log(f"[inference {dname}] babelzoo {out['babelzoo']['real_tokens_per_s']:.0f} (padded "
            f"{out['babelzoo_padded']['real_tokens_per_s']:.0f}), transformers "
            f"{out['transformers']['real_tokens_per_s']:.0f} (sorted {out['transformers_sorted']['real_tokens_per_s']:.0f}) "
            f"real tok/s; ratio {out['ratio']:.2f}, vs sorted {out['ratio_vs_sorted']:.2f}; padded tokens {padded}; "
            f"max |Δ| {out['max_abs_diff']:.1e}")
    return result
