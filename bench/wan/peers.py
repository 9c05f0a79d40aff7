"""The peers issue 16 names, through the same emulator as sluice and iperf3 (run.py): tar|nc
and rsync (daemon; one stream each) and WDT (-num_ports N, no encryption, as
bench/peers/wdt.sh runs it). Each sends run.py's 1 GiB file from the page cache; tar|nc's
receiver discards it (as sluice's --recv-path null does), rsync's and WDT's write it under
the data directory. The congestion control is the namespaces' default for the run
(net.ipv4.tcp_congestion_control in A and B), restored after (set_cc: cubic needs the root
namespace's allowed list). Bounded like sluice: a run
still going at the time bound is measured from ss (bytes_acked of its connections) and
stopped."""
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import wan

PORT_NC, PORT_RSYNC, PORT_WDT = 7017, 7018, 7100
WDT = os.environ.get("SB_WDT", "/work/data/h19/wdt/bin/wdt")


def ss_acked(w, sport_expr):
    r = w.ex("a", ["ss", "-Htin", "state", "established", sport_expr], check=False)
    return (sum(int(x) for x in re.findall(r"bytes_acked:(\d+)", r.stdout)),
            sum(int(x) for x in re.findall(r"bytes_retrans:(\d+)", r.stdout)))


ALLOWED = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"


def set_cc(w, cc):
    """Sets the ends' default congestion control; returns (the old one, the root namespace's
    allowed list to restore or None). A namespace other than the first may make default only an
    algorithm in net.ipv4.tcp_allowed_congestion_control, a list only the root namespace can
    change (the kernel's tcp_set_default_congestion_control answers EPERM: "Operation not
    permitted", h16b's peers with cubic). So cc joins that list for the run and the list is
    restored after: the list only says what unprivileged processes may choose."""
    old = w.ex("a", ["sysctl", "-n", "net.ipv4.tcp_congestion_control"]).stdout.strip()
    allowed = Path(ALLOWED).read_text().split()
    restore = None
    if cc not in allowed:
        restore = " ".join(allowed)
        Path(ALLOWED).write_text(" ".join(allowed + [cc]))
    try:
        for side in ("a", "b"):
            w.ex(side, ["sysctl", "-qw", f"net.ipv4.tcp_congestion_control={cc}"])
    except BaseException:
        restore_cc(w, (old, restore))
        raise
    return old, restore


def restore_cc(w, saved):
    old, allowed = saved
    for side in ("a", "b"):
        w.ex(side, ["sysctl", "-qw", f"net.ipv4.tcp_congestion_control={old}"])
    if allowed is not None:
        Path(ALLOWED).write_text(allowed)


def wait_listening(w, port):
    for _ in range(100):
        if w.ex("b", ["ss", "-Hltn", f"sport = :{port}"], check=False).stdout.strip():
            return
        time.sleep(0.05)


def run_peer(w, a, tool, cc, streams):
    """One run of tool ("tarnc", "rsync", "wdt") with cc; None where the tool has no such
    stream count (tar|nc and rsync: one stream)."""
    if tool in ("tarnc", "rsync") and streams != 1:
        return None
    if tool == "wdt" and not Path(WDT).exists():
        return {"error": f"WDT not found at {WDT}"}
    size = Path(a.file).stat().st_size
    dest = Path(a.data_dir) / f"peer-{tool}"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    old = set_cc(w, cc)
    procs = []
    try:
        if tool == "tarnc":
            procs.append(w.popen("b", ["sh", "-c", f"nc -l -p {PORT_NC} > /dev/null"]))
            wait_listening(w, PORT_NC)
            expr = f"( dport = :{PORT_NC} )"
            cmd = ["sh", "-c", f"tar cf - -C {Path(a.file).parent} {Path(a.file).name} | nc -N {wan.ADDR_B} {PORT_NC}"]
        elif tool == "rsync":
            conf = dest / "rsyncd.conf"
            conf.write_text(f"[m]\npath = {dest}\nuse chroot = false\nread only = false\nuid = root\ngid = root\n")
            procs.append(w.popen("b", ["rsync", "--daemon", "--no-detach", f"--config={conf}", f"--port={PORT_RSYNC}",
                                       f"--address={wan.ADDR_B}"]))
            wait_listening(w, PORT_RSYNC)
            expr = f"( dport = :{PORT_RSYNC} )"
            cmd = ["rsync", "--whole-file", a.file, f"rsync://{wan.ADDR_B}:{PORT_RSYNC}/m/"]
        else:
            common = ["-start_port", PORT_WDT, "-num_ports", streams, "-transfer_id", "h16b", "-encryption_type",
                      "none", "-ipv4", "-treat_fewer_port_as_error"]
            procs.append(w.popen("b", [WDT, "-directory", dest, *common], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL))
            wait_listening(w, PORT_WDT)
            expr = f"( dport >= :{PORT_WDT} and dport < :{PORT_WDT + streams} )"
            src_dir = Path(a.file).parent / "wdt-src"
            src_dir.mkdir(exist_ok=True)
            link = src_dir / Path(a.file).name
            if not link.exists():
                os.link(a.file, link)  # WDT sends a directory: the file alone, same pages
            cmd = [WDT, "-directory", src_dir, "-destination", wan.ADDR_B, *common]
        t0 = time.monotonic()
        send = w.popen("a", cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append(send)
        try:
            _, err = send.communicate(timeout=a.seconds)
        except subprocess.TimeoutExpired:
            elapsed = time.monotonic() - t0
            acked, retrans = ss_acked(w, expr)
            return {"complete": False, "seconds": elapsed, "bytes": acked, "retrans_bytes": retrans, "cpu_s": 0,
                    "note": "partial: measured from ss at the time bound; CPU not measured"}
        elapsed = time.monotonic() - t0
        if send.returncode != 0:
            return {"error": f"{tool} exit {send.returncode}: {err.strip()[-300:]}"}
        return {"complete": True, "seconds": elapsed, "bytes": size, "retrans_bytes": 0, "cpu_s": 0,
                "note": "whole file over the sender's wall time; retransmits and CPU not measured"}
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        restore_cc(w, old)
        shutil.rmtree(dest, ignore_errors=True)
