#!/usr/bin/env python3
"""Memory per sequence at given contexts, planned and allocated, for several model files: a hybrid
(qwen35: KV cache on the full-attention layers only, a fixed-size recurrent state on the others)
beside full-attention models of its size (issue #40).

Benchmark tooling only (Python standard library). Per file and context: planned = `ember fit
MODEL --ctx N --seqs 1` (its CPU column's "KV cache" and "recurrent state" rows); allocated =
`ember serve MODEL --ctx N --parallel 1` started, GET /v1/status, its memory entries' kv_cache
and state bytes (what the engine holds, Model::memory_use()), then stopped. Bytes do not depend
on the machine's load: one run is enough.

    tests/bench/seq_memory.py --ember build/engine/app/cli/ember --ctx 4096,32768 \\
        ~/.cache/ember/bench-models/qwen3.5-4b-Q4_K_M.gguf ~/.cache/ember/bench-models/qwen3-4b-Q4_K_M.gguf \\
        [--json OUT]
"""
import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from long_chat_bench import status  # noqa: E402
from prefix_bench import Server, free_port  # noqa: E402

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def planned(ember, model, ctx):
    """The CPU column's KV cache and recurrent state rows of `ember fit`, in bytes (rounded as printed)."""
    out = subprocess.run([ember, "fit", model, "--ctx", str(ctx), "--seqs", "1", "--vram", "0", "--ram", "64GiB"],
                         capture_output=True, text=True, check=True).stdout

    def row(name):
        m = re.search(rf"^\s*{name}\s+(\S+)\s+(\S+)\s+(\S+)", out, re.M)
        if not m or m.group(3) == "-":
            return 0
        return round(float(m.group(2)) * UNITS[m.group(3)])

    return row("KV cache"), row("recurrent state")


def allocated(ember, model, ctx):
    port = free_port()
    argv = [ember, "serve", model, "--port", str(port), "--parallel", "1", "--ctx", str(ctx), "--threads", "1",
            "--cache-ram", "0"]
    with Server("ember", argv, port):
        mem = status(port)["memory"]
    return sum(m.get("kv_cache", 0) for m in mem), sum(m.get("state", 0) for m in mem)


def mib(b):
    return f"{b / (1 << 20):.1f} MiB"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--ember", required=True)
    ap.add_argument("--ctx", default="4096,32768")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    for model in a.models:
        for ctx in (int(c) for c in a.ctx.split(",")):
            pk, ps = planned(a.ember, model, ctx)
            ak, ast = allocated(a.ember, model, ctx)
            rows.append({"model": os.path.basename(model), "ctx": ctx, "planned_kv": pk, "planned_state": ps,
                         "allocated_kv": ak, "allocated_state": ast})
            print(f"  {rows[-1]}", file=sys.stderr)
    print("| model | context | KV planned / allocated | state planned / allocated | per sequence, allocated |")
    print("|---|--:|--:|--:|--:|")
    for r in rows:
        print(f"| {r['model']} | {r['ctx']} | {mib(r['planned_kv'])} / {mib(r['allocated_kv'])} | "
              f"{mib(r['planned_state'])} / {mib(r['allocated_state'])} | "
              f"{mib(r['allocated_kv'] + r['allocated_state'])} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
