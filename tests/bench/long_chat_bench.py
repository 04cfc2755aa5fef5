#!/usr/bin/env python3
"""Long-conversation benchmark: TTFT over a 20-turn chat (reuse on, off, after a restart) and
the memory of 8 chats that share one long system prompt, on `ember serve` beside llama-server.

Benchmark tooling only (Python standard library; the plot is an SVG this script writes). Issue
#39 asks for the desktop app's path; this drives `ember serve`, the same engine and scheduler
(the app's chats add a cache_key that keeps each chat's sequence; the server finds the same
blocks by the hash of their tokens, the prefix cache).

The chat: a short system prompt, then per turn a user message (the next --user-chars of the
GPL-3 text and a question) and the server's own greedy answer (streamed, at most --answer-tokens,
stream_options.include_usage), appended to the history for the next turn; --turns turns. TTFT
is measured by the client: request sent to the first chunk that carries text; beside it, the
server process's CPU time over the same interval (/proc/PID/stat), which a shared machine's
load does not inflate as it does the wall time (llama-server's includes its threads' polling).
Runs, each a chat of its own from turn 1, taking turns (turn 1 of every run, then turn 2, ...)
so that a change in the machine's load reaches all of them alike:

  app reuse   (with --app) ember-app-chat-driver (tools/bench/app_chat_driver.cpp): the desktop
              app's worker without its window (EngineHost -> EngineWorker -> Scheduler), each
              turn submitted as the chat window does (the whole conversation, cache_key chat:1,
              so the chat's own kept KV sequence continues); TTFT to the worker's first text
              signal, CPU time of the driver process
  app restart (with --app) the same with the app's disk tier (--kv-disk D, a fresh folder), a
              new driver process for every turn, as the app closed and opened again

  reuse       ember serve M --parallel 1 --ctx CTX --threads T (its default: prefix cache on)
  no reuse    the same server, every request "cache_prompt": false (every token computed)
  restart     ember serve ... --cache-disk 4GiB --cache-dir D (a fresh folder), stopped and
              started again before every turn: each turn's history comes back from the disk tier
  llama-server  llama-server -m M -np 1 -c CTX -t T -tb T --no-webui (cache_prompt on, its
              default); with --llama-no-reuse also a run with "cache_prompt": false

Shared system prompt (--chats 8): ember serve --parallel 8, one chat alone first (a system prompt
of --system-chars of the GPL-3 and a question, "ignore_eos" so it runs for --shared-tokens),
its KV blocks in use read from GET /v1/status once it has 3 tokens; then 8 such chats (the same
system prompt, each its own question), each sent once the previous one streams, so all 8 run at
once; the blocks in use once each has 3 tokens, against 8 times the first chat's. Bytes per
block: the status's KV bytes over its blocks. --runs "" --turns 1 measures only this.

    tests/bench/long_chat_bench.py --model SmolLM2-135M-Instruct.Q4_1.gguf --ember build/engine/app/cli/ember \
        --llama-server ~/.cache/ember/llama-tools/build-0.3.36-native-*/bin/llama-server \
        [--turns 20] [--user-chars 600] [--answer-tokens 48] [--ctx 6144] [--threads 2] \
        [--chats 8] [--system-chars 4500] [--shared-tokens 96] [--runs "reuse,no reuse,restart"] \
        [--app build/dev/tools/bench/ember-app-chat-driver --runs "app reuse,app restart"] \
        [--json OUT] [--svg docs/long-chat-ttft.svg]
    tests/bench/long_chat_bench.py --replot OUT.json [--svg PLOT.svg]    # print and plot again

Prints a markdown table per turn (prompt tokens, tokens not computed, TTFT ms and CPU ms per
run), the targets (turn-N TTFT <= 1.5x turn 1 with reuse, and after a restart), in wall and CPU
time, and the memory figure; the SVG plots both times per turn, log scale.
"""
import argparse
import contextlib
import http.client
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prefix_bench import TEXT, Server, free_port  # noqa: E402

SYSTEM = "You are a helpful assistant. Answer in two or three sentences."


