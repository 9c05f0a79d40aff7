#!/usr/bin/env python3
"""Connect-back and certificate-mode gets: a server running BINARY (--before: a build that sent
them on session threads, 1 + N threads per get) beside one running --sluice (h15t: on the get
ring), same files, same run, alternating (issue 15's "one engine ... no thread per session").

Servers in one network namespace (CPU 0, `serve --threads 1 --cert --key --port`), clients in
the other (CPU 1), joined by a veth pair as in get.py (whose helpers this uses); each side in a
session of its own (setsid: autogroups). The client is --sluice for both servers (the wire is
unchanged) and discards after verifying (--recv-path null). Cases, each round in turn:
  - one 2 GiB file and the minor set (bench/datasets/gen.py, --scale, default 1/64), each by
    `get --connect-back` and by `get --ca` (certificate mode: the request's TLS 1.3 handshake
    with the server's certificate), before then after;
  - then, per server and mode, 8 gets of one 1 GiB file at once: the most threads the server
    held (/proc/PID/task sampled every 20 ms) against its threads before, and its CPU s per GB.
Run it under the bench lock (make the data first with --prepare-only, outside it):
  /work/brief/bin/bench-lock timeout 470 python3 bench/serve/get_back.py --before OLD --out /tmp/x.json
Every command has a timeout. The data stays under --data (deleted with --clean)."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import get as g  # noqa: E402  (the namespaces, placement and one get's run)


def certificates(d):
    """A CA and a server certificate for the server's address (made with openssl, never committed)."""
    d.mkdir(parents=True, exist_ok=True)
    if (d / "server.pem").exists():
        return d / "ca.pem", d / "server.pem", d / "server.key"

    def ossl(*args):
        subprocess.run(["openssl", *map(str, args)], check=True, cwd=d, capture_output=True, timeout=60)

    ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key", "-out",
         "ca.pem", "-days", "2", "-subj", "/CN=bench-ca")
    ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "server.key", "-out",
         "server.csr", "-subj", "/CN=bench-server")
    (d / "san.ext").write_text(f"subjectAltName=IP:{g.SRV_IP}\n")
    ossl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem",
         "-days", "2", "-extfile", "san.ext")
    return d / "ca.pem", d / "server.pem", d / "server.key"


