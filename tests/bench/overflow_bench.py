#!/usr/bin/env python3
"""Context overflow benchmark: the first turn past the context, truncate against roll, on `ember serve`.

Benchmark tooling only (Python standard library). One server (`ember serve M --ctx CTX --parallel 1
--threads T`); per repetition and policy, a chat of its own (its system prompt names the
repetition and the policy, so no two share cached blocks):

  1. the chat with as many exchanges as fit (nothing dropped): its KV blocks are published;
  2. the chat with a few more exchanges, past the context, "context_overflow" truncate or roll:
     the oldest exchanges are left out. Truncate computes everything after the first dropped
     token again; roll moves the cached turns after the dropped ones (their keys re-rotated).

Each request has max_tokens 1 and temperature 0: its time is the prompt's processing and one
token. Printed: a markdown table per request of step 2 (prompt tokens, tokens not computed:
usage.prompt_tokens_details.cached_tokens, and the wall time), policies interleaved.

    tests/bench/overflow_bench.py --model M.gguf --ember build/engine/app/cli/ember [--ctx 2048] [--threads 2] [--reps 3]
"""
import argparse
import http.client
import json
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chat(tag, exchanges):
    m = [{"role": "system", "content": f"You are a helpful assistant ({tag})."}]
    for i in range(exchanges):
        m.append({"role": "user", "content": f"Tell me something about the number {i}, and why it matters to you."})
        m.append({"role": "assistant", "content": f"The number {i} is a fine number to think about, and it "
                                                  f"comes right after {i - 1}, which is worth a thought too."})
    m.append({"role": "user", "content": "Which number did we talk about last?"})
    return m


def ask(port, messages, policy):
    body = {"messages": messages, "max_tokens": 1, "temperature": 0, "context_overflow": policy}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
    t = time.perf_counter()
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = json.loads(r.read())
    ms = (time.perf_counter() - t) * 1000
    if r.status != 200:
        sys.exit(f"HTTP {r.status}: {data}")
    u = data["usage"]
    return u["prompt_tokens"], u.get("prompt_tokens_details", {}).get("cached_tokens", 0), ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--ember", required=True)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    port = free_port()
    proc = subprocess.Popen([a.ember, "serve", a.model, "--port", str(port), "--parallel", "1", "--ctx", str(a.ctx),
                             "--threads", str(a.threads)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 300
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    sys.exit("ember serve did not start")
                time.sleep(0.2)
        # The most exchanges that fit with room for one token: counted down from too many, each
        # refusal (stop: a 400 before anything is computed) cheap, the first fit computed once.
        fit = a.ctx // 8
        while not fits(port, fit):
            fit -= 1
        print(f"ctx {a.ctx}: {fit} exchanges fit; the overflowing turn has {fit + 4}\n")
        print("| rep | policy | prompt tokens | not computed | ms |\n|---|---|---|---|---|")
        for rep in range(a.reps):
            for policy in ("truncate", "roll"):
                tag = f"rep {rep}, {policy}"
                ask(port, chat(tag, fit), "stop")
                p, cached, ms = ask(port, chat(tag, fit + 4), policy)
                print(f"| {rep} | {policy} | {p} | {cached} | {ms:.0f} |")
    finally:
        proc.terminate()
        proc.wait()


def fits(port, exchanges):
    body = {"messages": chat("probe", exchanges), "max_tokens": 1, "temperature": 0, "context_overflow": "stop",
            "cache_prompt": False}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    return r.status == 200


if __name__ == "__main__":
    main()
