#!/usr/bin/env python3
"""Uploads: `ab -c 10` of 1/3/5/10 KB bodies (the leveldb FS report's POST test:
4,212 / 2,583 / 1,763 / 943 requests/s), sluice serve --allow-upload beside nginx-light with
its dav module (dav_methods PUT; the same temporary file + rename), same run, interleaved.
--modes picks the ab runs: PUT-k (ab -k -u, the default), POST (ab -p, a connection per
request, as the report ran it), POST-k. nginx's dav module takes no POST, so nginx runs PUT
with the same keep-alive. The server's CPU per request is recorded (utime + stime from /proc
over the cell); --perf records sluice's first cell; --sluice-b runs a second sluice build
beside the first (an A/B of a change in the same run).
With --new-names, also wrk -c 10 (keep-alive) PUTting each body to a new name
(put_names.lua, at most --limit requests per cell, the files deleted after each cell): the
cost without the replacement. Disk: at most limit x 10 KB at once (2.5 GB by default).

Same testbed as run.py: two namespaces joined by a veth pair, server on CPU 0 (one thread /
one worker), ab on CPU 1. Every request PUTs the same name (ab cannot vary it), so each one
replaces the file: on ext4 a rename over an existing file starts writeback of the new file's
data (auto_da_alloc), for both servers. Bounded: ab -t SECONDS -n 5,000,000 and a timeout.
  /work/brief/bin/bench-lock python3 bench/serve/upload.py --out /tmp/upload.json"""
import argparse
import json
import os
import re
import time
import shutil
import subprocess
import sys
from pathlib import Path

import run

SIZES = (1, 3, 5, 10)
REPORT = {1: 4212, 3: 2583, 5: 1763, 10: 943}
TOKEN = "benchtoken"
DAV = "dav_methods PUT; create_full_put_path on; client_max_body_size 1m; client_body_buffer_size 16k;"


def run_ab(url, body, seconds, auth, method="PUT", keep=True):
    """ab -c 10 sending BODY with METHOD (-u PUT, -p POST), with keep-alive (-k) or a
    connection per request (the report's `ab -c 10` POST had no -k)."""
    cmd = run.in_ns(run.CLI_NS, run.CLI_CPU, "ab", "-q", *(["-k"] if keep else []), "-c", "10", "-t", seconds, "-n",
                    "5000000", "-u" if method == "PUT" else "-p", body,
                    "-T", "application/octet-stream", *(["-H", f"Authorization: Bearer {TOKEN}"] if auth else []), url)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=run.ENV)
    try:
        out = p.stdout.read()  # ab -t ends it; the timeout below bounds a hung one
        # ab's own CPU (ip netns exec, taskset and setsid exec in place: p.pid is ab): is the
        # single-threaded client the limit?
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if p.returncode is None:
            p.kill()
            p.wait()

    def num(label):
        m = re.search(rf"^{label}:\s+([\d.]+)", out, re.M)
        return float(m[1]) if m else None

    non2xx = re.search(r"^Non-2xx responses:\s+(\d+)", out, re.M)
    pct = {p: float(m[1]) for p, m in ((p, re.search(rf"^\s+{p}%\s+(\d+)", out, re.M)) for p in (50, 99)) if m}
    taken = num("Time taken for tests")
    return {"rps": num("Requests per second"), "complete": num("Complete requests"), "failed": num("Failed requests"),
            "non2xx": int(non2xx[1]) if non2xx else 0, "p50_ms": pct.get(50), "p99_ms": pct.get(99),
            "ab_cpu_s": ru.ru_utime + ru.ru_stime, "ab_cpu_pct": 100 * (ru.ru_utime + ru.ru_stime) / taken if taken else None,
            "seconds": taken}


def block_device(path):
    """The disk under PATH, as /proc/diskstats names it; a tmpfs has none (None)."""
    dev = os.stat(path).st_dev
    link = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    return link.resolve().name if link.exists() else None


def disk_stats(name):
    """(writes completed, sectors written, ms busy) of one disk, from /proc/diskstats."""
    for line in Path("/proc/diskstats").read_text().splitlines():
        f = line.split()
        if f[2] == name:
            return int(f[7]), int(f[9]), int(f[12])
    return 0, 0, 0


