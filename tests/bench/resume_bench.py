#!/usr/bin/env python3
"""Follow-up turns on a long chat resume from a state snapshot (issue #40's acceptance: TTFT of a
follow-up turn on a 4k-token chat <= 1.5x a 100-token turn's, also after a restart), on
`ember serve` with a qwen35 file (a hybrid model: its linear-attention layers' recurrent state
comes back from a snapshot, kv_cache.h; the full-attention layers' KV blocks as for any model).

Benchmark tooling only (Python standard library). One server with a disk cache
(--cache-disk, a fresh --cache-dir), --parallel 1, greedy, "ignore_eos" (random weights may
pick EOS at once); each answer is --answer-tokens long and goes back into its chat's history:

  short       a chat of its own whose prompt is ~--short-tokens tokens, all computed (the bar)
  turn 1      the long chat: a system prompt and a user message of --history-chars characters
              (the synthetic vocabulary spells text byte by byte, a space as 3: 4000 characters of
              the GPL-3 are ~5600 tokens)
  follow-up   turn 2 of the long chat: a short question after turn 1's answer (--question-chars
              pads it with spaces to that length; the synthetic vocabulary spells a space as the
              3 bytes of U+2581: 3 tokens each)
  restart     the server stopped and started on the same cache folder; then turn 3 (a follow-up
              on turn 2's history): its prefix comes back from the disk tier
  short (2)   after the restart, another short chat (so both bars are cold)
  no reuse    with --no-reuse: turn 3's prompt again with "cache_prompt": false (every token computed)

TTFT is measured by the client (request to the first streamed text) beside the server process's
CPU time over the same interval (/proc/PID/stat), which other processes' load does not inflate.

    tests/bench/resume_bench.py --model qwen3.5-4b-Q4_K_M.gguf --ember build/engine/app/cli/ember \\
        [--history-chars 4000] [--short-tokens 100] [--question-chars 0] [--answer-tokens 16] \\
        [--ctx 8192] [--threads 2] [--no-reuse] [--json OUT]

Prints one line per request and a markdown table with the ratios to the short turn's TTFT.
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from long_chat_bench import SYSTEM, stream_chat  # noqa: E402
from prefix_bench import TEXT, Server, free_port  # noqa: E402


def ember_server(a, cache_dir, port):
    argv = [a.ember, "serve", a.model, "--port", str(port), "--parallel", "1", "--ctx", str(a.ctx), "--threads",
            str(a.threads), "--cache-disk", "16GiB", "--cache-dir", cache_dir]
    return Server("ember", argv, port)


def ask(server, name, messages, a, rows, extra=None):
    row = stream_chat(server.port, messages, a.answer_tokens, {"ignore_eos": True, **(extra or {})},
                      pid=server.proc.pid)
    row["name"] = name
    rows.append(row)
    print(f"  {name}: {row['prompt_tokens']} prompt, {row['reused_tokens']} reused, TTFT {row['ttft_ms']:.0f} ms "
          f"({row['ttft_cpu_ms']:.0f} ms CPU)", file=sys.stderr)
    return row["text"]


def short_chat(text, offset, a):
    """A chat of about a.short_tokens prompt tokens (the template adds a few dozen)."""
    body = text[offset:offset + max(a.short_tokens - 40, 10)]
    return [{"role": "user", "content": body}]


def measure(a):
    text = open(TEXT, encoding="utf-8").read()
    history = [{"role": "system", "content": SYSTEM},
               {"role": "user", "content": f"Here is a license:\n\n{text[:a.history_chars]}\n\nWhat does it say?"}]
    questions = ["Which freedoms does it give, in one line?", "And what must a distributor do, briefly?"]
    questions = [q + " " * max(0, a.question_chars - len(q)) for q in questions]
    rows = []
    with tempfile.TemporaryDirectory(prefix="ember-resume-") as cache_dir:
        port = free_port()
        with ember_server(a, cache_dir, port) as s:
            ask(s, "short", short_chat(text, 20000, a), a, rows)
            history.append({"role": "assistant", "content": ask(s, "turn 1", history, a, rows)})
            history.append({"role": "user", "content": questions[0]})
            history.append({"role": "assistant", "content": ask(s, "follow-up", history, a, rows)})
        history.append({"role": "user", "content": questions[1]})
        with ember_server(a, cache_dir, port) as s:
            ask(s, "follow-up after a restart", history, a, rows)
            ask(s, "short (2)", short_chat(text, 25000, a), a, rows)
            if a.no_reuse:
                ask(s, "follow-up, no reuse", history, a, rows, {"cache_prompt": False})
    return rows


def report(rows):
    by = {r["name"]: r for r in rows}
    bar = min(by["short"]["ttft_ms"], by["short (2)"]["ttft_ms"])
    bar_cpu = min(by["short"]["ttft_cpu_ms"], by["short (2)"]["ttft_cpu_ms"])
    print("| request | prompt tokens | reused | computed | TTFT ms | CPU ms | TTFT / short | CPU / short |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        print(f"| {r['name']} | {r['prompt_tokens']} | {r['reused_tokens']} | {r['prompt_tokens'] - r['reused_tokens']} "
              f"| {r['ttft_ms']:.0f} | {r['ttft_cpu_ms']:.0f} | {r['ttft_ms'] / bar:.2f}x | "
              f"{r['ttft_cpu_ms'] / bar_cpu:.2f}x |")
    print(f"\nbar: the faster short turn, {bar:.0f} ms ({bar_cpu:.0f} ms CPU); target: follow-ups <= 1.5x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--ember", required=True)
    ap.add_argument("--history-chars", type=int, default=4000)
    ap.add_argument("--short-tokens", type=int, default=100)
    ap.add_argument("--question-chars", type=int, default=0)
    ap.add_argument("--answer-tokens", type=int, default=16)
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-reuse", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = measure(a)
    report(rows)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "load_average": os.getloadavg(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
