#!/usr/bin/env python3
"""Combines the raw files scripts/bench-cpu.sh writes into build/bench/bench-cpu.json and the
final markdown table (stdout). No dependencies beyond the standard library.

    python3 tests/bench/bench_report.py --dir build/bench --types Q4_0 Q8_0 Q4_K_M

Reads, in --dir:
  meta.json                    machine, commit, date, threads, repetitions, tg/pp sizes
  membw.<I>.json               ember-membw --json before model I and at the end (I = N)
  <TYPE>.sizes.json            tests/bench/gguf_sizes.py (decode bytes, KV bytes per position)
  <NAME>.cpu.json              other processes' share of the cores while NAME ran
  <TYPE>.ember.json            ember bench --json
  <TYPE>.llamacpp.json         tests/bench/llamacpp_bench.py
  <TYPE>.rss.txt               /usr/bin/time -v of `ember run` (Maximum resident set size)
  <TYPE>.pair.<K>.membw.json   ember-membw, right after <TYPE>.pair.<K>.tg.json
  <TYPE>.pair.<K>.tg.json      ember bench --pp 0 (one tgN repetition)

Derived numbers (see docs/BENCHMARKS.md):
  decode bytes/token = decode_weight_bytes + kv_bytes_per_pos x mean attended positions in tgN,
                       where step i of N (after a 1-token prefill) attends i + 1 positions, so
                       the mean is (N + 3) / 2
  decode GB/s        = decode bytes/token x tg tok/s / 1e9
  % of copy bandwidth = median over the interleaved pairs of (decode GB/s of the pair's tgN run /
                       copy GB/s of the ember-membw run just after it): the host's bandwidth
                       drifts by tens of percent within minutes, so each decode is compared with
                       the bandwidth of the same moment. (Also in the JSON: the table's tgN
                       against the better of the membw runs before and after the model.)
  RSS budget         = file bytes + KV cache bytes at --ctx (f16), + 15 %
  other load         CPU time other processes used during the ember / llama.cpp bench (the
                       larger of the two), as a share of all cores: the noise indicator
Targets (informational): tg >= 1.0x llama.cpp, pp >= 1.2x llama.cpp, decode >= 80 % of copy
bandwidth, RSS <= budget.
"""
import argparse
import json
import os
import re
import statistics
import sys

TARGET_TG = 1.0
TARGET_PP = 1.2
TARGET_BW = 0.80
RSS_SLACK = 0.15


