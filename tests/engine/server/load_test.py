#!/usr/bin/env python3
"""Load test of `ember serve` on loopback (issue #14): three rounds of 200 requests from 16
concurrent clients on /v1/completions and /v1/chat/completions, streamed and not; one in ten
is malformed (must get its 4xx with an OpenAI error object), two in ten disconnect after their
first streamed token (their requests must be cancelled). Every well-formed request must be
answered completely: exactly max_tokens tokens (ignore_eos), a finish_reason, and for streams
the final chunk and "data: [DONE]". Afterwards the server must be idle, /health must answer,
and its resident memory must be back at its level after the warm-up round. Then a burst: 256
connections opened at once, each asking for /health, must all be answered (the listen backlog
of Debian's httplib is 5: such a burst lost connections, and 32 benchmark clients saw resets).
Before the burst, the mix runs again beside 64 slowloris connections (127.0.0.2, cut at the
2 s read deadline and opened again) and header floods (127.0.0.3) (issue #34), 2 s and then a
measured 6 s: every well-formed request answered, /health and /metrics (asked in turn every
100 ms) under 1 s throughout, every flood answered 431, resident memory after the measured
attack within 10 % of its level before it (the host tier aside; see attack_rounds).

The memory bound. The warm-up round runs the same 200-request mix first, so that everything a
server keeps for good is in place before the measurement: its HTTP threads, the allocator's
per-thread arenas, the engine's buffers at their largest batch. After each further identical
round only what the rounds leaked remains, plus the allocator's noise (freed chunks it keeps
rather than returns). The bound, 4 MiB over the warm-up level, is 10 KiB per request of the two
measured rounds: below what one leaked request holds (its prompt and text, an event queue, a
response of several KiB, a KV sequence), and well above the noise measured (a few hundred KiB;
see the printed numbers). The prefix cache's host-RAM tier (`--cache-ram`) grows by design as
the rounds' new prompts evict older ones from the KV pool: its bytes (kv_host_cache_bytes in
/v1/status) are subtracted, so what is bounded is everything else.

Standard library only. Exits non-zero on the first failed check."""
import argparse
import http.client
import json
import random
import selectors
import socket
import sys
import threading
import time
from urllib.parse import urlparse

from attackers import HealthProbe, Slowloris, flood
from ember_serve import EmberServe

CLIENTS = 16
REQUESTS = 200
ROUNDS = 2  # measured rounds after the warm-up
RSS_BOUND = 4 << 20
ATTACK_S = 6.0  # the attack rounds' length: the slowloris connections are cut and come back twice

MALFORMED = [  # (body, expected status)
    (b"{not json", 400),
    (json.dumps({"prompt": 5, "max_tokens": 4}).encode(), 400),
    (json.dumps({"prompt": "x", "max_tokens": "many"}).encode(), 400),
    (json.dumps({"model": "no-such-model", "prompt": "x"}).encode(), 404),
    (json.dumps({"prompt": "x", "n": 3}).encode(), 400),
    (json.dumps({"prompt": "x", "max_tokens": 10 ** 9}).encode(), 400),
    (b"[" * 10000, 400),
    (b"", 400),
]


class Failure(Exception):
    pass


def request(url, path, body, stream):
    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    return conn, conn.getresponse()


def sse_events(resp):
    """The data of each SSE event until [DONE]; comments (": ...") are skipped."""
    while True:
        line = resp.readline()
        if not line:
            raise Failure("the stream ended before data: [DONE]")
        line = line.decode().rstrip("\n")
        if line.startswith("data: "):
            if line == "data: [DONE]":
                return
            yield json.loads(line[6:])


def well_formed(i, rng):
    chat = i % 2 == 0
    body = {"max_tokens": rng.randint(16, 64), "temperature": 0.7, "seed": i, "ignore_eos": True,
            "stream": i % 4 < 2}
    if chat:
        body["messages"] = [{"role": "user", "content": f"Tell me story number {i}."}]
    else:
        body["prompt"] = f"Once upon a time, story {i}"
    if body["stream"]:
        body["stream_options"] = {"include_usage": True}
    return ("/v1/chat/completions" if chat else "/v1/completions"), body


def run_well_formed(url, path, body):
    conn, resp = request(url, path, json.dumps(body).encode(), body["stream"])
    try:
        if resp.status != 200:
            raise Failure(f"{path}: status {resp.status}: {resp.read()[:300]!r}")
        if not body["stream"]:
            r = json.loads(resp.read())
            usage, finish = r["usage"], r["choices"][0]["finish_reason"]
        else:
            usage, finish = None, None
            for ev in sse_events(resp):
                if ev.get("usage"):
                    usage = ev["usage"]
                for ch in ev["choices"]:
                    finish = ch["finish_reason"] or finish
        if finish != "length" or usage is None or usage["completion_tokens"] != body["max_tokens"]:
            raise Failure(f"{path}: incomplete answer: finish {finish}, usage {usage}, asked {body['max_tokens']}")
    finally:
        conn.close()


