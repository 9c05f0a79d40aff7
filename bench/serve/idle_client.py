"""The two processes bench/serve/idle.py starts inside its namespace.

`hold`: one client process that opens up to COUNT keep-alive connections to the server port,
each sending one GET and reading its answer, then holds them open and silent until killed.
`probe`: asks each `sluice serve` process sharing the port (SO_REUSEPORT) for its own /_stats.
A connection to the port lands on whichever process the kernel's hash picks, so the probe opens
several connections from an address the idle clients never use, asks `ss` for the server's end
of each (its socket inode) and finds the process holding that inode in /proc/PID/fd; then one
GET /_stats per process on a connection that process accepted. Its connections_open counts the
probe connections it holds, which are subtracted to give the idle connections it holds."""
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from idle_proc import meminfo, socket_inodes  # noqa: E402

PORT = 8080
IP_BIND_ADDRESS_NO_PORT = 24
PER_SOURCE = 20000  # connections per source address (the port range holds ~28k)
PROBE_SOURCE = "127.254.0.1"  # outside 127.1.0.0/16, where the idle clients' addresses are


def source_address(k):
    return f"127.{1 + k // 62500}.{(k // 250) % 250}.{1 + k % 250}"


def connect_from(src, timeout=30, port=PORT):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_IP, IP_BIND_ADDRESS_NO_PORT, 1)
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s


def hold(first_source, count, min_free, deadline, port=PORT):
    """Print `done N WHY` once it stops opening; then sleep until SIGTERM/SIGKILL (bounded)."""
    req = b"GET /idle.txt HTTP/1.1\r\nHost: x\r\n\r\n"
    # A reset on close: when the bench kills this process its connections go at once, with no
    # TIME_WAIT left behind for the namespace's deletion to sweep (nothing is measured then).
    linger0 = struct.pack("ii", 1, 0)
    held = []
    why = "count reached"
    last_report = 0
    for i in range(count):
        if i % 100 == 0 and time.monotonic() > deadline:
            why = "time bound"
            break
        if i % 2000 == 0:
            if meminfo()["MemAvailable"] < min_free:
                why = "free memory at the bound"
                break
            if i - last_report >= 10000:
                print(f"held {i}", flush=True)
                last_report = i
        s = None
        try:
            s = connect_from(source_address(first_source + i // PER_SOURCE), port=port)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger0)
            s.sendall(req)
            got = b""
            while not (got.endswith(b"\r\n\r\nidle\n") or b"HTTP/1.1 4" in got or b"HTTP/1.1 5" in got):
                chunk = s.recv(4096)
                if not chunk:
                    raise ConnectionError("closed by the server")
                got += chunk
            if not got.startswith(b"HTTP/1.1 200"):
                raise ConnectionError(got[:40].decode(errors="replace"))
        except OSError as e:
            why = f"connect/request error after {len(held)}: {e}"
            if s is not None:
                s.close()
            break
        held.append(s.detach())  # an int per connection: this process's own memory stays small
    print(f"held {len(held)}", flush=True)
    print(f"done {len(held)} {why}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    end = deadline + 900
    while time.monotonic() < end:
        time.sleep(1)
    os._exit(0)


def server_inode_by_probe_port():
    """{probe's source port: inode of the server's end}, from `ss` in this namespace; 0 while
    the connection waits in a listener's queue (not yet accepted: no fd, no inode)."""
    out = subprocess.run(["ss", "-tnHe", "state", "established", "dst", PROBE_SOURCE],
                         capture_output=True, text=True, timeout=120).stdout
    found = {}
    for line in out.splitlines():
        m = re.search(rf"127\.0\.0\.1:{PORT}\s+{re.escape(PROBE_SOURCE)}:(\d+)\b.*\bino:(\d+)", line)
        if m:
            found[int(m[1])] = int(m[2])
    return found


def new_socket_inodes(pid, known_fds):
    """Socket inodes behind the fds of `pid` not in `known_fds` (the probes' accepted ends):
    reading only those keeps a round to well under the server's 10 s request deadline, which
    closes a connection that has not sent its request (the probes wait silent until asked)."""
    fd_dir = f"/proc/{pid}/fd"
    out = set()
    for name in os.listdir(fd_dir):
        if name in known_fds:
            continue
        try:
            target = os.readlink(f"{fd_dir}/{name}")
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(int(target[8:-1]))
    return out


def get_stats(s):
    s.sendall(b"GET /_stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    got = b""
    end = time.monotonic() + 30
    while time.monotonic() < end:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    head, _, body = got.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise ConnectionError(f"no /_stats answer ({len(got)} bytes: {head[:60]!r})")
    return json.loads(body)


def probe(pids, per_pid, max_rounds=6):
    """Prints one JSON object: per server pid its connections_open, the probe connections it
    held (its own /_stats entry for PROBE_SOURCE, read in the same answer: no race with
    accepts or closes), the idle connections it held (the difference) and its sockets in /proc."""
    inodes = {pid: socket_inodes(pid) for pid in pids}
    known = {pid: set(os.listdir(f"/proc/{pid}/fd")) for pid in pids}
    per = {str(pid): {"sockets_in_proc": len(inodes[pid])} for pid in pids}
    left = set(pids)
    result = {"rounds": 0, "probes": 0}
    for r in range(max_rounds):  # bounded: each round opens per_pid probes per process left
        if not left:
            break
        result["rounds"] = r + 1
        probes = {}
        for _ in range(per_pid * len(left)):
            s = connect_from(PROBE_SOURCE)
            probes[s.getsockname()[1]] = s
        result["probes"] += len(probes)
        end = time.monotonic() + 5  # until every probe is accepted (has an inode), bounded
        by_port = server_inode_by_probe_port()
        while time.monotonic() < end and (len(by_port) < len(probes) or 0 in by_port.values()):
            time.sleep(0.1)
            by_port = server_inode_by_probe_port()
        owner = {ino: pid for pid in left for ino in new_socket_inodes(pid, known[pid])}
        for port, ino in by_port.items():
            pid = owner.get(ino)
            if pid not in left or port not in probes:
                continue
            entry = per[str(pid)]
            try:
                st = get_stats(probes[port])
                mine = [c for c in st.get("clients", []) if c.get("address") == PROBE_SOURCE]
                entry["connections_open"] = st["connections_open"]
                if not mine:  # its table full (256 addresses): the difference cannot be told
                    raise KeyError(f"{PROBE_SOURCE} not among the clients /_stats tracks")
                entry["probes"] = mine[0]["connections_open"]
                entry["idle_held"] = st["connections_open"] - entry["probes"]
                entry["requests"] = st["requests"]
                entry["connections_refused"] = st.get("connections_refused")
                entry["connections_timed_out"] = st.get("connections_timed_out")
                entry.pop("error", None)
                left.discard(pid)
            except (OSError, ValueError, KeyError) as e:
                entry["error"] = str(e)[:200] or type(e).__name__
        for s in probes.values():
            s.close()
    result["unanswered"] = sorted(left)
    result["per_process"] = per
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "hold":
        hold(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]),
             int(sys.argv[6]) if len(sys.argv) > 6 else PORT)
    elif sys.argv[1] == "probe":
        probe([int(p) for p in sys.argv[3].split(",")], int(sys.argv[2]))
