"""Generation speed side by side with Hugging Face transformers: a BART model with the same
random weights in both libraries (transformers' ``BartForConditionalGeneration`` saved, then
imported by babelzoo's converter), the same source batch, greedy and beam-search decoding,
interleaved (babelzoo, transformers, transformers, babelzoo, ...) so that a busy machine slows
both sides alike.

    python benchmarks/generate_speed.py                  # bart_base sizes, batch 32, greedy + beam 4
    python benchmarks/generate_speed.py --quick          # smoke run (tiny sizes)
    python benchmarks/generate_speed.py --device cuda --dtype bf16
    python benchmarks/generate_speed.py --threads 1 --new-tokens 16 --repeats 2   # a shared CPU

New tokens/s = generated tokens (batch × new positions of the returned ids) over the median
wall time of the timed repeats. Both sides run without gradients, with their key/value caches,
and must return identical ids up to each row's end token (checked on every run); here the end
token is one the model never produces, so every row runs to ``--new-tokens``. Writes JSON (``--out``) and a Markdown table
next to it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

from benchmarks._results import default_out, write_results  # noqa: E402

SIZES = {  # BartConfig fields
    "base": dict(vocab_size=50265, d_model=768, encoder_layers=6, decoder_layers=6, encoder_attention_heads=12,
                 decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072),
    "tiny": dict(vocab_size=1000, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                 decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128),
}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def models(size: str, device: str, dtype: torch.dtype):
    """transformers' BART with random weights and babelzoo's import of the same checkpoint."""
    import transformers

    from babelzoo.zoo.convert import import_hf

    torch.manual_seed(0)
    config = transformers.BartConfig(**SIZES[size], forced_eos_token_id=None, forced_bos_token_id=None,
                                     dropout=0.0, max_position_embeddings=1024)
    theirs = transformers.BartForConditionalGeneration(config).eval()
    with tempfile.TemporaryDirectory() as folder:
        theirs.save_pretrained(folder)
        ours = import_hf(folder).eval()
    return ours.to(device, dtype), theirs.to(device, dtype)


def run(model, src, mask, options, library: str):
    with torch.no_grad():
        if library == "babelzoo":
            return model.generate(src, attention_mask=mask, **options)
        return model.generate(src, attention_mask=mask, do_sample=False, forced_eos_token_id=None, min_length=0,
                              **options)


def up_to_end(ids: torch.Tensor, eos) -> torch.Tensor:
    """``ids`` with every position after a row's first end token set to -1: what follows the end
    is filler, and transformers' beam search fills with the end token where the pad id is 0 (its
    ``pad_token_id or eos_token_id`` reads id 0 as missing), babelzoo always with the pad id."""
    if eos is None:
        return ids
    ended = ids.eq(eos).long().cumsum(1)
    after = (ended - ids.eq(eos).long()) > 0  # strictly after the first end token
    return ids.masked_fill(after, -1)


def measure(ours, theirs, src, mask, options, repeats: int, device: str) -> dict:
    """Median seconds per call of each side (one warm-up call each), interleaved."""
    times = {"babelzoo": [], "transformers": []}
    expected = run(theirs, src, mask, options, "transformers")
    got = run(ours, src, mask, options, "babelzoo")
    if got.shape != expected.shape or not torch.equal(*(up_to_end(x, options.get("eos_token_id")) for x in (got, expected))):
        raise SystemExit(f"outputs differ with {options}: babelzoo {tuple(got.shape)}, transformers "
                         f"{tuple(expected.shape)}")
    order = ["babelzoo", "transformers"]
    for r in range(repeats):
        for library in order if r % 2 == 0 else order[::-1]:
            model = ours if library == "babelzoo" else theirs
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            run(model, src, mask, options, library)
            if device == "cuda":
                torch.cuda.synchronize()
            times[library].append(time.perf_counter() - start)
    new_tokens = expected.shape[0] * (expected.shape[1] - 1)
    written = int(up_to_end(expected, options.get("eos_token_id"))[:, 1:].ge(0).sum())  # up to each end token
    rows = {lib: new_tokens / statistics.median(t) for lib, t in times.items()}
    return {"new_tokens": new_tokens, "written_tokens": written, "babelzoo_tokens_per_s": rows["babelzoo"],
            "transformers_tokens_per_s": rows["transformers"], "ratio": rows["babelzoo"] / rows["transformers"],
            "seconds": {lib: statistics.median(t) for lib, t in times.items()}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="base")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--source-length", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="fp32")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads (default: torch's); 1 on a machine other jobs share")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, batch 4, 8 new tokens, 2 repeats")
    parser.add_argument("--out", type=Path, default=default_out("generate_speed"))
    args = parser.parse_args(argv)
    if args.quick:
        args.size, args.batch, args.new_tokens, args.repeats = "tiny", 4, 8, 2
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    ours, theirs = models(args.size, args.device, DTYPES[args.dtype])
    g = torch.Generator().manual_seed(0)
    vocab = SIZES[args.size]["vocab_size"]
    src = torch.randint(4, vocab, (args.batch, args.source_length), generator=g).to(args.device)
    mask = torch.ones_like(src)
    mask[1::2, args.source_length // 2:] = 0  # every other source half as long
    src = src.masked_fill(mask.eq(0), theirs.config.pad_token_id)
    # an end token never generated first: every row runs to the limit (both sides alike)
    common = dict(max_new_tokens=args.new_tokens, eos_token_id=3, pad_token_id=theirs.config.pad_token_id,
                  decoder_start_token_id=theirs.config.decoder_start_token_id)
    results = {"command": "python benchmarks/generate_speed.py " + " ".join(sys.argv[1:] if argv is None else argv),
               "size": args.size, "batch": args.batch, "source_length": args.source_length,
               "new_tokens_per_row": args.new_tokens, "repeats": args.repeats, "device": args.device,
               "dtype": args.dtype, "threads": torch.get_num_threads(), "runs": {}}
    for name, options in (("greedy", dict(num_beams=1)), (f"beam{args.beams}", dict(num_beams=args.beams))):
        row = measure(ours, theirs, src, mask, {**common, **options}, args.repeats, args.device)
        results["runs"][name] = row
        print(f"{name}: babelzoo {row['babelzoo_tokens_per_s']:.1f} new tokens/s, transformers "
              f"{row['transformers_tokens_per_s']:.1f}, ratio {row['ratio']:.2f} (identical ids)", flush=True)
    write_results(args.out, results, markdown, "generate_speed")
    return 0


def markdown(results: dict) -> str:
    table = ["| decoding | babelzoo tokens/s | transformers tokens/s | ratio |", "|---|---|---|---|"]
    table += [f"| {name} | {row['babelzoo_tokens_per_s']:.1f} | {row['transformers_tokens_per_s']:.1f} | "
              f"{row['ratio']:.2f} |" for name, row in results["runs"].items()]
    return "\n".join(table)


if __name__ == "__main__":
    sys.exit(main())