def run_disconnect(url, i):
    body = {"prompt": f"A long story {i}", "max_tokens": 400, "ignore_eos": True, "stream": True}
    conn, resp = request(url, "/v1/completions", json.dumps(body).encode(), True)
    if resp.status != 200:
        raise Failure(f"disconnecting stream: status {resp.status}")
    next(sse_events(resp))  # the first token, then the client goes away
    conn.sock.close()
    conn.close()


def run_malformed(url, i):
    body, want = MALFORMED[i % len(MALFORMED)]
    conn, resp = request(url, "/v1/completions", body, False)
    try:
        r = json.loads(resp.read())
        if resp.status != want or "message" not in r.get("error", {}):
            raise Failure(f"malformed body {body[:40]!r}: status {resp.status} (want {want}), {r}")
    finally:
        conn.close()


def round_of_requests(url, seed):
    rng = random.Random(seed)
    jobs = []
    for i in range(REQUESTS):
        kind = "malformed" if i % 10 == 0 else "disconnect" if i % 10 in (3, 7) else "ok"
        jobs.append((kind, i, well_formed(i, rng) if kind == "ok" else None))
    rng.shuffle(jobs)
    lock = threading.Lock()
    errors, counts = [], {"ok": 0, "malformed": 0, "disconnect": 0}

    def client():
        while True:
            with lock:
                if not jobs or errors:
                    return
                kind, i, req = jobs.pop()
            try:
                if kind == "ok":
                    run_well_formed(url, *req)
                elif kind == "malformed":
                    run_malformed(url, i)
                else:
                    run_disconnect(url, i)
                with lock:
                    counts[kind] += 1
            except Exception as e:  # noqa: BLE001 - every failure is reported
                with lock:
                    errors.append(f"{kind} #{i}: {e!r}")

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise Failure("; ".join(errors[:5]))
    return counts, time.monotonic() - t0


def burst_of_connections(url, n=256, limit_s=20):
    """n non-blocking connects at once, then GET /health on each: how many got a 200."""
    u = urlparse(url)
    request = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    sel = selectors.DefaultSelector()
    replies = {}
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex((u.hostname, u.port))
        sel.register(s, selectors.EVENT_WRITE)
        replies[s] = b""
    open_socks, deadline = n, time.monotonic() + limit_s
    while open_socks and time.monotonic() < deadline:
        for key, events in sel.select(0.5):
            s = key.fileobj
            try:
                if events & selectors.EVENT_WRITE:
                    s.sendall(request)
                    sel.modify(s, selectors.EVENT_READ)
                    continue
                data = s.recv(4096)
                if data:
                    replies[s] += data
                    continue
            except OSError:
                pass
            sel.unregister(s)
            s.close()
            open_socks -= 1
    for s in list(sel.get_map().values()):
        s.fileobj.close()
    return sum(r.startswith(b"HTTP/1.1 200") for r in replies.values())


def attack(server, seconds, seed):
    """The mix, round after round for `seconds`, beside 64 slowloris connections (127.0.0.2, cut
    at the deadline and opened again) and header floods one after another (127.0.0.3); checks
    that every request ran, /health and /metrics stayed under 1 s, every flood got 431."""
    port = int(server.url.rsplit(":", 1)[1])
    probe = HealthProbe(port).start()
    slow = Slowloris(port, 64, source="127.0.0.2", interval=0.5).start()
    floods, stop = [], threading.Event()

    def flooder():
        while not stop.is_set():
            floods.append(flood(port, 16 << 20, source="127.0.0.3"))

    flooding = threading.Thread(target=flooder)
    flooding.start()
    t0, rounds = time.monotonic(), 0
    try:
        while time.monotonic() - t0 < seconds:
            counts, _ = round_of_requests(server.url, seed + rounds)
            rounds += 1
            if counts != {"ok": 140, "malformed": 20, "disconnect": 40}:
                raise Failure(f"under attack, not every request ran: {counts}")
    finally:
        stop.set()
        flooding.join()
        ended = slow.stop()
        probe.stop()
    statuses = sorted({f[0] for f in floods}, key=str)
    print(f"under attack ({time.monotonic() - t0:.1f} s, {rounds} rounds of 200 requests, all answered): "
          f"slowloris {slow.opened} connections opened, ended {ended}; {len(floods)} header floods answered "
          f"{statuses}; /health and /metrics {len(probe.latencies)} times, slowest {probe.worst() * 1000:.0f} ms")
    if probe.failures or probe.worst() >= 1.0:
        raise Failure(f"/health under attack: slowest {probe.worst():.2f} s, failures {probe.failures[:3]}")
    if statuses != [431]:
        raise Failure(f"header floods were answered {statuses}, not 431")
    if set(ended) - {408}:
        raise Failure(f"slowloris connections ended otherwise than by 408: {ended}")