def start(binary, root, port, cert, key):
    srv = subprocess.Popen(g.in_ns(g.SRV_NS, g.SRV_CPU, binary, "serve", root, "--http", "0", "--port", port, "--bind",
                                   g.SRV_IP, "--threads", "1", "--cert", cert, "--key", key, "--json"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=g.ENV)
    srv.stdout.readline()
    srv.stdout.readline()
    return srv


def server_pid(srv):
    """The serve process itself: Popen's child is `ip netns exec`, which execs taskset, setsid
    and sluice in turn (setsid forks only when it leads a process group already)."""
    pid = srv.pid
    for _ in range(50):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip().startswith("sluice"):  # sluice, sluice-main, ...
                return pid
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            kids = []
        if kids:
            pid = int(kids[0])
        else:
            time.sleep(0.1)
    raise RuntimeError("no sluice process under the server's launcher")


def tasks(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def many(binary, port, pid, extra, clients=8):
    """clients gets of 1g.bin at once; the most threads the server held meanwhile."""
    base = tasks(pid)
    most, stop = [base], threading.Event()

    def sample():
        while not stop.is_set():
            most[0] = max(most[0], tasks(pid))
            time.sleep(0.02)

    t = threading.Thread(target=sample)
    t.start()
    before = g.cpu_seconds(pid)
    t0 = time.monotonic()
    procs = [subprocess.Popen(g.in_ns(g.CLI_NS, g.CLI_CPU, binary, "get", f"sluice://{g.SRV_IP}:{port}/1g.bin", "/tmp",
                                      "--recv-path", "null", "--streams", "4", "--json", *extra),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=g.ENV) for _ in range(clients)]
    outs = [p.communicate(timeout=400) for p in procs]
    wall = time.monotonic() - t0
    stop.set()
    t.join()
    cpu = g.cpu_seconds(pid) - before
    ok = sum(p.returncode == 0 for p in procs)
    total = sum(g.last_json(o)["bytes"] for (o, _), p in zip(outs, procs) if p.returncode == 0)
    return {"clients": clients, "complete": ok, "threads_before": base, "threads_most": most[0], "seconds": wall,
            "mb_s": total / wall / 1e6, "cpu_s_per_gb": cpu / (total / 1e9) if total else None,
            "errors": [e[-300:] for (_, e), p in zip(outs, procs) if p.returncode != 0]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", default=str(g.HERE.parents[1] / "build" / "tools" / "sluice"))
    ap.add_argument("--before", required=True, metavar="BINARY", help="the build to compare with (session threads)")
    ap.add_argument("--data", default="/work/data/h15t/get-back")
    ap.add_argument("--scale", default="1/64", help="the minor set's scale (gen.py --scale)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--streams", default="4")
    ap.add_argument("--skip-cases", action="store_true", help="only the 8 concurrent gets")
    ap.add_argument("--skip-many", action="store_true", help="only the cases")
    ap.add_argument("--out", default=None)
    ap.add_argument("--prepare-only", action="store_true", help="make the data and certificates and exit")
    ap.add_argument("--clean", action="store_true", help="delete --data at the end")
    a = ap.parse_args()
    root = Path(a.data) / "www"
    root.mkdir(parents=True, exist_ok=True)
    g.big_file(root / "2g.bin", 2 << 30)
    g.big_file(root / "1g.bin", 1 << 30)
    subprocess.run([sys.executable, g.GEN, "--out", Path(a.data) / "sets", "--sets", "minor", "--scale", a.scale], check=True,
                   timeout=600)
    if not (root / "minor").exists():
        shutil.copytree(Path(a.data) / "sets" / "minor", root / "minor", copy_function=os.link)
    ca, cert, key = certificates(Path(a.data) / "pki")
    if a.prepare_only:
        return
    g.warm(root)
    modes = {"connect-back": ["--connect-back"], "certificate": ["--ca", str(ca)]}
    results = {"command": " ".join(sys.argv), "kernel": os.uname().release, "load": os.getloadavg(), "cases": {}, "many": {}}
    servers = {}
    subprocess.run([g.NETNS, "up"], check=True, env=g.ENV)
    try:
        servers["before"] = start(a.before, root, g.GET_PORT, cert, key)
        servers["after"] = start(a.sluice, root, g.GET_PORT + 2, cert, key)
        ports = {"before": g.GET_PORT, "after": g.GET_PORT + 2}
        for name, rel in ([] if a.skip_cases else [("2 GiB file", "2g.bin"), ("minor set", "minor")]):
            for mode, extra in modes.items():
                rows = {"before": [], "after": []}
                for _ in range(a.repeats):
                    for k in ("before", "after"):
                        rows[k].append(g.run_get(a.sluice, rel, a.streams, *extra, port=ports[k]))
                med = {k: sorted(r["mb_s"] for r in v)[len(v) // 2] for k, v in rows.items()}
                case = f"{name}, {mode}"
                results["cases"][case] = {"runs": rows, "median_mb_s": med, "after_vs_before": med["after"] / med["before"],
                                          "per_round": [x["mb_s"] / y["mb_s"] for x, y in zip(rows["after"], rows["before"])]}
                print(case, json.dumps(med), f"after/before {results['cases'][case]['after_vs_before']:.2f}", flush=True)
        for mode, extra in ([] if a.skip_many else modes.items()):
            for k in ("before", "after"):
                r = many(a.sluice, ports[k], server_pid(servers[k]), extra)
                results["many"][f"{mode}, {k}"] = r
                print("8 at once", mode, k, json.dumps({x: r[x] for x in r if x != "errors"}), r["errors"][:1], flush=True)
    finally:
        for k, srv in servers.items():
            srv.send_signal(signal.SIGTERM)
            out, _ = srv.communicate(timeout=60)
            if out.strip():
                st = g.last_json(out)
                results[f"serve_stats_{k}"] = {x: st.get(x) for x in (
                    "get_sessions", "get_sessions_ring", "get_sessions_ring_connect_back", "get_sessions_thread",
                    "get_sessions_certificate", "get_certificate_failed", "get_sessions_failed")}
        subprocess.run([g.NETNS, "down"], env=g.ENV)
        if a.clean:
            shutil.rmtree(a.data, ignore_errors=True)
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
