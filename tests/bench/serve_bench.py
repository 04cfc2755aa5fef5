#!/usr/bin/env python3
"""Serving benchmark: `ember serve` vs llama.cpp's `llama-server`, side by side in one run.

Benchmark tooling only, never part of the product; Python standard library only (sockets and
one selector loop), so nothing needs installing. scripts/bench-serve.sh builds both servers and runs it:

    tests/bench/serve_bench.py --model M.gguf [--model M2.gguf] --ember build/engine/app/cli/ember \
        --llama-server ~/.cache/ember/llama-tools/build-0.3.36/bin/llama-server \
        [--parallel 32] [--ctx 512] [--threads 2] [--clients 1,4,8,16,32] [--max-tokens 64] \
        [--requests-per-client 2] [--min-requests 0] [--json OUT.json]

Either server may be left out (then no ratios). Per model, both servers are started on the same
file with the same slots and threads:
    llama-server -m M -np N -c N*CTX -t T -tb T --cache-ram 0 --no-webui   (continuous batching
        is on by default; -c is split evenly over the N slots since the KV cache is not unified)
    ember serve M --parallel N --ctx CTX --threads T
and both stay up; for each client count C the servers take turns (same minute, same machine
state). A round: C clients, each request on its own HTTP connection, each client sending
--requests-per-client streaming POST /v1/completions one after another (more with
--min-requests R: ceil(R / C) each when that is more, so a single-client round is not a moment's
sample), temperature 0, max_tokens M, "ignore_eos": true, stream_options.include_usage, all
starting together; one thread drives them all (a selector loop) and parses the responses after
the round. Request i (client c's k-th: i = c * per_client + k) sends prompt i: "Request i: " + a fixed
text, so prompts differ from their first tokens (no prefix-cache reuse across requests) and
prompt i is the same text in every round and for both servers; llama-server's requests carry
"cache_prompt": false, so that prompt i sent again in a later round is prefilled again
(both servers would otherwise reuse its KV: llama-server its slot's cache, Ember its prefix
blocks); so do Ember's. With --prompt-tokens N, prompt i
is instead N token ids (a fixed pseudo-random sequence that differs from its first id): the
synthetic models' vocabularies have no merges, so the text prompt is 235 tokens there against
38 in SmolLM2's BPE vocabulary, and token ids give every model the same prompt length.

Measured per round (server x C):
  - aggregate throughput: generated tokens of all requests / wall time of the round (first
    send to last byte), prompt processing included; tokens come from each response's `usage`
    (completion_tokens), the same field for both servers; every request must report M (it is
    an error otherwise: ignore_eos makes each generate exactly M);
  - decode-phase throughput: each request's tokens after its first over the time from its first
    text chunk to its last (the stream's decode rate, the pauses for others' prompts included),
    averaged over the round's requests and multiplied by C (each client has one stream at a
    time): what the issue names aggregate decode throughput, without the prompts' prefill that
    the wall-time figure above also pays;
  - inter-token latency p50/p99: gaps between consecutive SSE chunks that carry text, client
    side, pooled over the round's requests (one chunk per token on both servers);
  - TTFT p50/p99: send to the first chunk with text;
  - the server's CPU time during the round (/proc/PID/stat) and the load average;
  - whether greedy outputs match: prompt i's text compared with its text at the lowest C.
With --repeat N, each (server, C) round runs N times, the servers taking turns to go first,
and the run with the median throughput is the one reported (tok/s shows the runs' range; the
ratios use the medians): these 2-vCPU VMs share their hosts, and a single round can lose 20 %
to a neighbour. The repetitions are passes over all client counts (1, 4, ..., 32, then again),
not N rounds of one count after another, so that a drift of the host's speed over minutes
reaches every count alike.
Prints a markdown table and the ratios the targets name (C=16 vs C=1 per server, of the medians
and, with repetitions, within each pass, for the wall-time figure and for the decode phase;
Ember / llama-server at 1, 8 and 16 clients); --json writes everything.
"""
import argparse
import bisect
import datetime
import http.client
import json
import os
import platform
import re
import selectors
import socket
import statistics
import subprocess
import sys
import time

BASE_PROMPT = ("Write a long story about a lighthouse keeper who finds a message in a bottle. "
               "Describe the sea, the weather, the keeper's daily routine and the letter in detail.")
