#!/usr/bin/env python3
"""Prefix-cache benchmark: how long a prompt that begins like an earlier one waits for its first
token, on `ember serve` and on llama.cpp's `llama-server`, side by side in one run.

Benchmark tooling only (Python standard library). Each server is started on the same file with
the same slots, context and threads, in its default configuration (its prompt caching on):

    ember serve M --parallel N --ctx CTX --threads T
    llama-server -m M -np N -c N*CTX -t T -tb T --no-webui

and then asked, one request at a time, with `max_tokens` 1 and temperature 0 (so the time of
a request is its prompt processing plus one token), in this order:

  1. document A + question 1                      (nothing cached yet)
  2. document A + question 2                      (the same document again)
  3. documents B1..Bk + a question, one each      (k > slots: other work in between)
  4. document A + question 3                      (the document again, after that)
  5. document A + question 4, "cache_prompt": false  (every token computed, for reference)
  6. with --restart: the server is stopped and started again, then document A + question 5
     (Ember with `--cache-disk 4GiB --cache-dir` a fresh folder, its KV blocks' disk tier;
     llama-server keeps no prompt cache across restarts unless a client saves slots by hand)

The documents are consecutive pieces of a text every Debian system ships (the GPL-3). Printed:
a markdown table with each request's prompt tokens, the tokens the server did not compute
again (Ember: usage.prompt_tokens_details.cached_tokens; llama-server: prompt_tokens minus
timings.prompt_n), and the wall time; --json writes the same.

    tests/bench/prefix_bench.py --model M.gguf --ember build/engine/app/cli/ember \
        --llama-server ~/.cache/ember/llama-tools/build-0.3.36-native-*/bin/llama-server \
        [--parallel 2] [--ctx 4096] [--threads 2] [--doc-chars 6000] [--others 4] [--restart] [--json OUT]
"""
import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

TEXT = "/usr/share/common-licenses/GPL-3"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, name, argv, port):
        self.name, self.argv, self.port = name, argv, port

    def __enter__(self):
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                sys.exit(f"{self.name} exited with {self.proc.returncode}: {' '.join(self.argv)}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        sys.exit(f"{self.name} did not become healthy")

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait()

    def ask(self, prompt, extra):
        body = {"prompt": prompt, "max_tokens": 1, "temperature": 0, **extra}
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=900)
        t = time.perf_counter()
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        data = json.loads(r.read())
        ms = (time.perf_counter() - t) * 1000
        if r.status != 200:
            sys.exit(f"{self.name}: HTTP {r.status}: {data}")
        prompt_tokens = data["usage"]["prompt_tokens"]
        if "timings" in data:  # llama-server: the tokens it processed
            reused = prompt_tokens - data["timings"]["prompt_n"]
        else:
            reused = data["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
        return {"prompt_tokens": prompt_tokens, "reused_tokens": reused, "ms": ms}


def scenario(server, docs, others):
    a = docs[0]
    rows = [("A + question 1 (first time)", server.ask(a + "\nQuestion 1:", {})),
            ("A + question 2 (same document)", server.ask(a + "\nQuestion 2:", {}))]
    for i in range(others):
        rows.append((f"B{i + 1} + a question (other work)", server.ask(docs[1 + i] + "\nQuestion:", {})))
    rows.append((f"A + question 3 (after {others} others)", server.ask(a + "\nQuestion 3:", {})))
    rows.append(("A + question 4, cache_prompt false", server.ask(a + "\nQuestion 4:", {"cache_prompt": False})))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--ember")
    ap.add_argument("--llama-server")
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--doc-chars", type=int, default=6000)
    ap.add_argument("--others", type=int, default=4)
    ap.add_argument("--restart", action="store_true", help="ask once more after restarting each server")
    ap.add_argument("--json")
    a = ap.parse_args()
    disk = tempfile.TemporaryDirectory(prefix="ember-prefix-bench-")
    ember_disk = ["--cache-disk", "4GiB", "--cache-dir", disk.name] if a.restart else []
    text = open(TEXT, encoding="utf-8").read()
    n = a.doc_chars
    docs = [text[i * n:(i + 1) * n] for i in range(1 + a.others)]
    if len(docs[-1]) < n:
        sys.exit(f"{TEXT} is too short for {1 + a.others} documents of {n} characters")
    servers = []
    if a.ember:
        servers.append(("ember", lambda p: [a.ember, "serve", a.model, "--port", str(p), "--parallel",
                                            str(a.parallel), "--ctx", str(a.ctx), "--threads", str(a.threads),
                                            *ember_disk]))
    if a.llama_server:
        servers.append(("llama-server", lambda p: [a.llama_server, "-m", a.model, "--port", str(p), "-np",
                                                   str(a.parallel), "-c", str(a.parallel * a.ctx), "-t",
                                                   str(a.threads), "-tb", str(a.threads), "--no-webui"]))
    if not servers:
        sys.exit("give --ember and/or --llama-server")
    results = {}
    for name, argv in servers:
        port = free_port()
        with Server(name, argv(port), port) as s:
            results[name] = scenario(s, docs, a.others)
        if a.restart:
            with Server(name, argv(port), port) as s:
                results[name].append(("A + question 5 (after a restart)", s.ask(docs[0] + "\nQuestion 5:", {})))
    print(f"\n### {os.path.basename(a.model)}: {a.parallel} slots, context {a.ctx}, {a.threads} threads\n")
    print("| request | " + " | ".join(f"{name}: prompt / reused / ms" for name, _ in servers) + " |")
    print("|---|" + "---:|" * len(servers))
    for i, (label, _) in enumerate(next(iter(results.values()))):
        cells = [results[name][i][1] for name, _ in servers]
        print(f"| {label} | " + " | ".join(f"{c['prompt_tokens']} / {c['reused_tokens']} / {c['ms']:.0f}" for c in cells)
              + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "parallel": a.parallel, "ctx": a.ctx, "threads": a.threads,
                       "results": {k: [{"request": l, **v} for l, v in rows] for k, rows in results.items()}},
                      f, indent=1)


if __name__ == "__main__":
    main()
