#!/usr/bin/env python3
"""What plain TCP moves as one whole transfer of a file (issue 16's bound, h16s).

iperf3 -n counts from after its streams are connected and stops its clock when the sender has
written the bytes, not when the receiver has them; sluice's goodput is over its whole run
(connect, handshakes, start-up, the last block's round trip). This is the same shape done
with nothing but TCP: the sender connects N sockets with one congestion control (each
connect begun at once), hands the file out in chunks of --chunk bytes to whichever socket
is free (os.sendfile from the page cache, like sluice's blocks: a slow stream does not hold
the end), shuts each socket down when no chunk is left, and stops the clock when the
receiver, having read every byte to EOF, has closed every socket. No handshake of its own,
no checksums, no encryption: the floor under any tool on this path.

    python3 bench/wan/tcpbound.py send --to 10.77.0.2:7017 --streams 8 --cc bbr FILE   # in A
    python3 bench/wan/tcpbound.py recv --bind 10.77.0.2:7017 --streams 8              # in B

send prints one JSON line: seconds (from before the first connect to the last close seen),
bytes, connect_s (until every socket was connected), first_byte_s, and per-stream bytes.
Every wait has a deadline (--timeout).
"""
import argparse
import json
import os
import socket
import struct
import sys
import threading
import time

TCP_CONGESTION = getattr(socket, "TCP_CONGESTION", 13)
TCP_NOTSENT_LOWAT = getattr(socket, "TCP_NOTSENT_LOWAT", 25)


def blocking_until(s, deadline):
    """Blocking again (os.sendfile on a socket with a Python timeout gets EAGAIN), each send or
    receive bounded by the kernel's SO_SNDTIMEO/SO_RCVTIMEO at what is left of the deadline."""
    s.settimeout(None)
    left = max(1.0, deadline - time.monotonic())
    tv = struct.pack("ll", int(left), int((left % 1) * 1e6))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)


def recv(a):
    host, port = a.bind.rsplit(":", 1)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, a.cc.encode())
    ls.bind((host, int(port)))
    ls.listen(a.streams)
    ls.settimeout(a.timeout)
    got = [0] * a.streams
    deadline = time.monotonic() + a.timeout

    def drain(i, s):
        buf = bytearray(1 << 20)
        view = memoryview(buf)
        blocking_until(s, deadline)
        try:
            while (n := s.recv_into(view)) > 0:
                got[i] += n
        finally:
            s.close()

    threads = []
    for i in range(a.streams):
        s, _ = ls.accept()
        t = threading.Thread(target=drain, args=(i, s))
        t.start()
        threads.append(t)
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    print(json.dumps({"bytes": sum(got), "per_stream": got}), flush=True)
    return 0


def send(a):
    host, port = a.to.rsplit(":", 1)
    size = os.path.getsize(a.file)
    chunks = [(off, min(a.chunk, size - off)) for off in range(0, size, a.chunk)]
    lock = threading.Lock()
    nxt = [0]
    sent = [0] * a.streams
    marks = {"connected": [], "first": []}
    errors = []
    deadline = time.monotonic() + a.timeout
    t0 = time.monotonic()

    def take():
        with lock:
            if nxt[0] >= len(chunks):
                return None
            c = chunks[nxt[0]]
            nxt[0] += 1
            return c

    def stream(i):
        fd = os.open(a.file, os.O_RDONLY)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, a.cc.encode())
            if a.lowat:  # what sluice sets on a long path (lib/core/io/send_backlog.hpp)
                s.setsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT, a.lowat)
            s.settimeout(max(1.0, deadline - time.monotonic()))
            s.connect((host, int(port)))
            blocking_until(s, deadline)
            marks["connected"].append(time.monotonic() - t0)
            first = True
            while (c := take()) is not None:
                off, left = c
                while left:
                    n = os.sendfile(s.fileno(), fd, off, left)
                    if first:
                        marks["first"].append(time.monotonic() - t0)
                        first = False
                    off += n
                    left -= n
                    sent[i] += n
            s.shutdown(socket.SHUT_WR)
            while s.recv(4096):  # the receiver closes once it has read to EOF: all bytes are there
                pass
        except OSError as e:
            errors.append(f"stream {i + 1}: {e}")
        finally:
            s.close()
            os.close(fd)

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(a.streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    secs = time.monotonic() - t0
    out = {"seconds": secs, "bytes": sum(sent), "file_bytes": size, "streams": a.streams, "cc": a.cc, "lowat": a.lowat,
           "connect_s": max(marks["connected"], default=None), "first_byte_s": min(marks["first"], default=None),
           "per_stream": sent, "complete": not errors and sum(sent) == size and not any(t.is_alive() for t in threads)}
    if errors:
        out["error"] = "; ".join(errors)[:300]
    print(json.dumps(out), flush=True)
    return 0 if out["complete"] else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["send", "recv"])
    ap.add_argument("file", nargs="?")
    ap.add_argument("--to")
    ap.add_argument("--bind")
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--cc", default="bbr")
    ap.add_argument("--chunk", type=int, default=8 << 20, help="bytes a socket takes at a time (sluice's block: 8 MiB)")
    ap.add_argument("--lowat", type=int, default=0, help="TCP_NOTSENT_LOWAT on each socket (0: the kernel's default)")
    ap.add_argument("--timeout", type=float, default=60.0, help="deadline of the whole run, seconds")
    a = ap.parse_intermixed_args()
    if a.mode == "send" and (not a.file or not a.to):
        ap.error("send needs FILE and --to")
    if a.mode == "recv" and not a.bind:
        ap.error("recv needs --bind")
    return send(a) if a.mode == "send" else recv(a)


if __name__ == "__main__":
    sys.exit(main())