TARGET_SCALING = 4.0     # 16 clients >= 4x the single-client throughput
TARGET_VS_PEER = 1.0     # Ember >= 1.0x llama-server's aggregate throughput ...
PEER_CLIENTS = (1, 8, 16)  # ... at these client counts


def log(msg):
    print(f"[serve-bench] {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values, p):
    """Nearest-rank percentile (p in 0..100); None for no values."""
    if not values:
        return None
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(round(p / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


def proc_cpu_seconds(pid):
    """utime + stime of a process (and its reaped children), in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    hz = os.sysconf("SC_CLK_TCK")
    return sum(int(x) for x in fields[11:15]) / hz  # utime stime cutime cstime


def machine_busy_seconds():
    """All CPUs' busy time since boot (user+nice+system+irq+softirq), in seconds."""
    with open("/proc/stat") as f:
        u, n, s, _idle, _iow, irq, sirq = (int(x) for x in f.readline().split()[1:8])
    return (u + n + s + irq + sirq) / os.sysconf("SC_CLK_TCK")


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


class Server:
    """One server process on 127.0.0.1:port, its output in a log file."""

    def __init__(self, name, argv, port, log_path):
        self.name, self.argv, self.port, self.log_path = name, argv, port, log_path
        self.proc = None
        self.model = None  # the id /v1/models gives, once healthy
        # Both servers keep prompts in their KV caches (llama-server each slot's last one,
        # Ember whole blocks of any), so a prompt sent again (the next round, the next repeat)
        # would skip its prefill; both honour "cache_prompt": false.
        self.request_extra = {"cache_prompt": False}

    def start(self, timeout_s):
        log(f"{self.name}: {' '.join(self.argv)}")
        self.log_file = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdout=self.log_file, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} before it was "
                                   f"healthy; last lines of {self.log_path}:\n{self.log_tail()}")
            if self.health() == 200:
                self.model = model_id(self.port)
                log(f"{self.name}: healthy after {time.monotonic() - t0:.1f}s (port {self.port}, "
                    f"model id {self.model!r})")
                return
            time.sleep(0.25)
        raise RuntimeError(f"{self.name} not healthy after {timeout_s}s; see {self.log_path}")

    def health(self):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            conn.request("GET", "/health")
            status = conn.getresponse().status
            conn.close()
            return status
        except OSError:
            return None

    def log_tail(self, n=15):
        try:
            with open(self.log_path, "rb") as f:
                return b"\n".join(f.read().splitlines()[-n:]).decode(errors="replace")
        except OSError:
            return ""

    def cpu_seconds(self):
        return proc_cpu_seconds(self.proc.pid) if self.proc else None

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log_file.close()


def model_id(port):
    """The id /v1/models lists first (requests name it: a server may refuse other names)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/v1/models")
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"GET /v1/models: HTTP {resp.status}: {body[:300]!r}")
        return json.loads(body)["data"][0]["id"]
    finally:
        conn.close()


def empty_result(index, t_send, t_end, error):
    """A request's result before its response is read (or when it could not be)."""
    return {"chunk_times": [], "text": "", "usage": None, "finish_reason": None, "error": error,
            "t_send": t_send, "t_end": t_end, "prompt_index": index}


class Stream:
    """One streaming POST /v1/completions on its own connection. While the round runs, the
    client only appends what arrives and notes when (`marks`); the response is parsed after
    the round (`result`). The client shares the machine's cores with the server under test:
    a thread per connection parsing every chunk as it came took ~0.2 s of CPU per 16-client
    SmolLM2 round (~250 us a token), 4x what this loop takes."""

    def __init__(self, port, body, index):
        self.index, self.raw, self.marks, self.error = index, bytearray(), [], None
        self.t_send = time.monotonic()
        self.t_end = None
        head = (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n")
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(head.encode() + body)  # a few KiB at most: the socket buffer takes it
        self.sock.setblocking(False)

    def read(self, now):
        """Takes what arrived; False once the server has closed the connection."""
        try:
            data = self.sock.recv(1 << 16)
        except BlockingIOError:
            return True
        except OSError as e:
            self.error = f"{type(e).__name__}: {e}"
            data = b""
        if data:
            self.raw += data
            self.marks.append((now, len(self.raw)))
            return True
        self.t_end = now
        self.sock.close()
        return False

    def result(self):
        """The request's outcome: client-side times, text, usage, finish reason, error."""
        out = empty_result(self.index, self.t_send, self.t_end, self.error)
        if out["error"]:
            return out
        try:
            status, body, to_raw = parse_http(bytes(self.raw))
        except ValueError as e:
            out["error"] = f"bad response: {e}"
            return out
        if status != 200:
            out["error"] = f"HTTP {status}: {body[:500].decode(errors='replace')}"
            return out
        ends = [n for _, n in self.marks]
        pieces, pos = [], 0
        while True:
            end = body.find(b"\n\n", pos)
            if end < 0:
                break
            line, arrived = body[pos:end].strip(), self.marks[bisect.bisect_left(ends, to_raw(end + 1) + 1)][0]
            pos = end + 2
            if not line.startswith(b"data:"):
                continue  # an SSE comment (a heartbeat)
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            chunk = json.loads(data)
            if chunk.get("error"):
                out["error"] = json.dumps(chunk["error"])[:500]
                break
            if chunk.get("usage"):
                out["usage"] = chunk["usage"]
            for choice in chunk.get("choices") or []:
                if choice.get("text"):
                    pieces.append(choice["text"])
                    out["chunk_times"].append(arrived)
                if choice.get("finish_reason"):
                    out["finish_reason"] = choice["finish_reason"]
        out["text"] = "".join(pieces)
        return out


def parse_http(raw):
    """(status, body, to_raw) of a whole HTTP/1.1 response; to_raw(i) is the offset in `raw`
    of body byte i (a chunked body's bytes sit between chunk headers)."""
    head, sep, rest = raw.partition(b"\r\n\r\n")
    if not sep:
        raise ValueError("no end of headers")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    start = len(head) + 4
    if headers.get("transfer-encoding", "").lower() != "chunked":
        return status, rest, lambda i: start + i
    body, segments, at = bytearray(), [], 0  # segments: (body offset, raw offset)
    while True:
        eol = rest.index(b"\r\n", at)
        size = int(rest[at:eol].split(b";")[0], 16)
        if size == 0:
            break
        segments.append((len(body), start + eol + 2))
        body += rest[eol + 2:eol + 2 + size]
        at = eol + 2 + size + 2
    firsts = [b for b, _ in segments]

    def to_raw(i):
        b, r = segments[bisect.bisect_right(firsts, i) - 1]
        return r + (i - b)

    return status, bytes(body), to_raw


def request_body(model, prompt, max_tokens, extra=None):
    return json.dumps({
        "model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
        "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True, **(extra or {}),
    }).encode()


def drive(server, clients, per_client, max_tokens, timeout_s, label=None):
    """C clients on one thread: each sends per_client requests one after another (request i =
    c * per_client + k, prompt i; `label`: that prompt instead, for a warm-up). Returns each
    request's result."""
    sel = selectors.DefaultSelector()
    done = []

    def send(c, k):
        i = c * per_client + k
        prompt = prompt_for(label if label is not None else i)
        try:
            st = Stream(server.port, request_body(server.model, prompt, max_tokens, server.request_extra), i)
        except OSError as e:
            done.append(empty_result(i, time.monotonic(), None, f"{type(e).__name__}: {e}"))
            return next_of(c, k)
        st.client, st.k = c, k
        sel.register(st.sock, selectors.EVENT_READ, st)

    def next_of(c, k):
        if k + 1 < per_client:
            send(c, k + 1)

    for c in range(clients):
        send(c, 0)
    deadline = time.monotonic() + timeout_s
    while sel.get_map():
        ready = sel.select(max(0.0, deadline - time.monotonic()))
        now = time.monotonic()
        if not ready and now >= deadline:
            for key in list(sel.get_map().values()):
                key.data.error = "timed out"
                sel.unregister(key.fileobj)
                key.data.sock.close()
                done.append(key.data)
            break
        for key, _ in ready:
            st = key.data
            if not st.read(now):
                sel.unregister(key.fileobj)
                done.append(st)
                next_of(st.client, st.k)
    return [r if isinstance(r, dict) else r.result() for r in done]


PROMPT_TOKENS = 0  # --prompt-tokens


def prompt_for(label):
    """Prompt `label` (a request index or "Warm-up"): text, or PROMPT_TOKENS token ids."""
    if not PROMPT_TOKENS:
        return f"{'Request ' + str(label) if isinstance(label, int) else label}: {BASE_PROMPT}"
    seed = label if isinstance(label, int) else 9999
    return [1000 + (seed * 7919 + j * 104729) % 20000 for j in range(PROMPT_TOKENS)]


def run_round(server, clients, per_client, max_tokens, timeout_s):
    """C clients, each sending `per_client` requests in turn; all start together."""
    cpu0, busy0, own0, load0 = server.cpu_seconds(), machine_busy_seconds(), sum(os.times()[:2]), loadavg()
    t0 = time.monotonic()
    streams = drive(server, clients, per_client, max_tokens, timeout_s)
    wall = max([t0] + [r["t_end"] or t0 for r in streams]) - t0
    cpu1, busy1, own1 = server.cpu_seconds(), machine_busy_seconds(), sum(os.times()[:2])
    r = summarize(streams, wall, max_tokens, {
        "server_cpu_s": None if cpu0 is None or cpu1 is None else cpu1 - cpu0,
        "client_cpu_s": own1 - own0, "machine_busy_s": busy1 - busy0,
        "loadavg_start": load0, "loadavg_end": loadavg()})
    # Each client has one stream at a time, so C streams decode side by side.
    rate = r["stream_decode_tok_s"]
    r["decode_tok_s"] = None if rate is None else round(clients * rate, 2)
    return r


def settle(servers, limit_s=10.0):
    """Waits until no server uses the CPU (under 4 % of a core over 0.25 s, or limit_s): a
    server's threads may keep polling after its round (llama-server's do), and the next
    round, of either server, would share the cores with them."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        c0 = [s.cpu_seconds() or 0.0 for s in servers]
        time.sleep(0.25)
        if sum(s.cpu_seconds() or 0.0 for s in servers) - sum(c0) < 0.01:
            return


def median_round(runs):
    """The run with the median throughput (the lower middle of an even count), with every
    run's tok/s and request failures added: one number per (server, C) that a neighbour's
    burst on a shared host moves less than a single run."""
    kept = dict(sorted(runs, key=lambda r: r["tok_s"] or 0)[(len(runs) - 1) // 2])
    kept["tok_s_runs"] = [r["tok_s"] for r in runs]
    decode = [r["decode_tok_s"] for r in runs if r["decode_tok_s"] is not None]
    kept["decode_tok_s"] = round(statistics.median(decode), 2) if decode else None
    kept["decode_tok_s_runs"] = decode
    kept["texts_same_across_runs"] = all(r["texts"] == kept["texts"] for r in runs)
    kept["n_errors"] = sum(r["n_errors"] for r in runs)
    kept["requests_with_wrong_token_count"] = sum(r["requests_with_wrong_token_count"] for r in runs)
    return kept


def summarize(reqs, wall, max_tokens, cpu):
    errors = [r["error"] for r in reqs if r["error"]]
    tokens, itl, ttft, bad_counts, stream_rates = 0, [], [], 0, []
    for r in reqs:
        if r["error"]:
            continue
        n = (r["usage"] or {}).get("completion_tokens")
        if n is None:
            errors.append("no usage object in the stream")
            continue
        if n != max_tokens:
            bad_counts += 1
        tokens += n
        times = r["chunk_times"]
        if times:
            ttft.append(times[0] - r["t_send"])
            itl.extend(b - a for a, b in zip(times, times[1:]))
            if len(times) > 1 and times[-1] > times[0]:
                stream_rates.append((len(times) - 1) / (times[-1] - times[0]))
    ncpu = os.cpu_count() or 1
    other = None
    if cpu["server_cpu_s"] is not None:
        other = max(0.0, (cpu["machine_busy_s"] - cpu["server_cpu_s"] - cpu["client_cpu_s"]) / (wall * ncpu))
    ms = lambda x: None if x is None else round(1000 * x, 2)  # noqa: E731
    return {
        "requests": len(reqs), "errors": errors[:5], "n_errors": len(errors),
        "requests_with_wrong_token_count": bad_counts,
        "generated_tokens": tokens, "wall_s": round(wall, 3),
        "tok_s": round(tokens / wall, 2) if wall > 0 else None,
        "stream_decode_tok_s": round(statistics.mean(stream_rates), 2) if stream_rates else None,
        "itl_p50_ms": ms(percentile(itl, 50)), "itl_p99_ms": ms(percentile(itl, 99)),
        "ttft_p50_ms": ms(percentile(ttft, 50)), "ttft_p99_ms": ms(percentile(ttft, 99)),
        "chunks_per_request": round(sum(len(r["chunk_times"]) for r in reqs) / max(1, len(reqs)), 2),
        "server_cpu_s": None if cpu["server_cpu_s"] is None else round(cpu["server_cpu_s"], 2),
        "server_cores_busy": None if cpu["server_cpu_s"] is None else round(cpu["server_cpu_s"] / wall, 2),
        "other_load": None if other is None else round(other, 3),
        "loadavg_start": cpu["loadavg_start"], "loadavg_end": cpu["loadavg_end"],
        "texts": {str(r["prompt_index"]): r["text"] for r in reqs if not r["error"]},
    }


def server_argv(name, args, model, port):
    if name == "llama-server":
        return [args.llama_server, "-m", model, "--host", "127.0.0.1", "--port", str(port),
                "-np", str(args.parallel), "-c", str(args.parallel * args.ctx),
                "-t", str(args.threads), "-tb", str(args.threads), "--cache-ram", "0",
                "--no-webui", *args.llama_server_args]
    return [args.ember, "serve", model, "--host", "127.0.0.1", "--port", str(port),
            "--parallel", str(args.parallel), "--ctx", str(args.ctx), "--threads", str(args.threads),
            *args.ember_args]


def requests_per_client(args, clients):
    """--requests-per-client, raised so that a round sends at least --min-requests requests:
    a single-client round of 2 requests lasts well under a second on a small model, and one
    slow second of a shared host then moves the 16-vs-1 ratio by a third."""
    return max(args.requests_per_client, -(-args.min_requests // clients))


def bench_model(args, model, names, log_dir):
    servers = {}
    stem = os.path.splitext(os.path.basename(model))[0]
    try:
        for name in names:
            port = free_port()
            s = Server(name, server_argv(name, args, model, port), port,
                       os.path.join(log_dir, f"{stem}.{name}.log"))
            servers[name] = s
            s.start(args.start_timeout)
            warm = drive(s, 1, 1, args.max_tokens, args.request_timeout, label="Warm-up")[0]
            if warm["error"]:
                raise RuntimeError(f"{name}: the warm-up request failed: {warm['error']}")
        # Each repetition is a pass over every client count (the servers taking turns to go
        # first), so the medians of all counts sample the same stretch of the host's minutes:
        # the scaling ratio compares like with like even when the host's speed drifts.
        runs = {name: {c: [] for c in args.clients} for name in names}
        for rep in range(args.repeat):
            for c in args.clients:
                for name in (names if rep % 2 == 0 else names[::-1]):  # each server goes first in turn
                    settle(servers.values())
                    r = run_round(servers[name], c, requests_per_client(args, c), args.max_tokens,
                                  args.request_timeout)
                    runs[name][c].append(r)
                    log(f"{stem} {name} C={c}: {r['tok_s']} tok/s (decode phase {r['decode_tok_s']}), "
                        f"ITL p50 {r['itl_p50_ms']} ms, "
                        f"TTFT p50 {r['ttft_p50_ms']} ms, server {r['server_cores_busy']} cores, "
                        f"other load {r['other_load']}, errors {r['n_errors']}")
                    if servers[name].proc.poll() is not None:
                        raise RuntimeError(f"{name} died during C={c}:\n{servers[name].log_tail()}")
        rounds = {name: {str(c): median_round(runs[name][c]) for c in args.clients} for name in names}
        for name in names:
            check_greedy(rounds[name])
        profiles = {}
        if args.profile:
            for name in names:
                profiles[name] = profile_round(args, servers[name], os.path.join(log_dir, f"{stem}.{name}"))
        return {"model": model, "file_mib": round(os.path.getsize(model) / 2**20, 1),
                "servers": {n: {"argv": servers[n].argv} for n in names}, "rounds": rounds,
                "profiles": profiles}
    finally:
        for s in servers.values():
            s.stop()


def profile_round(args, server, prefix):
    """One more round at --profile clients with `perf record` on the server; returns the
    top of `perf report` (self time by shared object and symbol) and keeps it in PREFIX.perf.txt."""
    data, txt = prefix + ".perf.data", prefix + ".perf.txt"
    perf = subprocess.Popen(["perf", "record", "-F", "499", "-q", "-o", data, "-p", str(server.proc.pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # perf attaches
    r = run_round(server, args.profile, args.requests_per_client, args.max_tokens, args.request_timeout)
    perf.send_signal(2)  # SIGINT: perf writes its file and exits
    perf.wait(timeout=60)
    rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "dso,symbol",
                          "--percent-limit", "0.5"], capture_output=True, text=True)
    lines = [ln for ln in rep.stdout.splitlines() if ln.strip() and not ln.startswith("#")]
    with open(txt, "w") as f:
        f.write("\n".join(lines) + "\n")
    log(f"{server.name}: profile of a {args.profile}-client round ({r['tok_s']} tok/s) in {txt}")
    return {"clients": args.profile, "tok_s": r["tok_s"], "top": lines[:40]}


def check_greedy(rounds):
    """Marks per round whether each prompt's text equals the text it got at the lowest C."""
    ref = {}
    for c in sorted(rounds, key=int):
        texts = rounds[c].pop("texts")
        same = total = 0
        for i, t in texts.items():
            if i in ref:
                total += 1
                same += t == ref[i]
            else:
                ref[i] = t
        rounds[c]["greedy_same_as_lower_c"] = f"{same}/{total}" if total else "-"


def ratios(result, names):
    out = {}
    for name in names:
        r = result["rounds"][name]
        if "1" in r and "16" in r and r["1"]["tok_s"]:
            out[f"{name} 16 vs 1 clients"] = round(r["16"]["tok_s"] / r["1"]["tok_s"], 2)
        if "1" in r and "16" in r and r["1"].get("decode_tok_s") and r["16"].get("decode_tok_s"):
            out[f"{name} 16 vs 1 clients, decode phase"] = round(r["16"]["decode_tok_s"] / r["1"]["decode_tok_s"], 2)
    if "ember" in names and "llama-server" in names:
        for c in PEER_CLIENTS:
            e, l = result["rounds"]["ember"].get(str(c)), result["rounds"]["llama-server"].get(str(c))
            if e and l and l["tok_s"]:
                out[f"ember / llama-server at {c} clients"] = round(e["tok_s"] / l["tok_s"], 2)
    return out


def pass_ratios(result, name):
    """C=16 over C=1 within each pass (the repetitions run as passes over all client counts,
    so a pair shares the host's state of those minutes); [] without repetitions."""
    r = result["rounds"][name]
    one, sixteen = r.get("1", {}).get("tok_s_runs", []), r.get("16", {}).get("tok_s_runs", [])
    if len(one) < 2 or len(one) != len(sixteen):
        return []
    return [round(b / a, 2) if a and b else None for a, b in zip(one, sixteen)]


def print_table(result, names):
    fmt = lambda x: "-" if x is None else (f"{x:.1f}" if isinstance(x, float) else str(x))  # noqa: E731
    print(f"\n### {os.path.basename(result['model'])} ({result['file_mib']} MiB)\n")
    print("| server | clients | tok/s | decode tok/s | ITL p50 ms | ITL p99 ms | TTFT p50 ms | TTFT p99 ms "
          "| server cores | other load | load avg | greedy same | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in names:
        for c, r in result["rounds"][name].items():
            runs = r.get("tok_s_runs", [])
            tok_s = fmt(r["tok_s"]) + (f" ({min(runs):.1f}–{max(runs):.1f})" if len(runs) > 1 else "")
            greedy = r["greedy_same_as_lower_c"] + ("" if r.get("texts_same_across_runs", True) else ", runs differ")
            print(f"| {name} | {c} | {tok_s} | {fmt(r.get('decode_tok_s'))} "
                  f"| {fmt(r['itl_p50_ms'])} | {fmt(r['itl_p99_ms'])} "
                  f"| {fmt(r['ttft_p50_ms'])} | {fmt(r['ttft_p99_ms'])} | {fmt(r['server_cores_busy'])} "
                  f"| {fmt(None if r['other_load'] is None else round(100 * r['other_load']))}% "
                  f"| {r['loadavg_start'][0]:.2f} | {greedy} "
                  f"| {r['n_errors'] + r['requests_with_wrong_token_count']} |")
    print()
    for k, v in result["ratios"].items():
        target = TARGET_SCALING if "vs 1" in k else TARGET_VS_PEER
        wall_ratio = k.endswith("vs 1 clients")  # per-pass ratios exist for the wall-time figure
        per_pass = result.get("scaling_per_pass", {}).get(k.split(" 16 vs 1")[0], []) if wall_ratio else []
        passes = f"; per pass {', '.join('-' if x is None else f'{x:.2f}' for x in per_pass)}" if per_pass else ""
        print(f"- {k}: {v:.2f}x (target >= {target:.1f}x: {'met' if v >= target else 'NOT met'}){passes}")


def machine_info(args):
    cpu = open("/proc/cpuinfo").read()
    model = re.search(r"model name\s*:\s*(.*)", cpu)
    flags = set((re.search(r"flags\s*:\s*(.*)", cpu) or [None, ""])[1].split())
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": model.group(1) if model else platform.processor(), "cores": os.cpu_count(),
        "simd": [f for f in ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "amx_tile") if f in flags],
        "kernel": platform.release(), "loadavg_start": loadavg(),
        "parallel": args.parallel, "ctx": args.ctx, "threads": args.threads, "clients": args.clients,
        "max_tokens": args.max_tokens, "requests_per_client": args.requests_per_client,
        "min_requests": args.min_requests,
        "prompt": f"{args.prompt_tokens} token ids" if args.prompt_tokens else f"Request i: {BASE_PROMPT}",
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", required=True, help="GGUF file (repeatable)")
    ap.add_argument("--ember", help="the ember binary (runs `ember serve`)")
    ap.add_argument("--llama-server", help="llama.cpp's llama-server binary")
    ap.add_argument("--parallel", type=int, default=32, help="slots on both servers")
    ap.add_argument("--ctx", type=int, default=512, help="context per slot")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--clients", default="1,4,8,16,32")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt-tokens", type=int, default=0, help="prompts as N token ids instead of text")
    ap.add_argument("--requests-per-client", type=int, default=2)
    ap.add_argument("--min-requests", type=int, default=0,
                    help="at least this many requests per round (more per client at low C)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds per server and C (servers alternate going first); the median is kept")
    ap.add_argument("--start-timeout", type=float, default=300)
    ap.add_argument("--request-timeout", type=float, default=600)
    ap.add_argument("--ember-args", default="", help="extra arguments for ember serve")
    ap.add_argument("--llama-server-args", default="", help="extra arguments for llama-server")
    ap.add_argument("--log-dir", default="build/bench", help="server logs go here")
    ap.add_argument("--json", help="write all results here")
    ap.add_argument("--profile", type=int, default=0, metavar="C",
                    help="after the rounds, one more round at C clients under `perf record` per server")
    args = ap.parse_args()
    args.clients = [int(c) for c in args.clients.split(",")]
    global PROMPT_TOKENS
    PROMPT_TOKENS = args.prompt_tokens
    args.ember_args, args.llama_server_args = args.ember_args.split(), args.llama_server_args.split()
    names = [n for n, path in (("llama-server", args.llama_server), ("ember", args.ember)) if path]
    if not names:
        ap.error("give --ember and/or --llama-server")
    for n, path in (("llama-server", args.llama_server), ("ember", args.ember)):
        if path and not os.access(path, os.X_OK):
            ap.error(f"{n}: {path} is not an executable")
    for m in args.model:
        if not os.path.isfile(m):
            ap.error(f"no model file {m}")
    if max(args.clients) > args.parallel:
        log(f"note: {max(args.clients)} clients > {args.parallel} slots: the extra requests queue")
    os.makedirs(args.log_dir, exist_ok=True)

    report = {"machine": machine_info(args), "results": []}
    failed = False
    for m in args.model:
        try:
            result = bench_model(args, m, names, args.log_dir)
        except RuntimeError as e:
            log(f"ERROR on {m}: {e}")
            failed = True
            continue
        result["ratios"] = ratios(result, names)
        result["scaling_per_pass"] = {n: pass_ratios(result, n) for n in names}
        report["results"].append(result)
        print_table(result, names)
        sys.stdout.flush()
    report["machine"]["loadavg_end"] = loadavg()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        log(f"wrote {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