def cpu_ms(pid):
    """CPU time a process has used (user + system), in ms."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def stream_chat(port, messages, max_tokens, extra=None, on_first=None, pid=None):
    """One streamed chat completion: its TTFT, wall time, usage and text; with the server's
    pid, the CPU time it spent from the request to the first token too."""
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}, **(extra or {})}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
    cpu0 = cpu_ms(pid) if pid else None
    t0 = time.perf_counter()
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        sys.exit(f"HTTP {r.status}: {r.read()[:400]!r}")
    ttft, text, usage, timings, cpu = None, "", None, None, None
    while True:
        line = r.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        for ch in chunk.get("choices", []):
            piece = ch.get("delta", {}).get("content") or ""
            if piece and ttft is None:
                ttft = (time.perf_counter() - t0) * 1000
                cpu = cpu_ms(pid) - cpu0 if pid else None
                if on_first:
                    on_first()
            text += piece
        usage = chunk.get("usage") or usage
        timings = chunk.get("timings") or timings
    if ttft is None:
        sys.exit(f"no text streamed for a prompt of {len(messages)} messages")
    prompt = usage["prompt_tokens"]
    if timings:  # llama-server: the tokens it processed
        reused = prompt - timings["prompt_n"]
    else:
        reused = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
    return {"ttft_ms": ttft, "ttft_cpu_ms": cpu, "ms": (time.perf_counter() - t0) * 1000, "prompt_tokens": prompt,
            "reused_tokens": reused, "text": text}


def user_message(pieces, i):
    return {"role": "user", "content": f"Here is part {i + 1} of a license:\n\n{pieces[i]}\n\nWhat does it say?"}


class AppDriver:
    """ember-app-chat-driver, started (a load of the model, as the app does) on entering; each
    ask() is one chat turn through the app's worker, one JSON line each way."""

    def __init__(self, argv):
        self.argv = argv

    def __enter__(self):
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        ready = json.loads(self.proc.stdout.readline() or '{"error": "the driver exited"}')
        if not ready.get("loaded"):
            sys.exit(f"ember-app-chat-driver: {ready.get('error')}")
        return self

    def __exit__(self, *exc):
        self.proc.stdin.close()
        self.proc.wait(timeout=300)

    def ask(self, messages, max_tokens):
        self.proc.stdin.write(json.dumps({"conversation": 1, "messages": messages, "max_tokens": max_tokens}) + "\n")
        self.proc.stdin.flush()
        t0 = time.perf_counter()
        row = json.loads(self.proc.stdout.readline() or '{"error": "the driver exited"}')
        if "error" in row:
            sys.exit(f"ember-app-chat-driver: {row['error']}")
        return {"ttft_ms": row["ttft_ms"], "ttft_cpu_ms": row["ttft_cpu_ms"], "ms": (time.perf_counter() - t0) * 1000,
                "prompt_tokens": row["prompt_tokens"], "reused_tokens": row["reused_tokens"], "text": row["text"]}


class Chat:
    """One run's conversation: its own history (its server's answers), asked turn by turn."""

    def __init__(self, name, server, extra=None):
        self.name, self.server, self.extra = name, server, extra
        self.messages, self.rows = [{"role": "system", "content": SYSTEM}], []

    def turn(self, pieces, i, answer_tokens):
        self.messages.append(user_message(pieces, i))
        with self.server() as s:
            if isinstance(s, AppDriver):
                row = s.ask(self.messages, answer_tokens)
            else:
                row = stream_chat(s.port, self.messages, answer_tokens, self.extra, pid=s.proc.pid)
        self.messages.append({"role": "assistant", "content": row["text"]})
        self.rows.append(row)
        print(f"  {self.name}, turn {i + 1}: {row['prompt_tokens']} prompt, {row['reused_tokens']} reused, "
              f"TTFT {row['ttft_ms']:.0f} ms ({row['ttft_cpu_ms']:.0f} ms CPU)", file=sys.stderr)


