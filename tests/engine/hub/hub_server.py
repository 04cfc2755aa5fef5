#!/usr/bin/env python3
"""A stand-in for the Hugging Face model hub on 127.0.0.1, for tests/engine/hub.

Serves  GET /api/models?search=..   GET /api/models/{owner}/{name}/tree/{rev}?recursive=1
        GET /{owner}/{name}/resolve/{rev}/{file}  -> 302 to /_storage/{owner}/{name}/{file}
        GET /_storage/...  the bytes, honouring Range (http.server alone ignores it)
from ROOT/{owner}/{name}/ (real files written by the test). A repository may hold a
`.fault` JSON file that makes the server misbehave:
  token: "T"          gated: 401 without a token, 403 with another one (API and resolve)
  redirect_host: "H"  resolve redirects to http://H:PORT/_storage/... (another host name)
  drop_after: N       close the connection after N body bytes (the first `times` transfers)
  stall_after: N      send N bytes, then nothing (the first `times` transfers)
  ignore_range: true  always answer 200 with the whole file
  slow: S             wait S seconds after each 64 KiB of a file's body (every transfer)
  corrupt: true       flip one byte of every body (the published hash then does not match)
  tree_sha: {path: h} publish these SHA-256s instead of the real ones
  tree_size: {path: n} publish these sizes instead of the real ones
  drip_listing: S     send the file tree one byte every S seconds
  huge_listing: true  a file tree of 65 MiB (an entry with a long name)
  page_size: N        the file tree in pages of N entries, linked by `Link: <..>; rel="next"`
  status: N           answer resolve with HTTP N
  times: K            how many transfers per file the drop/stall faults hit (default 1)
  only: "S"           the drop/stall faults hit only files whose path contains S
Each request is appended to LOG as one JSON line: method, path, host, range, auth.
Prints the port on stdout once listening. --tls CERT KEY serves HTTPS instead.
"""
import argparse
import hashlib
import json
import os
import socketserver
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = ""
LOG = ""
LOCK = threading.Lock()
FAULT_COUNTS = {}


def log_request(entry):
    with LOCK, open(LOG, "a") as f:
        f.write(json.dumps(entry) + "\n")


def repo_dir(owner, name):
    d = os.path.join(ROOT, owner, name)
    return d if os.path.isdir(d) else None


def fault_of(d):
    p = os.path.join(d, ".fault")
    if not os.path.exists(p):
        return {}
    with open(p) as f:
        return json.load(f)