def load_json(path):
    try:
        with open(path) as f:
            text = f.read().strip()
        # tolerate log lines before the JSON object (take the last line that parses)
        for line in reversed(text.splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except json.JSONDecodeError:
                    continue
        return json.loads(text)
    except (OSError, json.JSONDecodeError):
        return None


def result(bench, prefix):
    if not bench:
        return None
    for r in bench.get("results", []):
        if r.get("test", "").startswith(prefix):
            return r
    return None


def peak_rss_bytes(path):
    try:
        with open(path) as f:
            text = f.read()
        if "Command exited with non-zero status" in text or "Command terminated by signal" in text:
            return None  # the run failed: its peak RSS says nothing about a decode
        m = re.search(r"Maximum resident set size \(kbytes\):\s*(\d+)", text)
        return int(m.group(1)) * 1024 if m else None
    except OSError:
        return None


def paired_bandwidth(d, t, bytes_tok):
    """Per interleaved pair K: decode tok/s and GB/s, copy GB/s just after, and their ratio."""
    pairs = []
    for k in range(1000):
        mb_path, tg_path = os.path.join(d, f"{t}.pair.{k}.membw.json"), os.path.join(d, f"{t}.pair.{k}.tg.json")
        if not os.path.exists(mb_path) and not os.path.exists(tg_path):
            break
        mb, tg = load_json(mb_path), result(load_json(tg_path), "tg")
        if not mb or not tg or not bytes_tok or not mb.get("copy_gbs"):
            continue
        gbs = bytes_tok * tg["tok_s"] / 1e9
        pairs.append({"pair": k, "copy_gbs": mb["copy_gbs"], "read_gbs": mb.get("read_gbs"), "tg_tok_s": tg["tok_s"],
                      "decode_gbs": gbs, "frac_of_copy": gbs / mb["copy_gbs"]})
    return pairs


def fmt(x, spec=".1f", none="n/a"):
    return none if x is None else format(x, spec)


def mark(ok):
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--types", nargs="+", required=True)
    ap.add_argument("--out", default=None, help="default: DIR/bench-cpu.json")
    a = ap.parse_args()
    d = a.dir
    meta = load_json(os.path.join(d, "meta.json")) or {}
    # ember-membw runs before each model and at the end (membw.0 .. membw.N); model I is
    # compared with the better of membw.I and membw.I+1, the runs around it (the host's
    # bandwidth drifts; other work only ever lowers a run).
    membw_runs = [load_json(os.path.join(d, f"membw.{i}.json")) for i in range(len(a.types) + 1)]
    membw_load = [load_json(os.path.join(d, f"membw.{i}.cpu.json")) for i in range(len(a.types) + 1)]
    ok_runs = [r for r in membw_runs if r]
    copy_gbs = max((r["copy_gbs"] for r in ok_runs), default=None)
    read_gbs = max((r["read_gbs"] for r in ok_runs), default=None)

    def around(i, key):
        vals = [r[key] for r in membw_runs[i:i + 2] if r]
        return max(vals) if vals else None
    tg_n = int(meta.get("tg", 128))
    pp_n = int(meta.get("pp", 512))
    mean_pos = (tg_n + 3) / 2

    rows, models = [], []
    for i, t in enumerate(a.types):
        m_copy, m_read = around(i, "copy_gbs"), around(i, "read_gbs")
        sizes = load_json(os.path.join(d, f"{t}.sizes.json"))
        em = load_json(os.path.join(d, f"{t}.ember.json"))
        lc = load_json(os.path.join(d, f"{t}.llamacpp.json"))
        rss = peak_rss_bytes(os.path.join(d, f"{t}.rss.txt"))
        e_cpu = load_json(os.path.join(d, f"{t}.ember.cpu.json"))
        l_cpu = load_json(os.path.join(d, f"{t}.llamacpp.cpu.json"))
        loads = [c["other_load"] for c in (e_cpu, l_cpu) if c and c.get("other_load") is not None]
        other = max(loads) if loads else None
        e_pp, l_pp = result(em, "pp"), result(lc, "pp")
        e_tg, l_tg = result(em, "tg"), result(lc, "tg")
        v = lambda r: r["tok_s"] if r else None
        ratio = lambda x, y: x / y if x is not None and y else None
        pp_ratio, tg_ratio = ratio(v(e_pp), v(l_pp)), ratio(v(e_tg), v(l_tg))

        bytes_tok = None
        if sizes:
            bytes_tok = sizes["decode_weight_bytes"] + sizes["kv_bytes_per_pos"] * mean_pos
        gbs = lambda r: bytes_tok * r["tok_s"] / 1e9 if r and bytes_tok else None
        e_gbs, l_gbs = gbs(e_tg), gbs(l_tg)
        around_frac = e_gbs / m_copy if e_gbs is not None and m_copy else None
        pairs = paired_bandwidth(d, t, bytes_tok)
        fracs = sorted(p["frac_of_copy"] for p in pairs)
        bw_frac = statistics.median(fracs) if fracs else None
        pair_copy = statistics.median(p["copy_gbs"] for p in pairs) if pairs else None
        read_frac = e_gbs / m_read if e_gbs is not None and m_read else None
        budget = (sizes["file_bytes"] + sizes["kv_cache_bytes"]) * (1 + RSS_SLACK) if sizes else None
        rss_ok = rss <= budget if rss is not None and budget else None

        m = {
            "type": t,
            "model_file": sizes["path"] if sizes else None,
            "file_bytes": sizes["file_bytes"] if sizes else None,
            "decode_weight_bytes": sizes["decode_weight_bytes"] if sizes else None,
            "kv_bytes_per_pos": sizes["kv_bytes_per_pos"] if sizes else None,
            "decode_bytes_per_token": bytes_tok,
            "ember": em, "llamacpp": lc,
            "ember_machine_load": e_cpu, "llamacpp_machine_load": l_cpu, "max_other_load": other,
            "pp_ratio": pp_ratio, "tg_ratio": tg_ratio,
            "ember_decode_gbs": e_gbs, "llamacpp_decode_gbs": l_gbs,
            "copy_gbs": m_copy, "read_gbs": m_read,
            "ember_decode_frac_of_copy": bw_frac, "ember_decode_frac_of_copy_pairs": pairs,
            "ember_decode_frac_of_copy_around": around_frac, "ember_decode_frac_of_read": read_frac,
            "rss_bytes": rss, "rss_budget_bytes": budget,
            "kv_cache_bytes": sizes["kv_cache_bytes"] if sizes else None,
            "targets": {
                f"pp_ge_{TARGET_PP}x_llamacpp": None if pp_ratio is None else pp_ratio >= TARGET_PP,
                f"tg_ge_{TARGET_TG}x_llamacpp": None if tg_ratio is None else tg_ratio >= TARGET_TG,
                f"decode_ge_{int(TARGET_BW * 100)}pct_copy_bw": None if bw_frac is None else bw_frac >= TARGET_BW,
                "rss_le_budget": rss_ok,
            },
            "errors": [n for n, x in (("ember bench", em), ("llama.cpp bench", lc), ("sizes", sizes)) if x is None]
                      + ([] if rss is not None else ["rss"]),
        }
        models.append(m)
        mib = lambda b: b / 2**20
        rss_cell = (f"{mib(rss):.0f} / {mib(budget):.0f} MiB ({100 * rss / budget:.0f}%)"
                    if rss is not None and budget else "n/a")
        sd = lambda r: f" ± {r['stddev']:.1f}" if r and r.get("stddev") else ""
        rows.append([
            t,
            fmt(v(e_pp)) + sd(e_pp), fmt(v(l_pp)) + sd(l_pp), fmt(pp_ratio, ".2f") + ("×" if pp_ratio else ""),
            fmt(v(e_tg), ".2f") + sd(e_tg), fmt(v(l_tg), ".2f") + sd(l_tg), fmt(tg_ratio, ".2f") + ("×" if tg_ratio else ""),
            fmt(e_gbs), (f"{100 * bw_frac:.0f}% ({100 * fracs[0]:.0f}–{100 * fracs[-1]:.0f}%) of {pair_copy:.1f}"
                         if bw_frac is not None else "n/a"),
            rss_cell,
            mark(m["targets"][f"pp_ge_{TARGET_PP}x_llamacpp"]),
            mark(m["targets"][f"tg_ge_{TARGET_TG}x_llamacpp"]),
            mark(m["targets"][f"decode_ge_{int(TARGET_BW * 100)}pct_copy_bw"]),
            mark(rss_ok),
            fmt(None if other is None else 100 * other, ".0f") + ("%" if other is not None else ""),
        ])

    report = {"meta": meta, "membw_runs": membw_runs, "membw_machine_load": membw_load,
              "copy_gbs_best": copy_gbs, "read_gbs_best": read_gbs, "tg_mean_attended_positions": mean_pos,
              "targets": {"tg_vs_llamacpp": TARGET_TG, "pp_vs_llamacpp": TARGET_PP,
                          "decode_frac_of_copy_bw": TARGET_BW, "rss_slack": RSS_SLACK},
              "models": models}
    out = a.out or os.path.join(d, "bench-cpu.json")
    with open(out, "w") as f:
        json.dump(report, f, indent=1)

    head = ["type", f"ember pp{pp_n}", f"llama.cpp pp{pp_n}", "ratio", f"ember tg{tg_n}", f"llama.cpp tg{tg_n}",
            "ratio", "ember decode GB/s", "% of copy bandwidth (paired)", "RSS vs budget",
            f"pp ≥ {TARGET_PP}×", f"tg ≥ {TARGET_TG}×", f"decode ≥ {int(TARGET_BW * 100)}% BW", "RSS ≤ budget",
            "other load"]
    print(f"\ntok/s, mean ± stddev over {meta.get('reps', '?')} repetition(s), {meta.get('threads', '?')} threads; "
          f"ember-membw copy {'/'.join(fmt(r['copy_gbs'], '.0f') if r else 'n/a' for r in membw_runs)} GB/s "
          f"(before each model and at the end; read {'/'.join(fmt(r['read_gbs'], '.0f') if r else 'n/a' for r in membw_runs)}); commit {meta.get('commit', '?')}, {meta.get('date', '?')}\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" if i == 0 else "--:" for i in range(len(head))) + "|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    # Best repetition of each: less sensitive to other work on shared cores than the mean.
    print(f"\nbest repetition (tok/s; the least disturbed one, as STREAM reports its best):\n")
    print(f"| type | ember pp{pp_n} | llama.cpp pp{pp_n} | ratio | ember tg{tg_n} | llama.cpp tg{tg_n} | ratio | ember decode GB/s | % of copy (membw runs around the model) |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for m in models:
        best = lambda b, p: max(result(b, p)["samples"]) if result(b, p) and result(b, p).get("samples") else None
        ep, lp, et, lt = best(m["ember"], "pp"), best(m["llamacpp"], "pp"), best(m["ember"], "tg"), best(m["llamacpp"], "tg")
        r = lambda x, y: f"{x / y:.2f}×" if x is not None and y else "n/a"
        g = et * m["decode_bytes_per_token"] / 1e9 if et is not None and m["decode_bytes_per_token"] else None
        m["best"] = {"ember_pp": ep, "llamacpp_pp": lp, "ember_tg": et, "llamacpp_tg": lt, "ember_decode_gbs": g}
        cg = m["copy_gbs"]
        print(f"| {m['type']} | {fmt(ep)} | {fmt(lp)} | {r(ep, lp)} | {fmt(et, '.2f')} | {fmt(lt, '.2f')} | {r(et, lt)} | "
              f"{fmt(g)} | {fmt(None if g is None or not cg else 100 * g / cg, '.0f')}% |")
    with open(out, "w") as f:
        json.dump(report, f, indent=1)

    errs = [(m["type"], m["errors"]) for m in models if m["errors"]]
    for t, e in errs:
        print(f"\n{t}: missing {', '.join(e)} (see the raw files in {d})")
    print(f"\nraw numbers: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