class Running:
    """A started server, the same one every turn."""

    def __init__(self, server):
        self.server = server

    def __enter__(self):
        return self.server

    def __exit__(self, *exc):
        pass


def ember_argv(a, port, parallel, *more):
    return [a.ember, "serve", a.model, "--port", str(port), "--parallel", str(parallel), "--ctx", str(a.ctx),
            "--threads", str(a.threads), *more]


def llama_argv(a, port):
    return [a.llama_server, "-m", a.model, "--port", str(port), "-np", "1", "-c", str(a.ctx), "-t", str(a.threads),
            "-tb", str(a.threads), "--no-webui"]


def status(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/v1/status")
    return json.loads(c.getresponse().read())


def settled_status(port, n):
    """The status once each of n running chats has 3 tokens: the blocks in use are published at
    the end of a step, after the step's first tokens went out, so the reading at a chat's first
    token can be a step old (the last prefill chunk missing)."""
    deadline = time.time() + 60
    while True:
        snap = status(port)
        reqs = snap["requests"]
        if (len(reqs) == n and all(r["generated_tokens"] >= 3 for r in reqs)) or time.time() > deadline:
            return snap
        time.sleep(0.01)


def shared_prompt(a, system):
    """The KV blocks in use: one chat alone, then `a.chats` chats at once, one system prompt."""
    port = free_port()
    with Server("ember", ember_argv(a, port, a.chats), port):
        def chat(i, first):
            msgs = [{"role": "system", "content": system},
                    {"role": "user", "content": f"Question {i}: which freedoms does this give?"}]
            return stream_chat(port, msgs, a.shared_tokens, {"ignore_eos": True}, first.set)

        def used_when_streaming(n):
            """Starts chats 0..n-1 one after another; the status once the last one streams."""
            threads, rows, snap = [], [None] * n, {}
            for i in range(n):
                first = threading.Event()
                t = threading.Thread(target=lambda i=i, f=first: rows.__setitem__(i, chat(i, f)))
                t.start()
                threads.append(t)
                if not first.wait(600):
                    sys.exit(f"chat {i} did not stream")
            snap = settled_status(port, n)
            for t in threads:
                t.join()
            if snap["running"] != n:
                print(f"  (only {snap['running']} of {n} chats were running at the reading)", file=sys.stderr)
            return snap, rows

        alone, alone_rows = used_when_streaming(1)
        together, rows = used_when_streaming(a.chats)
    kv_bytes = sum(m["kv_cache"] for m in together["memory"])
    per_block = kv_bytes / together["kv_blocks"]["total"]
    return {"chats": a.chats, "system_prompt_tokens": alone_rows[0]["prompt_tokens"],
            "reused_tokens": [r["reused_tokens"] for r in rows], "bytes_per_block": per_block,
            "alone_blocks": alone["kv_blocks"]["used"], "together_blocks": together["kv_blocks"]["used"],
            "running_at_reading": together["running"]}


def svg_panel(series, left, title):
    """One log-scale line plot, one line per run, at x offset `left`: a list of SVG elements."""
    W, H, L, R, T, B = 460, 420, 60, 10, 40, 50
    turns = max(len(s) for s in series.values())
    values = [v for s in series.values() for v in s if v > 0]
    lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    hi = max(hi, lo + 1)
    x = lambda t: left + L + (W - L - R) * (t - 1) / max(1, turns - 1)  # noqa: E731
    y = lambda v: T + (H - T - B) * (hi - math.log10(max(v, 10 ** lo))) / (hi - lo)  # noqa: E731
    out = [f'<text x="{left + W / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>']
    for e in range(lo, hi + 1):
        out.append(f'<line x1="{left + L}" x2="{left + W - R}" y1="{y(10 ** e):.1f}" y2="{y(10 ** e):.1f}" '
                   f'stroke="#ddd"/><text x="{left + L - 6}" y="{y(10 ** e) + 4:.1f}" text-anchor="end">'
                   f'{10 ** e:g} ms</text>')
    for t in range(1, turns + 1):
        if t == 1 or t % 5 == 0:
            out.append(f'<text x="{x(t):.1f}" y="{H - B + 18}" text-anchor="middle">{t}</text>')
    out.append(f'<text x="{left + (L + W - R) / 2}" y="{H - 12}" text-anchor="middle">turn</text>')
    for k, s in enumerate(series.values()):
        pts = " ".join(f"{x(t + 1):.1f},{y(v):.1f}" for t, v in enumerate(s))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{COLORS[k % len(COLORS)]}" stroke-width="2"/>')
    return out


COLORS = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd"]


def svg_plot(runs, path, title):
    """TTFT per turn and the server's CPU time to the first token, side by side, with a legend."""
    names = list(runs)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="1100" height="440" font-family="sans-serif" '
           'font-size="12"><rect width="1100" height="440" fill="white"/>']
    out += svg_panel({n: [r["ttft_ms"] for r in runs[n]] for n in names}, 0, f"TTFT (wall), {title}")
    cpu = {n: [r["ttft_cpu_ms"] for r in runs[n]] for n in names if runs[n][0].get("ttft_cpu_ms") is not None}
    out += svg_panel(cpu, 460, "server CPU time to the first token")
    for k, n in enumerate(names):
        out.append(f'<line x1="935" x2="955" y1="{50 + 18 * k}" y2="{50 + 18 * k}" stroke="{COLORS[k % len(COLORS)]}" '
                   f'stroke-width="2"/><text x="960" y="{54 + 18 * k}">{n}</text>')
    out.append("</svg>\n")
    with open(path, "w") as f:
        f.write("\n".join(out))


