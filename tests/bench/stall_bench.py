#!/usr/bin/env python3
"""How long running streams stall when a long prompt arrives: `ember serve --max-stall-ms`.

Benchmark tooling only, standard library only (the serving benchmark's client, serve_bench.py):

    tests/bench/stall_bench.py --model M.gguf --ember build/engine/app/cli/ember \
        [--stall-ms 0,500] [--streams 4] [--long-tokens 1500] [--repeat 2] [--json OUT.json]

Per --stall-ms value, one `ember serve M --parallel STREAMS+1 --ctx CTX --max-stall-ms S` and
--repeat rounds of: STREAMS clients start streaming (a short token-id prompt each, temperature
0, max_tokens long enough to outlast the round); once every stream has produced 8 tokens, one
more client sends a --long-tokens token-id prompt (max_tokens 8). Measured per round, client
side: the long request's time to first token (TTFT), the streams' longest gap between two
tokens while the long prompt was being prefilled (sent .. first token) and their p50 gap
outside it, and the streams' tokens per second over the whole round. Prints a markdown table;
--json writes every round.
"""
import argparse
import json
import os
import selectors
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_bench import Server, Stream, free_port, log, request_body  # noqa: E402


def tokens(seed, n):
    return [1000 + (seed * 7919 + j * 104729) % 20000 for j in range(n)]


def one_round(server, args, r):
    sel = selectors.DefaultSelector()
    streams = []
    for c in range(args.streams):
        st = Stream(server.port, request_body(server.model, tokens(100 * r + c, 16), args.stream_tokens,
                                              server.request_extra), c)
        sel.register(st.sock, selectors.EVENT_READ, st)
        streams.append(st)
    long_req, t_long = None, None
    deadline = time.monotonic() + args.timeout
    while sel.get_map() and time.monotonic() < deadline:
        for key, _ in sel.select(1.0):
            if not key.data.read(time.monotonic()):
                sel.unregister(key.fileobj)
        if long_req is None and all(len(s.marks) >= 8 for s in streams):
            long_req = Stream(server.port, request_body(server.model, tokens(100 * r + 99, args.long_tokens), 8,
                                                        server.request_extra), 99)
            t_long = long_req.t_send
            sel.register(long_req.sock, selectors.EVENT_READ, long_req)
    if sel.get_map():
        raise RuntimeError(f"round {r}: timed out after {args.timeout}s")
    results = [s.result() for s in streams]
    lr = long_req.result() if long_req else None
    errors = [x["error"] for x in results + ([lr] if lr else []) if x["error"]]
    if errors or lr is None or not lr["chunk_times"]:
        raise RuntimeError(f"round {r}: {errors or 'the long request never started'}")
    t_first = lr["chunk_times"][0]
    inside, outside = [], []
    for x in results:
        times = x["chunk_times"]
        for a, b in zip(times, times[1:]):
            (inside if b > t_long and a < t_first else outside).append(b - a)
    n_tokens = sum(len(x["chunk_times"]) for x in results)
    wall = max(x["t_end"] for x in results) - min(x["t_send"] for x in results)
    return {"long_ttft_ms": round(1000 * (t_first - t_long), 1),
            "max_gap_during_ms": round(1000 * max(inside), 1) if inside else None,
            "gaps_during": len(inside),
            "p50_gap_outside_ms": round(1000 * statistics.median(outside), 2) if outside else None,
            "streams_tok_s": round(n_tokens / wall, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--ember", required=True)
    ap.add_argument("--stall-ms", default="0,500", help="--max-stall-ms values, one server each")
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--long-tokens", type=int, default=1500)
    ap.add_argument("--stream-tokens", type=int, default=0, help="max_tokens of a stream (0: from --ctx)")
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.long_tokens + 16 >= args.ctx:
        ap.error("--long-tokens must leave room in --ctx")
    args.stream_tokens = args.stream_tokens or args.ctx - 32
    log_dir = os.path.join("build", "bench")
    os.makedirs(log_dir, exist_ok=True)
    out = {"model": os.path.basename(args.model), "streams": args.streams, "long_tokens": args.long_tokens,
           "ctx": args.ctx, "threads": args.threads, "rounds": {}}
    for stall in [int(s) for s in args.stall_ms.split(",")]:
        port = free_port()
        argv = [args.ember, "serve", args.model, "--host", "127.0.0.1", "--port", str(port),
                "--parallel", str(args.streams + 1), "--ctx", str(args.ctx), "--threads", str(args.threads),
                "--max-stall-ms", str(stall)]
        server = Server(f"ember stall {stall}", argv, port, os.path.join(log_dir, f"stall-{stall}.log"))
        server.start(120)
        try:
            rounds = []
            for r in range(args.repeat):
                res = one_round(server, args, r)
                log(f"--max-stall-ms {stall} round {r}: {res}")
                rounds.append(res)
            out["rounds"][stall] = rounds
        finally:
            server.stop()
    print(f"\n### {out['model']}: {args.streams} streams, one {args.long_tokens}-token prompt arrives\n")
    print("| --max-stall-ms | long prompt TTFT ms | streams' longest gap during it ms | gaps during it "
          "| streams' p50 gap otherwise ms | streams tok/s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for stall, rounds in out["rounds"].items():
        for res in rounds:
            print(f"| {stall} | {res['long_ttft_ms']} | {res['max_gap_during_ms']} | {res['gaps_during']} "
                  f"| {res['p50_gap_outside_ms']} | {res['streams_tok_s']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
