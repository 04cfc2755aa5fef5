#!/usr/bin/env python3
"""How long `ember serve` takes to exit on SIGTERM in the middle of a long prefill (issue #40):
the server on MODEL, one prompt of --chars characters of the GPL-3 (several passes of
--batch 512 tokens), SIGTERM as soon as /v1/status shows the first pass done; prints the time
from SIGTERM to exit, the exit status and the server's own line saying where it stopped
(EMBER_LOG_LEVEL=info). Benchmark tooling only (standard library).

    tests/bench/stop_bench.py --ember build/engine/app/cli/ember --model qwen3.5-4b-Q4_K_M.gguf
"""
import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "engine", "server"))
from ember_serve import EmberServe  # noqa: E402


def send(url, prompt):
    body = json.dumps({"prompt": prompt, "max_tokens": 1}).encode()
    try:
        req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=3600).read()
    except OSError:
        pass  # the server stops before it answers


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ember", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--chars", type=int, default=3000)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    os.environ["EMBER_LOG_LEVEL"] = "info"
    with tempfile.TemporaryFile("w+") as log:
        s = EmberServe(a.ember, a.model, "--ctx", "8192", "--parallel", "1", "--threads", str(a.threads), stderr=log,
                       start_timeout=600)
        prompt = open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read()[:a.chars]
        threading.Thread(target=send, args=(s.url, prompt), daemon=True).start()
        t0 = time.time()
        while s.get_json("/v1/status")["kv_blocks"]["used"] < 32:  # one pass of 512 tokens in
            time.sleep(0.1)
        t1 = time.time()
        s.proc.send_signal(signal.SIGTERM)
        rc = s.proc.wait(3600)
        t2 = time.time()
        print(f"first pass in after {t1 - t0:.1f} s; SIGTERM to exit {t2 - t1:.2f} s, exit {rc}, "
              f"load average {os.getloadavg()[0]:.1f}")
        log.seek(0)
        sys.stdout.write("".join(line for line in log if "cancelled" in line))


if __name__ == "__main__":
    main()