def print_turns(runs):
    names = list(runs)
    print("| turn | " + " | ".join(f"{n}: prompt / reused / TTFT ms (CPU ms)" for n in names) + " |")
    print("|---:|" + "---:|" * len(names))
    for t in range(len(next(iter(runs.values())))):
        cells = [runs[n][t] for n in names]
        print(f"| {t + 1} | " + " | ".join(f"{c['prompt_tokens']} / {c['reused_tokens']} / {c['ttft_ms']:.0f} "
                                          f"({c['ttft_cpu_ms']:.0f})" for c in cells) + " |")


def print_targets(runs):
    for name, rows in runs.items():
        for key, what in (("ttft_ms", "TTFT"), ("ttft_cpu_ms", "server CPU to the first token")):
            first, last = rows[0][key], rows[-1][key]
            worst = max(r[key] for r in rows[1:]) if len(rows) > 1 else first
            print(f"- {name}, {what}: turn 1 {first:.0f} ms, turn {len(rows)} {last:.0f} ms "
                  f"({last / max(first, 1):.2f}x), worst later turn {worst:.0f} ms ({worst / max(first, 1):.2f}x)")


def measure(a):
    text = open(TEXT, encoding="utf-8").read()
    n = a.user_chars
    pieces = [text[i * n:(i + 1) * n] for i in range(a.turns)]
    if len(pieces[-1]) < n:
        sys.exit(f"{TEXT} is too short for {a.turns} pieces of {n} characters")
    wanted = [r for r in a.runs.split(",") if r]
    disk = tempfile.TemporaryDirectory(prefix="ember-long-chat-")
    with contextlib.ExitStack() as stack:
        chats = []
        if {"reuse", "no reuse"} & set(wanted):
            port = free_port()
            ember = stack.enter_context(Server("ember", ember_argv(a, port, 1), port))
            chats += [Chat(f"ember {n}", lambda s=ember: Running(s), x)
                      for n, x in (("reuse", None), ("no reuse", {"cache_prompt": False})) if n in wanted]
        if "restart" in wanted:
            port = free_port()
            argv = ember_argv(a, port, 1, "--cache-disk", "4GiB", "--cache-dir", disk.name)
            chats.append(Chat("ember restart", lambda argv=argv, port=port: Server("ember", argv, port)))
        if {"app reuse", "app restart"} & set(wanted):
            if not a.app:
                sys.exit("the app runs need --app PATH (ember-app-chat-driver)")
            argv = [a.app, a.model, "--ctx", str(a.ctx), "--threads", str(a.threads), "--chats", "1"]
            if "app reuse" in wanted:
                app = stack.enter_context(AppDriver(argv))
                chats.append(Chat("app reuse", lambda d=app: Running(d)))
            if "app restart" in wanted:
                app_disk = stack.enter_context(tempfile.TemporaryDirectory(prefix="ember-long-chat-app-"))
                chats.append(Chat("app restart", lambda: AppDriver(argv + ["--kv-disk", app_disk])))
        if a.llama_server:
            port = free_port()
            llama = stack.enter_context(Server("llama-server", llama_argv(a, port), port))
            chats += [Chat(f"llama-server {n}", lambda s=llama: Running(s), x)
                      for n, x in (("reuse", None), ("no reuse", {"cache_prompt": False}))
                      if n == "reuse" or a.llama_no_reuse]
        for i in range(a.turns):  # the runs take turns, so a change in the machine's load reaches all
            for chat in chats:
                chat.turn(pieces, i, a.answer_tokens)
    runs = {chat.name: chat.rows for chat in chats}
    shared = shared_prompt(a, text[-a.system_chars:]) if a.chats > 0 else None
    result = {"model": a.model, "ctx": a.ctx, "threads": a.threads, "turns": a.turns, "user_chars": a.user_chars,
              "answer_tokens": a.answer_tokens, "shared_prompt": shared,
              "runs": {k: [{kk: vv for kk, vv in r.items() if kk != "text"} for r in v] for k, v in runs.items()}}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


