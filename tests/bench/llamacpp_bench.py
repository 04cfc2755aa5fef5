#!/usr/bin/env python3
"""Peer benchmark: llama.cpp (via llama-cpp-python) measured exactly like `ember bench`.

Benchmark tooling only, never part of the product. Run it with the Python that
scripts/llama-cpp-env.sh prints:

    PY="$(scripts/llama-cpp-env.sh | tail -1)"
    "$PY" tests/bench/llamacpp_bench.py MODEL.gguf [--pp 512] [--tg 128] [-r 3] [--threads 2]

Method (mirrors app/cli/cmd_bench.cpp):
  - one untimed warm-up repetition, then R timed repetitions;
  - pp<N>: KV cache cleared, then one eval of N fixed token ids as a single batch
    (n_batch = n_ubatch = 512, logits only for the last token);
  - tg<M>: KV cache cleared, a 1-token prefill (untimed), then M single-token evals, timed
    together; after each eval the last token's logits are read (one float touched);
  - tok/s per repetition = tokens / seconds; reported as mean, sample stddev and samples.

Prints one JSON line on stdout with the same shape as `ember bench --json`:
  {"model":..., "type":..., "backend": "llama.cpp", "results": [{"test": "pp512", "tokens": 512,
   "tok_s":..., "stddev":..., "samples": [...]}, {"test": "tg128", ...}]}
"""
import argparse
import json
import math
import os
import sys
import time

# ggml's general.file_type (enum llama_ftype) -> the usual name.
FTYPE_NAMES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
    10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
    16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 32: "BF16",
}


def bench_tokens(n, n_vocab):
    """The same LCG ids ember bench uses (any fixed ids < n_vocab would do)."""
    out, x = [], 12345
    for _ in range(n):
        x = (x * 1664525 + 1013904223) & 0xFFFFFFFF
        out.append(x % n_vocab)
    return out


def summarize(test, n, samples):
    mean = sum(samples) / len(samples)
    sd = math.sqrt(sum((s - mean) ** 2 for s in samples) / (len(samples) - 1)) if len(samples) > 1 else 0.0
    return {"test": test, "tokens": n, "tok_s": round(mean, 3), "stddev": round(sd, 3),
            "samples": [round(s, 3) for s in samples]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--flash-attn", action="store_true", help="llama.cpp flash attention (off by default, as in llama-cpp-python)")
    args = ap.parse_args()
    if args.pp > args.batch:
        ap.error("--pp must not exceed --batch (one batch, as ember bench does)")

    import llama_cpp
    from llama_cpp import Llama

    llm = Llama(
        model_path=args.model,
        n_threads=args.threads,
        n_threads_batch=args.threads,
        n_gpu_layers=0,
        n_ctx=args.ctx,
        n_batch=args.batch,
        n_ubatch=args.batch,
        logits_all=False,
        flash_attn=args.flash_attn,
        verbose=False,
    )
    n_vocab = llm.n_vocab()
    tokens = bench_tokens(max(args.pp, args.tg, 1), n_vocab)
    ctx = llm._ctx  # the low-level context wrapper, for clearing the KV cache and reading logits

    def clear():
        llm.reset()          # n_tokens = 0 (the next eval also drops cache cells >= 0)
        ctx.kv_cache_clear()  # llama_memory_clear: empty the KV cache outright

    def last_logit():
        return llama_cpp.llama_get_logits_ith(ctx.ctx, -1)[0]

    pp_s, tg_s = [], []
    sink = 0.0
    for r in range(-1, args.repetitions):  # r = -1 is the warm-up
        if args.pp > 0:
            clear()
            t0 = time.perf_counter()
            llm.eval(tokens[: args.pp])
            sink += last_logit()
            tpp = time.perf_counter() - t0
        if args.tg > 0:
            clear()
            llm.eval(tokens[:1])
            t0 = time.perf_counter()
            for i in range(1, args.tg + 1):
                llm.eval([tokens[i % max(args.pp, 1)]])
                sink += last_logit()
            ttg = time.perf_counter() - t0
        if r < 0:
            continue
        if args.pp > 0:
            pp_s.append(args.pp / tpp)
        if args.tg > 0:
            tg_s.append(args.tg / ttg)

    meta = llm.metadata or {}
    try:
        ftype = FTYPE_NAMES.get(int(meta.get("general.file_type", -1)), meta.get("general.file_type", "?"))
    except ValueError:
        ftype = meta.get("general.file_type", "?")
    results = []
    if pp_s:
        results.append(summarize(f"pp{args.pp}", args.pp, pp_s))
    if tg_s:
        results.append(summarize(f"tg{args.tg}", args.tg, tg_s))
    out = {
        "model": meta.get("general.name", os.path.basename(args.model)),
        "type": ftype,
        "desc": llm._model.desc(),
        "size_bytes": os.path.getsize(args.model),
        "backend": "llama.cpp",
        "version": f"llama-cpp-python {llama_cpp.__version__}",
        "threads": args.threads,
        "flash_attn": args.flash_attn,
        "results": results,
        "checksum": sink if math.isfinite(sink) else str(sink),
    }
    print(json.dumps(out))
    llm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
