#!/usr/bin/env python3
"""HTTPS: `sluice serve --cert --key` beside nginx-light with ssl (issue 18), same files, same
certificate, same run, interleaved cell by cell.

Server and clients in two network namespaces joined by a veth pair (bench/testbed/netns.sh,
names of our own), the server pinned to CPU 0 (sluice --threads 1, nginx worker_processes 1)
and the clients to CPU 1; every side in a session of its own (setsid: autogroups, h15k).
Both servers speak TLS 1.3 only with TLS_AES_128_GCM_SHA256 (nginx: ssl_protocols TLSv1.3 and
ssl_conf_command Ciphersuites; sendfile off, as nginx must without kTLS, which this kernel
lacks) and an ECDSA P-256 certificate made here with openssl.
  - wrk keep-alive (-t1, --latency) of a 10 KB file at 100 connections: requests/s, p99;
  - with --openssl-too, a second sluice with SLUICE_RECORD_ENGINE=openssl (the EVP AES-GCM
    nginx uses) beside them: the engine's share of the difference apart from the rest;
  - 16 concurrent curl clients of one 1 GiB file (page cache warm): aggregate MB/s and the
    server's CPU seconds per GB (utime + stime of its processes, from /proc).
Run it under the bench lock:
  /work/brief/bin/bench-lock timeout 470 python3 bench/serve/https.py --out /tmp/https.json
Every run is bounded (wrk -d, curl --max-time). Data under --data (deleted unless --keep)."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import cpu_seconds, make_data, parse_wrk  # noqa: E402

NETNS = HERE.parent / "testbed" / "netns.sh"
ENV = dict(os.environ, SB_NS_SND="h18n-https-cli", SB_NS_RCV="h18n-https-srv", SB_IP_SND="10.213.18.1",
           SB_IP_RCV="10.213.18.2")
SRV_NS, CLI_NS, SRV_IP = ENV["SB_NS_RCV"], ENV["SB_NS_SND"], ENV["SB_IP_RCV"]
SRV_CPU, CLI_CPU = "0", "1"
SUITE = "TLS_AES_128_GCM_SHA256"

NGINX_CONF = """
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/nginx.err warn;
worker_rlimit_nofile 20000;
events {{ worker_connections 19000; use epoll; }}
http {{
  sendfile off;
  tcp_nodelay on;
  open_file_cache max=1000 inactive=60s;
  open_file_cache_valid 60s;
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 65;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  ssl_protocols TLSv1.3;
  ssl_conf_command Ciphersuites {suite};
  ssl_session_tickets off;
  server {{
    listen {ip}:{port} ssl reuseport backlog=4096;
    ssl_certificate {cert};
    ssl_certificate_key {key};
    root {root};
    location / {{ }}
  }}
}}
"""


def in_ns(ns, cpu, *cmd):
    return ["ip", "netns", "exec", ns, "taskset", "-c", cpu, "setsid", *map(str, cmd)]


def openssl(*args, cwd):
    subprocess.run(["openssl", *map(str, args)], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certs(d):
    d.mkdir(parents=True, exist_ok=True)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca.key",
            "-out", "ca.pem", "-days", "2", "-subj", "/CN=bench-ca", cwd=d)
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "srv.key",
            "-out", "srv.csr", "-subj", "/CN=bench", cwd=d)
    (d / "srv.ext").write_text(f"subjectAltName=IP:{SRV_IP}\n")
    openssl("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "srv.pem",
            "-days", "2", "-extfile", "srv.ext", cwd=d)
    return d / "ca.pem", d / "srv.pem", d / "srv.key"


def wait_port(url, ca, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = subprocess.run(in_ns(CLI_NS, CLI_CPU, "curl", "-s", "-o", "/dev/null", "--max-time", "2", "--cacert", ca,
                                 f"{url}/1k.bin"), env=ENV)
        if r.returncode == 0:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer")


def negotiated(url):
    """What a client and this server agree on (openssl s_client -brief): both must say TLSv1.3
    and TLS_AES_128_GCM_SHA256, or the comparison is not like for like."""
    hostport = url.split("//", 1)[1]
    r = subprocess.run(in_ns(CLI_NS, CLI_CPU, "openssl", "s_client", "-connect", hostport, "-brief"),
                       input="", capture_output=True, text=True, timeout=30, env=ENV)
    return [l.strip() for l in r.stderr.splitlines() if "Protocol version" in l or "Ciphersuite" in l]


def run_wrk(url, conns, seconds):
    cmd = in_ns(CLI_NS, CLI_CPU, "wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--latency", "--timeout", "10s", url)
    return parse_wrk(subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, env=ENV).stdout)


def run_large(url, pids, ca, clients=16):
    before = cpu_seconds(pids)
    t0 = time.monotonic()
    procs = [subprocess.Popen(in_ns(CLI_NS, CLI_CPU, "curl", "-s", "-o", "/dev/null", "--max-time", "300", "--cacert", ca,
                                    "-w", "%{size_download}", url), stdout=subprocess.PIPE, text=True, env=ENV)
             for _ in range(clients)]
    sizes = [int(p.communicate(timeout=400)[0] or 0) for p in procs]
    wall = time.monotonic() - t0
    cpu = cpu_seconds(pids) - before
    total = sum(sizes)
    return {"clients": clients, "bytes": total, "complete": all(s == 1 << 30 for s in sizes), "seconds": wall,
            "mb_s": total / wall / 1e6, "server_cpu_s": cpu, "cpu_s_per_gb": cpu / (total / 1e9) if total else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", default=str(HERE.parents[1] / "build" / "tools" / "sluice"))
    ap.add_argument("--data", default="/work/data/h18n/https-bench")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--conns", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2, help="wrk cells per server, interleaved")
    ap.add_argument("--no-large", action="store_true")
    ap.add_argument("--openssl-too", action="store_true", help="also sluice with SLUICE_RECORD_ENGINE=openssl")
    ap.add_argument("--out", default=None)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    for tool in ("wrk", "nginx", "curl", "taskset", "openssl"):
        if not shutil.which(tool):
            sys.exit(f"https.py: {tool} is missing (bench/peers/setup installs the peers)")
    if "http_ssl_module" not in subprocess.run(["nginx", "-V"], capture_output=True, text=True).stderr:
        sys.exit("https.py: this nginx has no ssl module (nginx -V)")
    data = Path(a.data)
    root = data / "www"
    make_data(root, not a.no_large)
    ca, cert, key = make_certs(data / "pki")
    subprocess.run([NETNS, "up"], check=True, env=ENV)
    results = {"command": " ".join(sys.argv), "kernel": os.uname().release, "wrk": [], "large": []}
    procs = {}
    try:
        sl = subprocess.Popen(in_ns(SRV_NS, SRV_CPU, a.sluice, "serve", root, "--http", 8443, "--bind", SRV_IP,
                                    "--threads", 1, "--public", "--json", "-v", "--cert", cert, "--key", key),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        procs["sluice"] = sl
        results["sluice_url"] = sl.stdout.readline().strip()
        if a.openssl_too:
            so = subprocess.Popen(in_ns(SRV_NS, SRV_CPU, a.sluice, "serve", root, "--http", 8445, "--bind", SRV_IP,
                                        "--threads", 1, "--public", "--json", "-v", "--cert", cert, "--key", key),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=dict(ENV, SLUICE_RECORD_ENGINE="openssl"))
            procs["sluice-openssl"] = so
            so.stdout.readline()
        wd = data / "nginx"
        (wd / "body").mkdir(parents=True, exist_ok=True)
        conf = wd / "nginx.conf"
        conf.write_text(NGINX_CONF.format(dir=wd, ip=SRV_IP, port=8444, root=root, cert=cert, key=key, suite=SUITE))
        ng = subprocess.Popen(in_ns(SRV_NS, SRV_CPU, "nginx", "-c", conf, "-p", wd), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, env=ENV)
        procs["nginx"] = ng
        servers = {"sluice": f"https://{SRV_IP}:8443", "nginx": f"https://{SRV_IP}:8444"}
        if a.openssl_too:
            servers["sluice-openssl"] = f"https://{SRV_IP}:8445"
        for name, url in servers.items():
            wait_port(url, ca)
            results[f"{name}_negotiated"] = negotiated(url)
        pids = {"sluice": [sl.pid],
                "nginx": [ng.pid] + [int(k) for k in subprocess.run(["pgrep", "-P", str(ng.pid)], capture_output=True,
                                                                     text=True).stdout.split()]}
        if a.openssl_too:
            pids["sluice-openssl"] = [procs["sluice-openssl"].pid]
        for rnd in range(a.rounds):
            for name, url in servers.items():
                r = run_wrk(f"{url}/10k.bin", a.conns, a.seconds)
                r.update(server=name, file="10k", conns=a.conns, round=rnd)
                print(json.dumps(r), flush=True)
                results["wrk"].append(r)
        if not a.no_large:
            for name, url in servers.items():
                x = run_large(f"{url}/1g.bin", pids[name], ca)
                x["server"] = name
                print(json.dumps(x), flush=True)
                results["large"].append(x)
    finally:
        for name, p in procs.items():
            p.send_signal(signal.SIGTERM if name.startswith("sluice") else signal.SIGQUIT)
            try:
                out, err = p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
            if name.startswith("sluice") and out.strip():
                results[f"{name}_stats"] = json.loads(out.strip().splitlines()[-1])
                results[f"{name}_verbose"] = [l for l in err.splitlines() if "https" in l]
        subprocess.run([NETNS, "down"], env=ENV)
        if not a.keep:
            shutil.rmtree(data, ignore_errors=True)
    for name in ("sluice", "nginx", "sluice-openssl"):
        w = [r for r in results["wrk"] if r["server"] == name]
        if w:
            results[f"{name}_rps"] = sum(r["rps"] for r in w) / len(w)
            results[f"{name}_p99_ms"] = max(r["p99_ms"] for r in w)
    if results.get("nginx_rps"):
        results["rps_ratio"] = results["sluice_rps"] / results["nginx_rps"]
    lg = {x["server"]: x for x in results["large"]}
    if "sluice" in lg and "nginx" in lg:
        results["mb_s_ratio"] = lg["sluice"]["mb_s"] / lg["nginx"]["mb_s"]
        results["cpu_per_gb_ratio"] = lg["sluice"]["cpu_s_per_gb"] / lg["nginx"]["cpu_s_per_gb"]
    if "sluice-openssl" in lg and "nginx" in lg:
        results["openssl_rps_ratio"] = results["sluice-openssl_rps"] / results["nginx_rps"]
        results["openssl_mb_s_ratio"] = lg["sluice-openssl"]["mb_s"] / lg["nginx"]["mb_s"]
        results["openssl_cpu_per_gb_ratio"] = lg["sluice-openssl"]["cpu_s_per_gb"] / lg["nginx"]["cpu_s_per_gb"]
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))
    print(json.dumps({k: v for k, v in results.items() if k not in ("wrk",) and not k.endswith("_stats")}, indent=1))


if __name__ == "__main__":
    main()