def report(result, svg):
    model, runs, shared = os.path.basename(result["model"]), result["runs"], result["shared_prompt"]
    print(f"\n### {model}: {result['turns']} turns, context {result['ctx']}, {result['threads']} threads, answers <= "
          f"{result['answer_tokens']} tokens\n")
    if runs:
        print_turns(runs)
        print("\nTurn N against turn 1:\n")
        print_targets(runs)
    if shared:
        mib = shared["bytes_per_block"] / 2 ** 20
        alone, together = shared["alone_blocks"], shared["together_blocks"]
        print(f"\n{shared['chats']} chats, one system prompt of {shared['system_prompt_tokens']} tokens (with the "
              f"question): one chat alone holds {alone} KV blocks ({alone * mib:.1f} MiB); {shared['chats']} at once "
              f"({shared['running_at_reading']} running at the reading) hold {together} ({together * mib:.1f} MiB), "
              f"against {shared['chats'] * alone} ({shared['chats'] * alone * mib:.1f} MiB) for "
              f"{shared['chats']} copies; tokens not computed per chat: {shared['reused_tokens']}")
    if svg and runs:
        svg_plot(runs, svg, f"{model}, {result['threads']} threads")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model")
    ap.add_argument("--ember")
    ap.add_argument("--llama-server")
    ap.add_argument("--app", help="ember-app-chat-driver, for the runs \"app reuse\" and \"app restart\"")
    ap.add_argument("--llama-no-reuse", action="store_true")
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--user-chars", type=int, default=600)
    ap.add_argument("--answer-tokens", type=int, default=48)
    ap.add_argument("--ctx", type=int, default=6144)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--chats", type=int, default=8, help="chats sharing one system prompt (0: skip)")
    ap.add_argument("--system-chars", type=int, default=4500)
    ap.add_argument("--shared-tokens", type=int, default=96, help="tokens each shared-prompt chat generates")
    ap.add_argument("--runs", default="reuse,no reuse,restart", help="the ember runs, comma-separated")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--svg", help="write the plot here")
    ap.add_argument("--replot", metavar="JSON", help="print and plot an earlier run's --json, measuring nothing")
    a = ap.parse_args()
    if a.replot:
        with open(a.replot) as f:
            return report(json.load(f), a.svg)
    if not (a.model and (a.ember or a.app)):
        ap.error("--model and --ember (or --app) are needed (or --replot)")
    report(measure(a), a.svg)


if __name__ == "__main__":
    main()
