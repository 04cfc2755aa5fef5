"""`ember serve` as a child process for the server's Python tests (openai_compat.py,
ollama_compat.py, load_test.py): started on a free port, its URL read from the first line it
prints, stopped with SIGTERM (a clean shutdown must exit 0); and the checks the client tests
share. Standard library only."""
import json
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request


class EmberServe:
    def __init__(self, ember, model, *extra, stderr=None, start_timeout=None):
        """start_timeout: seconds to print the URL in, else the process is killed (a hang fails)."""
        self.proc = subprocess.Popen([ember, "serve", model, "--port", "0", *extra], stdout=subprocess.PIPE,
                                     stderr=stderr, text=True)
        timer = threading.Timer(start_timeout, self.proc.kill) if start_timeout else None
        if timer:
            timer.start()
        line = self.proc.stdout.readline()
        if timer:
            timer.cancel()
        m = re.search(r"(http://[0-9.]+:[0-9]+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"ember serve did not print its URL (exit {self.proc.wait()}): {line!r}")
        self.url = m.group(1)

    @property
    def pid(self):
        return self.proc.pid

    def get_json(self, path, key=None):
        req = urllib.request.Request(self.url + path)
        if key:
            req.add_header("Authorization", "Bearer " + key)
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def post_json(self, path, body, timeout=120):
        """POSTs `body` as JSON; returns (status, the JSON answer), errors included."""
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def rss_bytes(self):
        """Resident memory of the server process (/proc/PID/status VmRSS)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def wait_idle(self, timeout=20.0, key=None):
        """Until the status endpoint shows no request running or queued; returns the status."""
        deadline = time.monotonic() + timeout
        while True:
            s = self.get_json("/v1/status", key)
            if s["running"] == 0 and s["queued"] == 0:
                return s
            if time.monotonic() > deadline:
                raise AssertionError(f"requests still in flight after {timeout} s: {s['requests']}")
            time.sleep(0.05)

    def stop(self, timeout=30.0):
        """SIGTERM; returns the exit status (0 for a clean shutdown)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"ember serve did not stop within {timeout} s of SIGTERM")
        return self.proc.returncode


def check(cond, what):
    """One check of a client test: raises on failure, prints what passed."""
    if not cond:
        raise AssertionError(what)
    print(f"ok: {what}")


def count_tokens(ember, model, text):
    """Tokens of `text` as the model reads a rendered prompt (`ember tokenize`, specials parsed)."""
    out = subprocess.run([ember, "tokenize", model, "--ids", "--add-special", "--parse-special", text],
                         check=True, capture_output=True, text=True).stdout
    return len(out.split())
