#!/usr/bin/env python3
"""`ember serve --cache-disk` over a damaged KV disk cache (issue #34, item 4), real processes:

fifo seed     a FIFO where the cache's `seed` file should be (as found: start-up hung in open()
              and ignored SIGINT and SIGTERM): the server starts, answers, and stops on SIGTERM;
              the folder is set aside as <folder>.damaged-<time>, the FIFO still in it.
seed folder   a folder named `seed` (as found: exit 1): the same.
folder file   a regular file where the cache's folder should be (as found: exit 1): the same.
root file     --cache-dir names a regular file: no cache can be made; the server runs without
              one and says so ("KV disk cache off").

Each start must print its URL within 30 s (a hang fails the test instead of blocking it).
Standard library only. Exits non-zero on the first failed check."""
import argparse
import json
import os
import shutil
import sys
import tempfile
import urllib.request

from ember_serve import EmberServe


class Failure(Exception):
    pass


def check(ok, what):
    if not ok:
        raise Failure(what)


def start(args, root, log):
    """ember serve with the disk cache at `root`; killed if it has not printed its URL in 30 s."""
    try:
        return EmberServe(args.ember, args.model, "--cache-disk", "4MiB", "--cache-dir", root, stderr=log,
                          start_timeout=30)
    except RuntimeError as e:
        raise Failure(f"ember serve did not start (blocked on the cache, or exited): {e}")


def answers(server):
    check(server.get_json("/health") == {"status": "ok"}, "/health")
    req = urllib.request.Request(server.url + "/v1/completions", method="POST",
                                 data=json.dumps({"prompt": "Once upon a time", "max_tokens": 8}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        check(r.status == 200 and json.loads(r.read())["choices"][0]["text"], "a completion")


def identity_folder(root):
    names = [n for n in os.listdir(root) if len(n) == 16]
    check(len(names) == 1, f"one cache folder in {root}: {os.listdir(root)}")
    return os.path.join(root, names[0])


def set_aside(root):
    return [n for n in os.listdir(root) if ".damaged-" in n]


def serve_and_stop(args, root, log_path):
    with open(log_path, "w") as log:
        server = start(args, root, log)
        try:
            answers(server)
        finally:
            code = server.stop()
    check(code == 0, f"ember serve exited {code} on SIGTERM")
    with open(log_path) as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    ap.add_argument("--model", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ember-damaged-kv-")
    try:
        root = os.path.join(tmp, "kv")
        log = os.path.join(tmp, "serve.log")
        serve_and_stop(args, root, log)  # a healthy cache, to learn its folder's name
        folder = identity_folder(root)

        damages = {
            "fifo seed": lambda: (os.remove(os.path.join(folder, "seed")), os.mkfifo(os.path.join(folder, "seed"))),
            "seed folder": lambda: (os.remove(os.path.join(folder, "seed")), os.mkdir(os.path.join(folder, "seed"))),
            "folder file": lambda: (shutil.rmtree(folder), open(folder, "w").write("not a folder")),
        }
        for name, damage in damages.items():
            for old in set_aside(root):
                p = os.path.join(root, old)
                shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
            if not os.path.isdir(folder):
                serve_and_stop(args, root, log)
            damage()
            text = serve_and_stop(args, root, log)
            aside = set_aside(root)
            print(f"{name}: served; set aside as {aside}")
            check(len(aside) == 1, f"{name}: the damaged folder was not set aside: {os.listdir(root)}")
            check("set aside as" in text, f"{name}: not logged: {text[-500:]}")
            check(os.path.isfile(os.path.join(folder, "seed")), f"{name}: no fresh cache")
        check(os.path.exists(os.path.join(root, set_aside(root)[0])), "the damaged one is kept")

        blocked = os.path.join(tmp, "a-file")
        open(blocked, "w").write("x")
        text = serve_and_stop(args, blocked, log)
        print("root is a file: served without a disk cache")
        check("KV disk cache off" in text, f"root a file: not said: {text[-500:]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("damaged KV disk cache: passed")


if __name__ == "__main__":
    try:
        main()
    except Failure as e:
        print(f"FAILED: {e}", file=sys.stderr)
        sys.exit(1)
