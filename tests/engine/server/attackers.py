"""Hostile clients for the server's tests (hostile_clients.py, load_test.py), standard library only.

Slowloris   N connections that send a request head one byte at a time, never finishing it; a
            connection the server cuts is counted by how it ended (408, 503, closed) and opened
            again while the attack runs.
flood()     one GET /health whose head is an endless stream of 1 KiB header lines.
HealthProbe GET /health and /metrics in turn every 100 ms on fresh connections, keeping the
            slowest answer.

Each can start from its own loopback address (127.0.0.2, ...: all of 127/8 is this machine), as
an attacker on another machine would, so that the server's per-address cap can tell them apart
from the well-behaved clients on 127.0.0.1."""
import http.client
import os
import selectors
import socket
import threading
import time

HEAD = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: "


def connect(port, source=None, timeout=10):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    if source:
        s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def status_of(reply):
    """The status code of a raw HTTP reply, or None."""
    parts = reply.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and reply.startswith(b"HTTP/1.") and parts[1].isdigit() else None


class Slowloris:
    def __init__(self, port, n, source=None, interval=0.25, reconnect=True):
        self.port, self.n, self.source, self.interval, self.reconnect = port, n, source, interval, reconnect
        self.ended = {}  # how connections ended: status code, or "closed"
        self.opened = 0
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stop_flag.set()
        self.thread.join()
        return self.ended

    def _open(self, sel):
        s = connect(self.port, self.source)
        s.setblocking(False)
        s.send(HEAD)  # a few bytes: the socket takes them at once
        sel.register(s, selectors.EVENT_READ, {"reply": b"", "sent": 0})
        self.opened += 1

    def _end(self, sel, s, reply):
        key = status_of(reply) or "closed"
        self.ended[key] = self.ended.get(key, 0) + 1
        sel.unregister(s)
        s.close()

    def _run(self):
        sel = selectors.DefaultSelector()
        for _ in range(self.n):
            self._open(sel)
        next_byte = time.monotonic()
        while not self.stop_flag.is_set() and (self.reconnect or sel.get_map()):
            for key, _ in sel.select(0.05):
                s = key.fileobj
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                if data:
                    key.data["reply"] += data
                    continue
                self._end(sel, s, key.data["reply"])
                if self.reconnect and not self.stop_flag.is_set():
                    self._open(sel)
            if time.monotonic() >= next_byte:  # one more byte of a header that never ends
                next_byte += self.interval
                for key in list(sel.get_map().values()):
                    try:
                        key.fileobj.send(b"a")
                    except OSError:
                        pass
        for key in list(sel.get_map().values()):
            key.fileobj.close()


def flood(port, total_bytes, source=None, line_bytes=1024):
    """Sends a GET /health head of `total_bytes` header lines (or until the server stops
    reading); returns (status of the answer or None, bytes sent)."""
    s = connect(port, source, timeout=30)
    reply = bytearray()

    def read():
        try:
            while True:
                d = s.recv(65536)
                if not d:
                    return
                reply.extend(d)
        except OSError:
            return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    line = b"X-Flood: " + b"f" * (line_bytes - 11) + b"\r\n"
    chunk = line * 64
    sent = 0
    try:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        while sent < total_bytes:
            s.sendall(chunk)
            sent += len(chunk)
        s.sendall(b"\r\n")
    except OSError:
        pass  # the server closed the connection: what it should do
    reader.join(10)
    s.close()
    return status_of(bytes(reply)), sent


class HealthProbe:
    """GET /health and /metrics in turn every `every` seconds from 127.0.0.1; records each
    latency (failures as inf)."""

    def __init__(self, port, every=0.1, timeout=5):
        self.port, self.every, self.timeout = port, every, timeout
        self.latencies, self.failures = [], []
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stop_flag.set()
        self.thread.join()
        return self

    def worst(self):
        return max(self.latencies) if self.latencies else float("inf")

    def _run(self):
        n = 0
        while not self.stop_flag.is_set():
            t0 = time.monotonic()
            path = ("/health", "/metrics")[n % 2]
            n += 1
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
                c.request("GET", path)
                r = c.getresponse()
                body = r.read()
                c.close()
                ok = body == b'{"status":"ok"}' if path == "/health" else b"ember_http_requests_total" in body
                if r.status != 200 or not ok:
                    self.failures.append(f"{path}: status {r.status}: {body[:80]!r}")
                self.latencies.append(time.monotonic() - t0)
            except OSError as e:
                self.failures.append(repr(e))
                self.latencies.append(float("inf"))
            self.stop_flag.wait(max(0.0, self.every - (time.monotonic() - t0)))


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def threads_of(pid):
    return len(os.listdir(f"/proc/{pid}/task"))
