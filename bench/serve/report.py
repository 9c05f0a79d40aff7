#!/usr/bin/env python3
"""Markdown tables (with sluice/nginx ratios) from bench/serve/run.py's --out JSON.
usage: report.py RESULTS.json"""
import json
import sys


def main():
    r = json.load(open(sys.argv[1]))
    runs = {(x["server"], x["file"], x["conns"]): x for x in r["runs"]}
    noaio = any(k[0] == "nginx-noaio" for k in runs)
    if any(x.get("close") for x in r["runs"]):
        print("wrk with `Connection: close` (a new connection per request)\n")
    print("| file | connections | sluice req/s | nginx req/s | ratio | sluice p50 / p99 ms | nginx p50 / p99 ms | p99 ratio |"
          + (" nginx without aio threads: req/s, p99 ms | ratio |" if noaio else ""))
    print("|---|---|---|---|---|---|---|---|" + ("---|---|" if noaio else ""))
    for (server, size, conns), s in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][2])):
        if server != "sluice":
            continue
        n = runs[("nginx", size, conns)]
        print(f"| {size.upper()}B | {conns} | {s['rps']:,.0f} | {n['rps']:,.0f} | {s['rps'] / n['rps']:.2f}x | "
              f"{s['p50_ms']:.2f} / {s['p99_ms']:.2f} | {n['p50_ms']:.2f} / {n['p99_ms']:.2f} | "
              f"{s['p99_ms'] / n['p99_ms']:.2f}x |", end="")
        if noaio:
            m = runs[("nginx-noaio", size, conns)]
            print(f" {m['rps']:,.0f}, {m['p99_ms']:.2f} | {s['rps'] / m['rps']:.2f}x |", end="")
        print()
        for x in (s, n):
            if x["errors"] or x["non2xx"]:
                print(f"|   | {x['server']}: socket errors {x['errors']}, non-2xx {x['non2xx']} | | | | | | |")
    if not r["large"]:
        return
    large = {x["server"]: x for x in r["large"]}
    s, n = large["sluice"], large["nginx"]
    print()
    print("| 16 clients x 1 GiB (cached) | aggregate MB/s | server CPU s | CPU s/GB | all complete |")
    print("|---|---|---|---|---|")
    for x in r["large"]:
        print(f"| {x['server']} | {x['mb_s']:,.0f} | {x['server_cpu_s']:.2f} | {x['cpu_s_per_gb']:.3f} | {x['complete']} |")
    print(f"| ratio sluice/nginx | {s['mb_s'] / n['mb_s']:.2f}x | | {s['cpu_s_per_gb'] / n['cpu_s_per_gb']:.2f}x | |")


if __name__ == "__main__":
    main()