def run_wrk_put(base, prefix, kb, seconds, auth, limit):
    env = dict(run.ENV, H15C_LIMIT=str(limit), H15C_BODY=str(kb * 1024), H15C_PREFIX=prefix,
               H15C_AUTH=TOKEN if auth else "")
    cmd = run.in_ns(run.CLI_NS, run.CLI_CPU, "wrk", "-t1", "-c10", f"-d{seconds}s", "--latency", "--timeout", "10s",
                    "-s", run.HERE / "put_names.lua", base)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, env=env).stdout
    r = run.parse_wrk(out)
    r["requests"] = int(re.search(r"(\d+) requests in", out)[1])
    return r


def table(rows, first, ms):
    print(f"| {first} | sluice req/s | nginx (dav) req/s | sluice/nginx | report req/s | sluice/report | "
          "sluice p50/p99 ms | nginx p50/p99 ms | server CPU us/request, sluice / nginx |")
    print("|---|---|---|---|---|---|---|---|---|")
    by = {(x["server"], x["kb"]): x for x in rows}
    for kb in SIZES:
        s, n = by[("sluice", kb)], by[("nginx", kb)]
        lat = [ms.format(x[k]) for x in (s, n) for k in ("p50_ms", "p99_ms")]
        print(f"| {kb} KB | {s['rps']:,.0f} | {n['rps']:,.0f} | {s['rps'] / n['rps']:.2f}x | {REPORT[kb]:,} | "
              f"{s['rps'] / REPORT[kb]:.1f}x | {lat[0]} / {lat[1]} | {lat[2]} / {lat[3]} | "
              + " / ".join(f"{x['server_cpu_us_per_req']:.0f}" if x.get("server_cpu_us_per_req") else "-" for x in (s, n))
              + " |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", default=str(run.HERE.parents[1] / "build" / "tools" / "sluice"))
    ap.add_argument("--data", default="/work/data/h15c/upload-bench")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--out", default=None)
    ap.add_argument("--new-names", action="store_true", help="also wrk PUTs to a new name per request")
    ap.add_argument("--sluice-b", default=None, help="a second sluice binary, run beside the first (rows 'sluice-b')")
    ap.add_argument("--perf", default=None, help="perf record -g sluice during its first cell into this file")
    ap.add_argument("--floor", default=None,
                    help="floor_put binary (build/bench/serve/floor_put): a server that discards the bodies and answers "
                         "201, beside the others: what ab itself can drive here")
    ap.add_argument("--modes", default="PUT-k",
                    help="comma list of METHOD[-k]: PUT-k (ab -k -u), POST (ab -p, a connection per request, as the "
                         "report), POST-k. nginx's dav module takes no POST: nginx runs PUT with the same keep-alive")
    ap.add_argument("--limit", type=int, default=250000,
                    help="at most this many new files per cell (a cell that reaches it is marked: wrk's rate then counts idle time)")
    a = ap.parse_args()
    for tool in ("ab", "nginx", "curl", "taskset"):
        if not shutil.which(tool):
            sys.exit(f"upload.py: {tool} is missing (apt-get install apache2-utils nginx-light curl util-linux)")
    data = Path(a.data)
    root = data / "www"
    run.make_data(root, large=False)
    root.chmod(0o777)  # nginx's worker (nobody) writes the uploads there
    bodies = {}
    for kb in SIZES:
        bodies[kb] = data / f"body-{kb}k.bin"
        bodies[kb].write_bytes(bytes(range(256)) * (kb * 4))
    disk = block_device(root) or block_device("/")  # on a tmpfs: the machine's disk, for the record
    run.sh(run.NETNS, "up")
    results = {"command": " ".join(sys.argv), "runs": [], "disk": disk, "data_on_disk": bool(block_device(root))}
    procs = {}
    try:
        p, spids = run.start_sluice(a.sluice, root, 8080, ("--allow-upload", "--token", TOKEN))
        procs["sluice"] = p
        p, npids = run.start_nginx(root, 8081, data / "nginx", aio=True, location=DAV)
        procs["nginx"] = p
        servers = {"sluice": (f"http://{run.SRV_IP}:8080", True), "nginx": (f"http://{run.SRV_IP}:8081", False)}
        pids = {"sluice": spids, "nginx": npids}
        if a.sluice_b:  # a second sluice build beside the first, same run (an A/B of a change)
            p, bpids = run.start_sluice(a.sluice_b, root, 8082, ("--allow-upload", "--token", TOKEN))
            procs["sluice-b"] = p
            servers["sluice-b"] = (f"http://{run.SRV_IP}:8082", True)
            pids["sluice-b"] = bpids
        if a.floor:
            p = subprocess.Popen(run.in_ns(run.SRV_NS, run.SRV_CPU, a.floor, run.SRV_IP, 8083), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True, env=run.ENV)
            procs["floor"] = p
            run.wait_port(8083)
            servers["floor"] = (f"http://{run.SRV_IP}:8083", False)
            pids["floor"] = [p.pid]
        perf = None
        for mode, kb in ((m, kb) for m in a.modes.split(",") for kb in SIZES):
            method, keep = mode.split("-")[0], mode.endswith("-k")
            for name, (base, auth) in servers.items():
                url = f"{base}/up-{kb}k.bin"
                # the name exists before ab starts: every request of the run replaces it
                subprocess.run(run.in_ns(run.CLI_NS, run.CLI_CPU, "curl", "-s", "-o", "/dev/null", "--max-time", "10",
                                         "-T", bodies[kb], *(["-H", f"Authorization: Bearer {TOKEN}"] if auth else []),
                                         url), env=run.ENV, check=True)
                sent = method if name != "nginx" else "PUT"
                if a.perf and name == "sluice" and not results.get("perf_cell"):
                    results["perf_cell"] = f"{mode} {kb} KB"  # the first sluice cell, profiled (its rate counts perf's cost)
                    perf = subprocess.Popen(["perf", "record", "-g", "-o", a.perf, "-p", str(spids[0])],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                cpu0 = run.cpu_seconds(pids[name])
                d0, t0 = disk_stats(disk), time.monotonic()
                r = run_ab(url, bodies[kb], a.seconds, auth, sent, keep)
                r["server_cpu_s"] = run.cpu_seconds(pids[name]) - cpu0  # over the -t SECONDS (ab stops then)
                d1, wall = disk_stats(disk), time.monotonic() - t0
                r.update(server_cpu_pct=100 * r["server_cpu_s"] / wall, disk_writes=d1[0] - d0[0],
                         disk_mb_written=(d1[1] - d0[1]) * 512 / 1e6, disk_busy_pct=100 * (d1[2] - d0[2]) / 1000 / wall)
                r["server_cpu_us_per_req"] = r["server_cpu_s"] / r["complete"] * 1e6 if r["complete"] else None
                if perf:
                    perf.send_signal(2)
                    perf.wait(timeout=120)
                    perf = None
                # the floor stores nothing: the file is whoever wrote it last (not checked)
                stored = None if name == "floor" else (root / f"up-{kb}k.bin").read_bytes() == bodies[kb].read_bytes()
                r.update(server=name, kb=kb, report_rps=REPORT[kb], stored_ok=stored, method=sent, keep_alive=keep,
                         mode=mode)
                print(json.dumps(r), flush=True)
                results["runs"].append(r)
        results["new_names"] = []
        for kb in SIZES if a.new_names else ():
            for name, (base, auth) in servers.items():
                prefix = f"/new-{name}-{kb}k/f"
                r = run_wrk_put(base, prefix, kb, a.seconds, auth, a.limit)
                d = root / f"new-{name}-{kb}k"
                files = list(d.iterdir()) if d.exists() else []
                r.update(server=name, kb=kb, files=len(files), report_rps=REPORT[kb], limited=r["requests"] >= a.limit,
                         sample_ok=bool(files) and files[0].read_bytes() == b"x" * (kb * 1024))
                shutil.rmtree(d, ignore_errors=True)
                print(json.dumps(r), flush=True)
                results["new_names"].append(r)
    finally:
        run.stop_servers(procs, results)
        run.sh(run.NETNS, "down")
        shutil.rmtree(data, ignore_errors=True)
    for mode in a.modes.split(","):
        table([x for x in results["runs"] if x["mode"] == mode], f"body, ab -c 10 {mode} of one name", "{:.0f}")
        if a.sluice_b:
            print()
            table([dict(x, server="sluice") if x["server"] == "sluice-b" else x for x in results["runs"]
                   if x["mode"] == mode and x["server"] != "sluice"], f"body, ab -c 10 {mode}, sluice-b", "{:.0f}")
        print()
    print("| mode | body | server | req/s | x report | server CPU % | ab CPU % | disk busy % | disk writes/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for x in results["runs"]:
        print(f"| {x['mode']} | {x['kb']} KB | {x['server']} | {x['rps']:,.0f} | {x['rps'] / REPORT[x['kb']]:.2f}x | "
              f"{x['server_cpu_pct']:.0f} | {x['ab_cpu_pct']:.0f} | {x['disk_busy_pct']:.0f} | "
              f"{x['disk_writes'] / x['seconds']:,.0f} |")
    if results.get("new_names"):
        print()
        table(results["new_names"], "body, new name per PUT (wrk -c 10)", "{:.2f}")
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