def repo_files(d):
    out = []
    for base, dirs, files in os.walk(d):
        dirs.sort()
        for fn in sorted(files):
            if fn.startswith("."):
                continue
            full = os.path.join(base, fn)
            out.append(os.path.relpath(full, d))
    return out


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", ctype="application/json", headers=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def error(self, status, msg):
        self.reply(status, json.dumps({"error": msg}).encode())

    def gate(self, fault):
        """False (and the answer sent) when a gated repository refuses this request."""
        token = fault.get("token")
        if not token:
            return True
        auth = self.headers.get("Authorization")
        if auth is None:
            self.error(401, "Access to this repository is restricted. You must be authenticated.")
            return False
        if auth != "Bearer " + token:
            self.error(403, "Access to this gated repository is not granted to this token.")
            return False
        return True

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/")[1:]]
        log_request({"method": "GET", "path": url.path, "query": url.query,
                     "host": self.headers.get("Host", ""), "range": self.headers.get("Range"),
                     "auth": self.headers.get("Authorization")})
        try:
            if parts[:2] == ["api", "models"] and len(parts) == 2:
                return self.search(urllib.parse.parse_qs(url.query))
            if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "tree":
                return self.tree(parts[2], parts[3], parts[5], urllib.parse.parse_qs(url.query))
            if len(parts) >= 5 and parts[2] == "resolve":
                return self.resolve(parts[0], parts[1], parts[3], "/".join(parts[4:]))
            if parts[0] == "_storage" and len(parts) >= 4:
                return self.storage(parts[1], parts[2], "/".join(parts[3:]))
            self.error(404, "no such endpoint")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def search(self, q):
        query = q.get("search", [""])[0].lower()
        out = []
        for owner in sorted(os.listdir(ROOT)):
            for name in sorted(os.listdir(os.path.join(ROOT, owner))):
                d = os.path.join(ROOT, owner, name)
                rid = owner + "/" + name
                if query not in rid.lower():
                    continue
                if q.get("filter", [""])[0] == "gguf" and not any(f.endswith(".gguf") for f in repo_files(d)):
                    continue
                meta = {}
                if os.path.exists(os.path.join(d, ".meta")):
                    with open(os.path.join(d, ".meta")) as f:
                        meta = json.load(f)
                out.append({"id": rid, "downloads": meta.get("downloads", 0), "likes": meta.get("likes", 0),
                            "tags": ["gguf"]})
        if q.get("sort", [""])[0] == "downloads":
            out.sort(key=lambda m: -m["downloads"])
        limit = int(q.get("limit", ["1000"])[0])
        self.reply(200, json.dumps(out[:limit]).encode())

    def tree(self, owner, name, rev, query=None):
        d = repo_dir(owner, name)
        if d is None:
            return self.error(404, "Repository not found")
        fault = fault_of(d)
        if not self.gate(fault):
            return
        if rev != "main":
            return self.error(404, "Revision Not Found")
        override = fault.get("tree_sha", {})
        out = []
        for rel in repo_files(d):
            full = os.path.join(d, rel)
            size = int(fault.get("tree_size", {}).get(rel, os.path.getsize(full)))
            entry = {"type": "file", "oid": "0" * 40, "size": size, "path": rel}
            if rel.endswith(".gguf"):
                entry["lfs"] = {"oid": override.get(rel, sha256_of(full)), "size": size, "pointerSize": 134}
            out.append(entry)
        page = int(fault.get("page_size", 0))
        if fault.get("huge_listing"):
            out.append({"type": "file", "oid": "0" * 40, "size": 1, "path": "x" * (65 << 20)})
        if fault.get("drip_listing"):
            body = json.dumps(out).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                for i in range(len(body)):
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(float(fault["drip_listing"]))
            except OSError:
                pass  # the client gave up: what it should do
            return
        if not page:
            return self.reply(200, json.dumps(out).encode())
        cursor = int((query or {}).get("cursor", ["0"])[0])
        headers = {}
        if cursor + page < len(out):
            headers["Link"] = '<http://%s/api/models/%s/%s/tree/%s?recursive=1&cursor=%d>; rel="next"' % (
                self.headers.get("Host"), owner, name, rev, cursor + page)
        self.reply(200, json.dumps(out[cursor:cursor + page]).encode(), headers=headers)

    def resolve(self, owner, name, rev, rel):
        d = repo_dir(owner, name)
        if d is None:
            return self.error(404, "Repository not found")
        fault = fault_of(d)
        if not self.gate(fault):
            return
        if "status" in fault:
            return self.error(int(fault["status"]), "injected failure")
        if rev != "main" or not os.path.isfile(os.path.join(d, rel)):
            return self.error(404, "Entry not found")
        host = fault.get("redirect_host")
        target = "/_storage/%s/%s/%s" % (owner, name, urllib.parse.quote(rel))
        if host:
            target = "http://%s:%d%s" % (host, self.server.server_address[1], target)
        self.reply(302, b"", headers={"Location": target})

    def storage(self, owner, name, rel):
        d = repo_dir(owner, name)
        full = os.path.join(d, rel) if d else ""
        if not d or not os.path.isfile(full):
            return self.error(404, "Entry not found")
        fault = fault_of(d)
        with open(full, "rb") as f:
            data = f.read()
        if fault.get("corrupt"):
            data = bytearray(data)
            data[len(data) // 2] ^= 0xFF
            data = bytes(data)
        size = len(data)
        start, status = 0, 200
        rng = self.headers.get("Range")
        if rng and not fault.get("ignore_range") and rng.startswith("bytes="):
            first, _, last = rng[6:].partition("-")
            start = int(first)
            end = int(last) + 1 if last else size
            if start >= size:
                return self.reply(416, b"", headers={"Content-Range": "bytes */%d" % size})
            end = min(end, size)
            body = data[start:end]
            status = 206
        else:
            body = data
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, start + len(body) - 1, size))
        self.end_headers()
        self.send_body(body, fault, owner + "/" + name + "/" + rel)

    def send_body(self, body, fault, key):
        with LOCK:
            n = FAULT_COUNTS.get(key, 0)
            FAULT_COUNTS[key] = n + 1
        faulty = n < int(fault.get("times", 1)) and fault.get("only", "") in key
        if faulty and "drop_after" in fault:
            self.wfile.write(body[:int(fault["drop_after"])])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if faulty and "stall_after" in fault:
            self.wfile.write(body[:int(fault["stall_after"])])
            self.wfile.flush()
            time.sleep(60)  # the client's watchdog (or the test's kill) ends this
            return
        for i in range(0, len(body), 1 << 16):
            self.wfile.write(body[i:i + (1 << 16)])
            if fault.get("slow"):
                self.wfile.flush()
                time.sleep(float(fault["slow"]))


def main():
    global ROOT, LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    a = ap.parse_args()
    ROOT, LOG = a.root, a.log
    ThreadingHTTPServer.daemon_threads = True
    # Clients that hang up mid-transfer (the faults under test) are normal here: no tracebacks.
    ThreadingHTTPServer.handle_error = lambda self, request, address: None
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if a.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.tls[0], a.tls[1])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
