"""Inference on the device: the unpadded encoder against the padded one, generation against the
CPU, and a FAISS retrieval memory against exact search."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import torch

from benchmarks._speed.common import sync

from .common import Context, Skip, expect


def inference_model(ctx: Context, name: str):
    import babelzoo
    from babelzoo.datasets.tokenizer import Tokenizer

    tokenizer = Tokenizer.load(ctx.tokenizer_dir)
    torch.manual_seed(0)
    model = babelzoo.create_model(name, vocab_size=tokenizer.specials.vocab_size, pad_token_id=tokenizer.specials.pad)
    return model.to(ctx.device).eval(), tokenizer


def check_unpadded(ctx: Context) -> dict:
    """The unpadded encoder gives the padded encoder's vectors; sentences/s of both."""
    import numpy as np

    from babelzoo.evaluation.encoders import BabelEncoder

    model, tokenizer = inference_model(ctx, "xlmr_tiny" if ctx.dry else "xlmr_base")
    sentences = ctx.sentences[: ctx.size(4000, 64)]
    out: dict[str, Any] = {"model": "xlmr_tiny" if ctx.dry else "xlmr_base (random weights)",
                           "sentences": len(sentences)}
    for precision in ("fp32", "bf16"):
        cast = torch.autocast(ctx.device.type, dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()
        vectors, speed = {}, {}
        for unpad in (True, False):
            encoder = BabelEncoder("check", model, tokenizer, batch_size=ctx.size(256, 16), unpad=unpad)
            with cast:
                encoder.encode(sentences[: ctx.size(512, 8)])  # warm-up
                sync(ctx.device)
                start = time.perf_counter()
                vectors[unpad] = encoder.encode(sentences)
                sync(ctx.device)
            speed[unpad] = len(sentences) / (time.perf_counter() - start)
        cosine = float(np.min(np.sum(vectors[True] * vectors[False], axis=1)))
        out[precision] = {"min_cosine": cosine, "unpadded_sentences_per_s": speed[True],
                          "padded_sentences_per_s": speed[False], "speedup": speed[True] / speed[False]}
        bound = 0.9999 if precision == "fp32" else 0.995
        expect(cosine > bound, f"{precision}: unpadded and padded vectors differ (min cosine {cosine:.5f})")
    return out


def check_generate(ctx: Context) -> dict:
    """Greedy and beam search on the device give the CPU's sequences (fp32); bf16 speed."""
    model, tokenizer = inference_model(ctx, "mbart_tiny")
    sentences = ctx.sentences[: ctx.size(64, 6)]
    batch = tokenizer.batch_encode(sentences, max_length=48, padding=True, return_tensors="pt")
    cpu = model.to("cpu")
    settings = [("greedy", {"num_beams": 1}), ("beam4", {"num_beams": 4})]
    new = ctx.size(32, 8)
    expected = {label: cpu.generate(batch["input_ids"], batch["attention_mask"], max_new_tokens=new, **kw)
                for label, kw in settings}
    model.to(ctx.device)
    ids, mask = batch["input_ids"].to(ctx.device), batch["attention_mask"].to(ctx.device)
    out: dict[str, Any] = {"rows": len(sentences), "max_new_tokens": new}
    for label, kw in settings:
        got = model.generate(ids, mask, max_new_tokens=new, **kw).cpu()
        same = [bool(torch.equal(a, b)) for a, b in zip(got, expected[label])] if got.shape == expected[label].shape \
            else [False]
        out[label] = {"rows_equal_to_cpu": sum(same) / len(same)}
        with torch.autocast(ctx.device.type, dtype=torch.bfloat16):
            sync(ctx.device)
            start = time.perf_counter()
            model.generate(ids, mask, max_new_tokens=new, **kw)
            sync(ctx.device)
        out[label]["bf16_tokens_per_s"] = len(sentences) * new / (time.perf_counter() - start)
    # near-ties between random weights' logits can flip a token between kernels; most rows must agree
    expect(all(out[label]["rows_equal_to_cpu"] >= 0.9 for label, _ in settings), f"device and CPU disagree: {out}")
    return out


def check_faiss(ctx: Context) -> dict:
    """A FAISS memory on the device: the exact (Flat) index finds torch's exact neighbours."""
    try:
        import faiss  # noqa: F401
    except ImportError:
        raise Skip("faiss is not installed (pip install faiss-gpu, babelzoo's gpu extra)") from None
    from babelzoo.knowledge.memory import MemoryFormatError, RetrievalMemory

    n, d, k = ctx.size(200_000, 2000), ctx.size(256, 32), 10
    generator = torch.Generator().manual_seed(0)
    keys = torch.nn.functional.normalize(torch.randn(n, d, generator=generator), dim=1)
    queries = torch.nn.functional.normalize(torch.randn(ctx.size(2000, 50), d, generator=generator), dim=1)
    try:
        memory = RetrievalMemory(d, "Flat", metric="cosine", device=ctx.device.type)
    except MemoryFormatError as err:
        raise Skip(str(err)) from None
    start = time.perf_counter()
    memory.add(keys)
    built = time.perf_counter()
    _, ids = memory.search(queries, k=k)
    searched = time.perf_counter()
    exact = (queries @ keys.T).topk(k, dim=1).indices
    recall = float((ids[:, :, None] == exact[:, None, :]).any(-1).float().mean())
    out = {"keys": n, "dim": d, "on_gpu": memory.on_gpu, "recall_at_10": recall, "add_s": built - start,
           "search_queries_per_s": len(queries) / (searched - built)}
    expect(recall > 0.999, f"Flat index recall@10 {recall:.4f} against exact search")
    return out
