#!/usr/bin/env python3
"""Quality table of Ember's quantizer against llama.cpp's, from the same F16 source.

For each model: `ember quantize SRC F16` makes the F16 source (only quantized files are
shipped), `ember perplexity F16 --save-logits` the base run; then for each type both
quantizers (`ember quantize`, `llama-quantize [--pure]` built by scripts/llama-cpp-tools.sh)
write a file, and ONE tool (ours: `ember perplexity --kl-divergence`) measures both, so the
comparison is of the files, not of the tools. Both files are scored on the same tokens against
the same base, so the table also gives their paired difference, mean KL(ours) - KL(llama.cpp)
token by token with its standard error (the two means' own errors are mostly the text's
variation, common to both files). With --cross-check TYPE, llama-perplexity also
measures that type's files against the same base file (the format is llama-perplexity's own).
With --dequantized, each file is also measured as its own dequantization (`ember quantize FILE
F16`, then the same KL run): float weights take the engine's float path, so the engine's 8-bit
activation rounding, common to both files and the same size as the smallest differences
between them, drops out and what is left is what the quantizer changed in the weights.

Prints a table and writes JSON (--json). Files are cached in --work, so a rerun only
measures what is missing. The quality bar: KL(ours) <= KL(llama.cpp), and PPL(ours) no more than 1 % above llama.cpp's.

  tests/bench/quant_quality.py --ember build/engine/app/cli/ember --chunks 4 --json out.json
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS_DIR = os.environ.get("EMBER_TEST_MODELS_DIR", os.path.expanduser("~/.cache/ember/test-models"))
MODELS = {
    "smollm2": os.path.join(MODELS_DIR, "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "gemma3": os.path.join(MODELS_DIR, "gemma-3-270m-q4_k_m.gguf"),
}
TYPES = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M", "Q5_K_M"]
MIXES = {"Q4_K_M", "Q5_K_M"}  # llama-quantize's own mix rules; the others run with --pure


def log(msg):
    print(f"[quant_quality] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    log(" ".join(cmd))
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r.stdout, time.time() - t0


def parse_report(text):
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+): ([-\d.]+)(?: \+/- ([-\d.]+))?$", line.strip())
        if m:
            out[m.group(1)] = float(m.group(2))
            if m.group(3):
                out[m.group(1) + "_err"] = float(m.group(3))
    return out


def tensor_types(ember, path):
    text, _ = run([ember, "info", path, "--tensors"])
    return dict(re.findall(r"^\s+(\S+\.weight)\s+(\w+)\s+\[", text, re.M))


def measure(args, model, base):
    """The KL report of one file against the base, and its per-token KL values (cached)."""
    cache, values = model + ".kl.txt", model + ".kl-values.txt"
    if not os.path.exists(cache) or not os.path.exists(values):
        out, secs = run([args.ember, "perplexity", model, "--kl-divergence", base, "--kl-values", values,
                         "--threads", str(args.threads), "--quiet"])
        with open(cache, "w") as f:
            f.write(out + f"seconds: {secs:.1f}\n")
    with open(cache) as f:
        report = parse_report(f.read())
    with open(values) as f:
        report["kl_values"] = [float(v) for v in f]
    return report


def mean_err(xs):
    """Mean of per-token values and its standard error."""
    n = len(xs)
    if n < 2:
        sys.exit(f"too few per-token KL values ({n})")
    mean = sum(xs) / n
    var = sum((x - mean) ** 2 for x in xs) / (n - 1)
    return mean, (var / n) ** 0.5


def paired(a, b):
    """Mean of a[i] - b[i] and its standard error: the two files' KL token by token, so the
    text's own variation (most of each mean's error) cancels."""
    if len(a) != len(b):
        sys.exit(f"per-token KL values differ in count ({len(a)} vs {len(b)})")
    return mean_err([x - y for x, y in zip(a, b)])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ember", default=os.path.join(ROOT, "build/engine/app/cli/ember"))
    ap.add_argument("--models", default="smollm2,gemma3")
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=-1, help="chunks per run (-1: the whole text)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default=os.path.expanduser("~/.cache/ember/quant-quality"))
    ap.add_argument("--cross-check", default="", help="a TYPE also measured with llama-perplexity")
    ap.add_argument("--json", default="")
    ap.add_argument("--dequantized", action="store_true",
                    help="also measure each file's F16 dequantization (the weights alone, no activation rounding)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    out, _ = run([os.path.join(ROOT, "scripts/llama-cpp-tools.sh"), "llama-quantize", "llama-perplexity"])
    peer_bin = out.strip().splitlines()[-1]
    rows = []
    for name in args.models.split(","):
        src = MODELS[name]
        if not os.path.exists(src):
            sys.exit(f"missing {src} (run scripts/fetch-test-models.sh)")
        work = os.path.join(args.work, f"{name}-c{args.ctx}-n{args.chunks}")
        os.makedirs(work, exist_ok=True)
        f16 = os.path.join(work, "f16.gguf")
        if not os.path.exists(f16):
            run([args.ember, "quantize", src, f16, "F16", "--quiet"])
        base = os.path.join(work, "base.kld")
        if not os.path.exists(base):
            cmd = [args.ember, "perplexity", f16, "-f", args.text, "--ctx", str(args.ctx), "--save-logits", base,
                   "--threads", str(args.threads), "--quiet"]
            if args.chunks > 0:
                cmd += ["--chunks", str(args.chunks)]
            run(cmd)
        for t in args.types.split(","):
            ours, peer = os.path.join(work, f"ember-{t}.gguf"), os.path.join(work, f"llama-{t}.gguf")
            t_ours = t_peer = None
            if not os.path.exists(ours):
                _, t_ours = run([args.ember, "quantize", f16, ours, t, "--quiet", "--threads", str(args.threads)])
            if not os.path.exists(peer):
                cmd = [os.path.join(peer_bin, "llama-quantize")] + ([] if t in MIXES else ["--pure"])
                _, t_peer = run(cmd + [f16, peer, t, str(args.threads)])
            same_layout = tensor_types(args.ember, ours) == tensor_types(args.ember, peer)
            a, b = measure(args, ours, base), measure(args, peer, base)
            row = {"model": name, "type": t, "same_layout": same_layout,
                   "bytes_ember": os.path.getsize(ours), "bytes_llama": os.path.getsize(peer),
                   "kld_ember": a["kld_mean"], "kld_ember_err": a["kld_mean_err"],
                   "kld_llama": b["kld_mean"], "kld_llama_err": b["kld_mean_err"],
                   "ppl_base": a["ppl_base"], "ppl_ember": a["ppl"], "ppl_llama": b["ppl"],
                   "top1_ember": a["same_top_percent"], "top1_llama": b["same_top_percent"],
                   "quantize_s_ember": t_ours, "quantize_s_llama": t_peer}
            row["kld_diff"], row["kld_diff_err"] = paired(a["kl_values"], b["kl_values"])
            if args.dequantized:
                dq = []
                for path in (ours, peer):
                    f16_of = path[:-len(".gguf")] + ".dq-f16.gguf"
                    if not os.path.exists(f16_of):
                        run([args.ember, "quantize", path, f16_of, "F16", "--quiet"])
                    dq.append(measure(args, f16_of, base))
                # From the per-token values: the report's 6 decimals round these means to 0.
                row["kld_ember_dq"], row["kld_ember_dq_err"] = mean_err(dq[0]["kl_values"])
                row["kld_llama_dq"], row["kld_llama_dq_err"] = mean_err(dq[1]["kl_values"])
                row["kld_dq_diff"], row["kld_dq_diff_err"] = paired(dq[0]["kl_values"], dq[1]["kl_values"])
            row["kl_ok"] = row["kld_ember"] <= row["kld_llama"]
            row["ppl_ok"] = row["ppl_ember"] <= 1.01 * row["ppl_llama"]  # no worse than 1 %
            if t == args.cross_check:
                for who, path in (("ember", ours), ("llama", peer)):
                    text, _ = run([os.path.join(peer_bin, "llama-perplexity"), "-m", path, "--kl-divergence-base", base,
                                   "--kl-divergence", "-t", str(args.threads), "-c", str(args.ctx)])
                    m = re.search(r"Mean\s+KLD:\s+([-\d.]+)", text)
                    row[f"kld_{who}_by_llama_perplexity"] = float(m.group(1)) if m else None
            rows.append(row)
            log(json.dumps(row))
            if args.json:  # after every row: a long run that is stopped keeps what it measured
                with open(args.json, "w") as f:
                    json.dump({"ctx": args.ctx, "chunks": args.chunks, "text": args.text, "rows": rows}, f, indent=1)
    hdr = f"{'model':8} {'type':7} {'KLD ember':>18} {'KLD llama.cpp':>18} {'PPL ember':>10} {'PPL llama':>10} " \
          f"{'PPL base':>9} {'top1 e/l %':>13} {'KLD e-l, paired':>20} layout  bar"
    print(hdr)
    for r in rows:
        print(f"{r['model']:8} {r['type']:7} {r['kld_ember']:9.5f}±{r['kld_ember_err']:.5f}"
              f" {r['kld_llama']:9.5f}±{r['kld_llama_err']:.5f} {r['ppl_ember']:10.4f} {r['ppl_llama']:10.4f}"
              f" {r['ppl_base']:9.4f} {r['top1_ember']:6.2f}/{r['top1_llama']:6.2f}"
              f" {r['kld_diff']:+10.6f}±{r['kld_diff_err']:.6f}"
              f" {'same' if r['same_layout'] else 'DIFF':6}  {'ok' if r['kl_ok'] and r['ppl_ok'] else 'MISS'}")
        if "kld_dq_diff" in r:
            print(f"{'':8} {'dequantized to F16':18} {r['kld_ember_dq']:.3e}±{r['kld_ember_dq_err']:.1e}"
                  f" {r['kld_llama_dq']:.3e}±{r['kld_llama_dq_err']:.1e}"
                  f"  paired {r['kld_dq_diff']:+.3e}±{r['kld_dq_diff_err']:.1e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ctx": args.ctx, "chunks": args.chunks, "text": args.text, "rows": rows}, f, indent=1)
    return 0 if all(r["kl_ok"] and r["ppl_ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
