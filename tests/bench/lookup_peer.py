#!/usr/bin/env python3
"""Prompt lookup beside llama.cpp's own n-gram speculation, and 16 streams with and without it.

Benchmark tooling only, never part of the product; Python standard library only.
scripts/bench-lookup.sh --peer runs it:

    tests/bench/lookup_peer.py --model M.gguf --ember build/engine/app/cli/ember \
        --llama-server ~/.cache/ember/llama-tools/build-0.3.36/bin/llama-server \
        [--threads 1] [--tokens 160] [--reps 3] [--streams 16] [--json OUT.json]

Four servers on the same file, one after another, with the same threads and context:
    ember serve M                         ember serve M --lookup
    llama-server M                        llama-server M --spec-type ngram-simple
Each answers the prompts of scripts/bench-lookup.sh (a code edit: the model rewrites a function
with a rename, so the answer repeats the prompt; and an open-ended story) through
/v1/chat/completions (the model's own chat template on both), greedy, max_tokens --tokens,
streamed; decode tok/s is measured by this client the same way for both: (tokens - 1) / (time
of the last token - time of the first), the median of --reps. The acceptance rate comes from
each server's own counters: Ember's /v1/status "speculation", llama-server's final "timings"
(draft_n, draft_n_accepted). Then for Ember only: --streams concurrent streams of the code edit
(each its own connection), total generated tokens / wall time, with and without --lookup.
Prints markdown tables last.
"""
import argparse
import http.client
import json
import socket
import subprocess
import sys
import threading
import time

FUNCTION = """def count_words(lines):
    count = 0
    seen = set()
    for line in lines:
        for word in line.split():
            word = word.strip().lower()
            if word in seen:
                continue
            seen.add(word)
            count += 1
    return count"""
PROMPTS = {
    "code": "Rename the variable `count` to `total` in this Python function. Reply with only the whole function.\n\n"
    + FUNCTION,
    "open": "Write a short story about a lighthouse keeper who finds a message in a bottle.",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, proc, seconds=180):
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError("server did not come up")


def get_json(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path)
    return json.loads(c.getresponse().read())


def stream_chat(port, text, tokens):
    """One streamed greedy answer: (token arrival times, final chunk's timings or None)."""
    body = {
        "messages": [{"role": "user", "content": text}],
        "max_tokens": tokens,
        "temperature": 0,
        "stream": True,
        "cache_prompt": False,
    }
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:200]!r}")
    times, timings = [], None
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        timings = chunk.get("timings", timings)
        for choice in chunk.get("choices", []):
            if choice.get("delta", {}).get("content"):
                times.append(time.perf_counter())
    return times, timings


def decode_tok_s(times):
    return (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else 0.0


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def start(cmd, port):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, proc)
    except Exception:
        proc.kill()
        raise
    return proc


def ember_cmd(a, port, lookup, parallel):
    cmd = [a.ember, "serve", a.model, "--port", str(port), "--threads", str(a.threads), "--ctx", "2048",
           "--parallel", str(parallel)]
    return cmd + (["--lookup"] if lookup else [])


def llama_cmd(a, port, lookup):
    cmd = [a.llama_server, "-m", a.model, "--port", str(port), "-t", str(a.threads), "-tb", str(a.threads),
           "-c", "2048", "-np", "1", "--no-webui", "--cache-ram", "0"]
    return cmd + (["--spec-type", "ngram-simple"] if lookup else [])


def measure_single(a, name, cmd, port, is_ember):
    proc = start(cmd, port)
    rows = {}
    try:
        stream_chat(port, "Hello", 8)  # warm-up
        for kind, text in PROMPTS.items():
            before = get_json(port, "/v1/status").get("speculation", {}) if is_ember else {}
            rates, drafted, accepted, tokens = [], 0, 0, 0
            for _ in range(a.reps):
                times, timings = stream_chat(port, text, a.tokens)
                rates.append(decode_tok_s(times))
                tokens = len(times)
                if timings:
                    drafted += timings.get("draft_n", 0)
                    accepted += timings.get("draft_n_accepted", 0)
            if is_ember:
                after = get_json(port, "/v1/status").get("speculation", {})
                drafted = after.get("drafted_tokens", 0) - before.get("drafted_tokens", 0)
                accepted = after.get("accepted_tokens", 0) - before.get("accepted_tokens", 0)
            rows[kind] = {"tok_s": median(rates), "all": rates, "drafted": drafted, "accepted": accepted,
                          "chunks": tokens}
            print(f"{name} {kind}: {' '.join(f'{r:.1f}' for r in rates)} tok/s, drafted {drafted}, "
                  f"accepted {accepted}", file=sys.stderr)
    finally:
        proc.kill()
        proc.wait()
    return rows


def measure_streams(a, lookup):
    port = free_port()
    proc = start(ember_cmd(a, port, lookup, a.streams), port)
    try:
        stream_chat(port, "Hello", 8)
        results = [None] * a.streams

        def one(i):
            results[i] = stream_chat(port, PROMPTS["code"], a.tokens)[0]

        t0 = time.perf_counter()
        threads = [threading.Thread(target=one, args=(i,)) for i in range(a.streams)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        total = sum(len(r) for r in results)
        spec = get_json(port, "/v1/status").get("speculation", {})
    finally:
        proc.kill()
        proc.wait()
    print(f"{a.streams} streams lookup={lookup}: {total} chunks in {wall:.1f} s", file=sys.stderr)
    return {"tok_s": total / wall, "wall_s": wall, "chunks": total, "speculation": spec}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--ember", required=True)
    p.add_argument("--llama-server", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--tokens", type=int, default=160)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--streams", type=int, default=16)
    p.add_argument("--json")
    a = p.parse_args()
    out = {}
    for name, lookup, is_ember in [("ember", False, True), ("ember --lookup", True, True),
                                   ("llama-server", False, False), ("llama-server ngram-simple", True, False)]:
        port = free_port()
        cmd = ember_cmd(a, port, lookup, 1) if is_ember else llama_cmd(a, port, lookup)
        out[name] = measure_single(a, name, cmd, port, is_ember)
    if a.streams > 0:
        out["streams"] = {"plain": measure_streams(a, False), "lookup": measure_streams(a, True)}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    model = a.model.rsplit("/", 1)[-1]
    print("| model | prompt | server | decode tok/s | with lookup | speedup | accepted |")
    print("|---|---|---|---|---|---|---|")
    for server, spec in [("ember", "ember --lookup"), ("llama-server", "llama-server ngram-simple")]:
        for kind in PROMPTS:
            b, s = out[server][kind], out[spec][kind]
            acc = f"{100 * s['accepted'] / s['drafted']:.0f}% of {s['drafted']}" if s["drafted"] else "-"
            speed = s["tok_s"] / b["tok_s"] if b["tok_s"] else 0
            print(f"| {model} | {kind} | {server} | {b['tok_s']:.1f} | {s['tok_s']:.1f} | {speed:.2f}x | {acc} |")
    if "streams" in out:
        pl, lk = out["streams"]["plain"], out["streams"]["lookup"]
        print(f"\n| {a.streams} streams, code edit | tok/s plain | tok/s --lookup | ratio |")
        print("|---|---|---|---|")
        print(f"| {model} | {pl['tok_s']:.1f} | {lk['tok_s']:.1f} | {lk['tok_s'] / pl['tok_s']:.2f}x |")


if __name__ == "__main__":
    main()
