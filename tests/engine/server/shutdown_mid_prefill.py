#!/usr/bin/env python3
"""`ember serve` stopped by SIGTERM in the middle of a long prefill (issue #40): the prefill
notices the stop between layers of its pass (Transformer::PassStop, Scheduler::stop_pass), so
the server exits cleanly long before the prompt could have been computed, and what earlier
passes published stays on disk. A real model and process, no timing bound: the proof that the
prefill did not finish is the server's own log line, which says where the request was stopped.

  1. ember serve MODEL --ctx 8192 --parallel 1 --cache-disk ... on a fresh folder; a prompt of
     thousands of tokens (n passes of --batch 512 tokens) sent without waiting for it.
  2. Once /v1/status shows the request in prefill with at least one pass's blocks in use
     (a pass published), SIGTERM.
  3. The server exits 0, and its log says the request was cancelled with k of n prompt tokens
     computed, k < n (and, when the stop came inside a pass, after which layer).
  4. Every block of the k computed tokens is on disk: k / 16 block files in the cache folder.

Standard library only. Exits non-zero on the first failed check."""
import argparse
import glob
import json
import os
import re
import sys
import tempfile
import threading
import time
import urllib.request

from ember_serve import EmberServe, check

BLOCK_TOKENS = 16  # KvCacheConfig::block_tokens
PASS_TOKENS = 512  # ember serve's --batch default: one prefill pass


def send_long_prompt(url, prompt):
    """POSTs the prompt and ignores the answer (the server stops before it has one)."""
    body = json.dumps({"prompt": prompt, "max_tokens": 1, "temperature": 0}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            r.read()
    except OSError:
        pass  # 503 "shutting down", or the connection closed


def wait_for_prefill(server, timeout=300):
    """Until the request is in prefill and at least one pass of its prompt is in the KV cache."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = server.get_json("/v1/status")
        states = [r["state"] for r in s["requests"]]
        if states == ["prefill"] and s["kv_blocks"]["used"] >= PASS_TOKENS // BLOCK_TOKENS:
            return s
        if states not in ([], ["queued"], ["prefill"]):
            raise AssertionError(f"the request is neither queued nor in prefill: {states}")
        time.sleep(0.02)
    raise AssertionError(f"no prefill pass finished within {timeout} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ember", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    a = ap.parse_args()
    prompt = open(a.text, encoding="utf-8").read()[:28000]  # ~7k tokens: about 14 passes
    os.environ["EMBER_LOG_LEVEL"] = "info"  # the scheduler says where it cancelled (a log_info line)
    with tempfile.TemporaryDirectory(prefix="ember-stop-") as root, tempfile.TemporaryFile("w+") as log:
        server = EmberServe(a.ember, a.model, "--ctx", "8192", "--parallel", "1", "--cache-disk", "1GiB",
                            "--cache-dir", root, stderr=log, start_timeout=60)
        client = threading.Thread(target=send_long_prompt, args=(server.url, prompt), daemon=True)
        client.start()
        status = wait_for_prefill(server)
        print(f"SIGTERM with {status['kv_blocks']['used']} blocks in use")
        rc = server.stop(timeout=60)
        log.seek(0)
        text = log.read()
        sys.stdout.write(text[-3000:])
        check(rc == 0, f"ember serve exited 0 after SIGTERM (got {rc})")
        m = re.search(r"request \d+ cancelled (during a pass over tokens (\d+)\.\.(\d+): stopped after layer (\d+) "
                      r"of (\d+)|between passes); (\d+) of (\d+) prompt tokens computed", text)
        check(m is not None, "the log says where the prefill was cancelled")
        done, total = int(m.group(6)), int(m.group(7))
        check(PASS_TOKENS <= done < total, f"cancelled with {done} of {total} prompt tokens computed")
        if m.group(2):
            check(int(m.group(4)) < int(m.group(5)), f"inside a pass: after layer {m.group(4)} of {m.group(5)}")
        blocks = glob.glob(os.path.join(root, "*", "*.kvb"))
        check(len(blocks) == done // BLOCK_TOKENS,
              f"the {done // BLOCK_TOKENS} blocks of the computed passes are on disk ({len(blocks)} files)")
        client.join(timeout=30)
    print("shutdown mid-prefill: all checks passed")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        sys.exit(f"FAILED: {e}")