def attack_rounds(server):
    """A short attack first, then the measured one (ATTACK_S). As with the warm-up round, the
    first attack puts in place what the server keeps for good: the threads it makes for extra
    connections each get an allocator arena (glibc), which stays, trimmed, after they end (a
    few MiB here, printed). What the measured attack leaves must then be within 10 %."""

    def level():
        status = server.wait_idle()
        time.sleep(1.5)  # the extra threads end after a second idle, the last one trims
        return server.rss_bytes(), status["kv_host_cache_bytes"]

    rss_idle, host_idle = level()
    attack(server, 2.0, 90)
    rss_before, host_before = level()
    attack(server, ATTACK_S, 100)
    rss_after, host_after = level()
    first = rss_before - rss_idle - (host_before - host_idle)
    grown = rss_after - rss_before - (host_after - host_before)
    print(f"RSS besides the prefix cache's host tier: {rss_idle >> 10} KiB before any attack, {first / 1024:+.0f} KiB "
          f"after the first ({first / rss_idle * 100:+.1f} %), {grown / 1024:+.0f} KiB after the measured one "
          f"({grown / rss_before * 100:+.1f} %)")
    if grown > rss_before // 10:
        raise Failure(f"RSS grew {grown >> 10} KiB under attack (more than 10 % of {rss_before >> 10} KiB)")


def cancelled_count(server):
    u = urlparse(server.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    for line in text.splitlines():
        if line.startswith('ember_generations_total{stop_reason="cancelled"}'):
            return int(line.split()[-1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    ap.add_argument("--model", required=True)
    args = ap.parse_args()
    server = EmberServe(args.ember, args.model, "--parallel", "8", "--ctx", "512", "--read-deadline-ms", "2000")
    try:
        rss_start = server.rss_bytes()
        counts, secs = round_of_requests(server.url, 1)
        host_warm = server.wait_idle()["kv_host_cache_bytes"]
        rss_warm = server.rss_bytes()
        print(f"warm-up round: {counts} in {secs:.1f} s; RSS {rss_start >> 10} KiB at start, {rss_warm >> 10} KiB after")
        for r in range(1, ROUNDS + 1):
            counts, secs = round_of_requests(server.url, 1 + r)
            status = server.wait_idle()
            rss_after = server.rss_bytes()
            host = status["kv_host_cache_bytes"] - host_warm
            grown = rss_after - rss_warm - host
            print(f"measured round {r}: {counts} in {secs:.1f} s; RSS {rss_after >> 10} KiB "
                  f"({(rss_after - rss_warm) / 1024:+.0f} KiB against the warm-up, of which the prefix cache's "
                  f"host tier {host / 1024:+.0f} KiB: {grown / 1024:+.0f} KiB else)")
            if counts != {"ok": 140, "malformed": 20, "disconnect": 40}:
                raise Failure(f"not every request ran: {counts}")
            if status["kv_blocks"]["used"] != 0:
                raise Failure(f"KV blocks still in use when idle: {status['kv_blocks']}")
            if server.get_json("/health") != {"status": "ok"}:
                raise Failure("/health is not ok after the load")
            if grown > RSS_BOUND:
                raise Failure(f"RSS grew by {grown >> 10} KiB besides the prefix cache's host tier "
                              f"(bound {RSS_BOUND >> 10} KiB)")
        cancelled = cancelled_count(server)
        print(f"cancelled generations (disconnected clients): {cancelled} of {40 * (ROUNDS + 1)}")
        if cancelled < 40 * (ROUNDS + 1):
            raise Failure(f"only {cancelled} of the {40 * (ROUNDS + 1)} disconnected streams were cancelled")
        attack_rounds(server)
        answered = burst_of_connections(server.url)
        print(f"burst of 256 connections: {answered} answered")
        if answered != 256:
            raise Failure(f"a burst of 256 connections: only {answered} answered within 20 s")
    finally:
        code = server.stop()
    if code != 0:
        raise Failure(f"ember serve exited {code} on SIGTERM")
    print("load test: passed")


if __name__ == "__main__":
    sys.exit(main())
