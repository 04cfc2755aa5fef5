#!/usr/bin/env python3
"""Grammar-constrained decoding, Ember beside llama.cpp's llama-server on the same GGUF files,
in one run: greedy decode tok/s free and under the JSON schema that ember-bench-grammar uses
(an array of 16 strings of 8-40 characters: the model keeps writing inside the structure), the
same prompt text, the same thread count, best of --reps interleaved runs per side.

Ember's numbers come from `ember-bench-grammar` (tools/bench/bench_grammar.cpp: the engine's
own decode loop, the full mask's cost per step too); llama-server's from its /completion
answers' own timings (predicted_per_second: the decode phase only, as Ember's), free with
ignore_eos and constrained with `json_schema` (llama.cpp compiles it to a GBNF grammar and
samples under it). Prints a markdown table, writes JSON (--json).

  tests/bench/grammar_peer.py --ember-bench build/engine/tools/bench/ember-bench-grammar \
      --llama-server BIN/llama-server --json build/bench/grammar-peer.json MODEL.gguf...
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

SCHEMA = {"type": "object", "properties": {"items": {"type": "array",
          "items": {"type": "string", "minLength": 8, "maxLength": 40}, "minItems": 16, "maxItems": 16}},
          "required": ["items"]}
PROMPT = "Write a list of sixteen short phrases as JSON:"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def llama_server_rates(binary, model, threads, tokens, reps):
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)
    proc = subprocess.Popen([binary, "-m", model, "-t", str(threads), "-tb", str(threads), "-c", "1024", "-np", "1",
                             "--host", "127.0.0.1", "--port", str(port)], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except Exception:
                time.sleep(0.5)
        else:
            raise RuntimeError(f"llama-server did not come up (log {log.name})")
        base = {"prompt": PROMPT, "n_predict": tokens, "temperature": 0, "cache_prompt": False}
        free = schema = 0.0
        n_schema = 0
        for _ in range(reps):  # interleaved, as ember-bench-grammar's
            a = post(url + "/completion", {**base, "ignore_eos": True})
            free = max(free, a["timings"]["predicted_per_second"])
            b = post(url + "/completion", {**base, "json_schema": SCHEMA})
            schema = max(schema, b["timings"]["predicted_per_second"])
            n_schema = b["timings"]["predicted_n"]
        return {"free_tok_s": free, "schema_tok_s": schema, "schema_tokens": n_schema}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def ember_rates(binary, models, threads, tokens, reps):
    out = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    subprocess.run([binary, *models, "--tokens", str(tokens), "--reps", str(reps), "--threads", str(threads),
                    "--json", out], check=True)
    with open(out) as f:
        rows = json.load(f)
    rows = rows["models"] if isinstance(rows, dict) and "models" in rows else rows
    return {r["model"]: r for r in rows}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember-bench", required=True)
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    ember = ember_rates(a.ember_bench, a.models, a.threads, a.tokens, a.reps)
    rows = []
    for m in a.models:
        name = os.path.basename(m)
        peer = llama_server_rates(a.llama_server, m, a.threads, a.tokens, a.reps)
        e = ember[name]
        rows.append({"model": name, "ember": {k: e[k] for k in ("free_tok_s", "schema_tok_s", "schema_tokens")},
                     "llama_server": peer})
    print("| model | Ember free | Ember schema | Ember slower | llama-server free | llama-server schema "
          "| llama-server slower | schema: Ember / llama-server |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        e, p = r["ember"], r["llama_server"]
        es = 100 * (1 - e["schema_tok_s"] / e["free_tok_s"])
        ps = 100 * (1 - p["schema_tok_s"] / p["free_tok_s"])
        print(f"| {r['model']} | {e['free_tok_s']:.2f} | {e['schema_tok_s']:.2f} | {es:.1f} % | {p['free_tok_s']:.2f} "
              f"| {p['schema_tok_s']:.2f} | {ps:.1f} % | {e['schema_tok_s'] / p['schema_tok_s']:.2f}x |")
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump({"threads": a.threads, "tokens": a.tokens, "reps": a.reps, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
