#!/usr/bin/env python3
"""Concurrent streams with and without --lookup, by the server's CPU time, for two binaries.

Benchmark tooling only, never part of the product; Python standard library only. Reuses
lookup_peer.py's server start and streaming client. For each binary, each of 1 and --streams
concurrent streams of lookup_peer's code-edit prompt, with and without --lookup; the arms
interleaved, --reps rounds. Reports generated tokens per second of the ember serve process's CPU
time (utime + stime, /proc; --threads 1 makes it one core's work), which a loaded machine moves
far less than wall time, and wall tok/s beside it. One JSON line per run, then a summary.

    tests/bench/lookup_streams.py --model SmolLM2-135M-Instruct.Q4_1.gguf \
        --ember base=/path/to/main/ember --ember new=build/engine/app/cli/ember [--streams 16]
"""
import argparse
import json
import os
import statistics
import sys
import threading
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lookup_peer as lp  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def run(a, binary, lookup, streams):
    cfg = types.SimpleNamespace(model=a.model, ember=binary, threads=a.threads, tokens=a.tokens, streams=streams)
    port = lp.free_port()
    proc = lp.start(lp.ember_cmd(cfg, port, lookup, streams), port)
    try:
        lp.stream_chat(port, "Hello", 8)
        c0, t0 = cpu_seconds(proc.pid), time.perf_counter()
        out = [None] * streams

        def one(i):
            out[i] = lp.stream_chat(port, lp.PROMPTS["code"], a.tokens)[0]

        threads = [threading.Thread(target=one, args=(i,)) for i in range(streams)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        cpu, wall = cpu_seconds(proc.pid) - c0, time.perf_counter() - t0
        spec = lp.get_json(port, "/v1/status").get("speculation", {})
    finally:
        proc.kill()
        proc.wait()
    return {"tokens": sum(len(r) for r in out), "cpu_s": cpu, "wall_s": wall,
            "drafted": spec.get("drafted_tokens", 0), "accepted": spec.get("accepted_tokens", 0)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--ember", action="append", required=True, help="NAME=PATH, repeatable")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--streams", type=int, default=16)
    a = p.parse_args()
    bins = [e.split("=", 1) for e in a.ember]
    rows = []
    for rep in range(a.reps):
        for name, path in bins:
            for streams in (a.streams, 1):
                for lookup in (False, True):
                    load = os.getloadavg()[0]
                    r = run(a, path, lookup, streams)
                    r.update(rep=rep, bin=name, streams=streams, lookup=lookup, load=round(load, 2))
                    print(json.dumps(r), flush=True)
                    rows.append(r)
    print("| binary | streams | tok/CPU-s plain | with --lookup | ratio | wall ratio | drafted/accepted | load |")
    print("|---|---|---|---|---|---|---|---|")
    for name, _ in bins:
        for streams in (a.streams, 1):
            sel = [r for r in rows if r["bin"] == name and r["streams"] == streams]
            pl = [r for r in sel if not r["lookup"]]
            lk = [r for r in sel if r["lookup"]]
            cp = [r["tokens"] / r["cpu_s"] for r in pl]
            cl = [r["tokens"] / r["cpu_s"] for r in lk]
            wall = statistics.mean(r["tokens"] / r["wall_s"] for r in lk) / statistics.mean(
                r["tokens"] / r["wall_s"] for r in pl)
            loads = [r["load"] for r in sel]
            print(f"| {name} | {streams} | {' '.join(f'{x:.0f}' for x in cp)} | {' '.join(f'{x:.0f}' for x in cl)} | "
                  f"{statistics.mean(cl) / statistics.mean(cp):.3f}x | {wall:.2f}x | {lk[-1]['drafted']}/{lk[-1]['accepted']} | "
                  f"{min(loads):.1f}-{max(loads):.1f} |")


if __name__ == "__main__":
    main()
