#!/usr/bin/env python3
"""The disk's ceiling for a copy (issue 19): what this machine's disk does when one set is read
and its copy written at the same time, with no network and (almost) no CPU in the way, at a
chosen number of reads and writes in flight. A tool's rate on the same set is judged against it.

  bench-lock python3 bench/cost-vs-size/ceiling.py SRC RX [--readers 4] [--writers 16]
      [--rbs 8] [--wbs 2] [--no-write] [--small-pages] [--json OUT]

READERS threads each read one file at a time in RBS MiB chunks with O_DIRECT (one read in flight
per thread); WRITERS threads write the chunks with O_DIRECT in WBS MiB pieces into a new file
(one write in flight per thread), as sluice's sender (4 streams, one 8 MiB cold read each) and
receiver (2 MiB O_DIRECT writes, 4 per stream) do. A file's unaligned tail goes through a second,
buffered fd. Buffers are 2 MiB aligned with MADV_HUGEPAGE, like sluice's AlignedBuffer: with 4 KiB
pages each page is one segment of the request and this VM's virtio disk splits requests at ~512
KiB, which cut the cold read rate of the small set from 3.3 GB/s to 1.1 GB/s (--small-pages shows
it). Cold: sync and caches dropped first; the copy goes to a fresh directory under RX (TOPDIR) and
is deleted after (then wait 40 s before the next run: ext4's recently-deleted window). A run
killed before its end (SIGTERM from `timeout`, SIGKILL) leaves its copy under RX: delete it. The
reads are one file per reader at a time, so for sets of small files (minor: ~200 KiB each) this
is no ceiling at a few readers: give it as many readers as the tool keeps reads in flight.
Prints one JSON line: seconds, MB/s, files/s and the disk's own counters for the run
(/proc/diskstats of SRC's device: MB/s, mean request KiB and latency per direction, mean queue
depth, utilisation)."""
import argparse
import ctypes
import json
import mmap
import os
import queue
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "wdt-report"))
import measure  # noqa: E402

HUGE = 2 << 20


def device_of(path):
    """The /proc/diskstats name of the whole disk holding path (vda for vda1 too)."""
    dev = os.stat(path).st_dev
    name = os.path.basename(os.path.realpath(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"))
    if os.path.exists(f"/sys/class/block/{name}/partition"):
        name = os.path.basename(os.path.dirname(os.path.realpath(f"/sys/class/block/{name}")))
    return name


def diskstats(dev):
    with open("/proc/diskstats") as f:
        for line in f:
            p = line.split()
            if p[2] == dev:
                return [int(x) for x in p[3:]]
    raise SystemExit(f"ceiling: no {dev} in /proc/diskstats")


def disk_summary(a, b, seconds):
    """Counters between two /proc/diskstats samples (Documentation/admin-guide/iostats.rst)."""
    d = [y - x for x, y in zip(a, b)]
    reads, rsec, rms, writes, wsec, wms, busy_ms, weighted_ms = d[0], d[2], d[3], d[4], d[6], d[7], d[9], d[10]
    return {"read_mb_s": round(rsec * 512 / 1e6 / seconds, 1), "write_mb_s": round(wsec * 512 / 1e6 / seconds, 1),
            "read_req_kib": round(rsec / 2 / max(reads, 1), 1), "write_req_kib": round(wsec / 2 / max(writes, 1), 1),
            "read_ms": round(rms / max(reads, 1), 2), "write_ms": round(wms / max(writes, 1), 2),
            "queue_depth": round(weighted_ms / 1000 / seconds, 1), "util": round(busy_ms / 1000 / seconds, 2)}


class Buffers:
    def __init__(self, count, size, huge):
        self.maps, self.free = [], queue.Queue()
        for _ in range(count):
            m = mmap.mmap(-1, size + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            skip = (-ctypes.addressof(ctypes.c_char.from_buffer(m))) % HUGE
            if huge:
                m.madvise(mmap.MADV_HUGEPAGE)
            v = memoryview(m)[skip:skip + size]
            v[:] = bytes(size)  # first touch here, not inside the timed copy (this VM's slow fresh pages)
            self.maps.append(m)
            self.free.put(v)


class Target:
    """A file of the copy: its O_DIRECT fd is closed when its last chunk is written."""

    def __init__(self, path, chunks, direct):
        self.path, self.left, self.lock = path, chunks, threading.Lock()
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | (os.O_DIRECT if direct else 0), 0o644)

    def chunk_done(self):
        with self.lock:
            self.left -= 1
            last = self.left == 0
        if last:
            os.close(self.fd)


def copy(a, files, dst):
    rbs, wbs = a.rbs << 20, a.wbs << 20
    todo = queue.Queue()
    for f in files:
        todo.put(f)
    bufs = Buffers(a.readers + a.writers + 4, rbs, not a.small_pages)
    chunks = queue.Queue(maxsize=a.readers + a.writers + 4)
    errors = []

    def reader():
        try:
            while True:
                try:
                    src = todo.get_nowait()
                except queue.Empty:
                    return
                size = os.path.getsize(src)
                fd = os.open(src, os.O_RDONLY | os.O_DIRECT)
                target = None
                if not a.no_write:
                    path = os.path.join(dst, os.path.relpath(src, a.src))
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    target = Target(path, max(1, -(-size // rbs)), True)
                at = 0
                while True:
                    b = bufs.free.get()
                    n = os.preadv(fd, [b], at)
                    if target:
                        chunks.put((target, b, at, n))
                    else:
                        bufs.free.put(b)
                    at += n
                    if at >= size or n == 0:
                        break
                os.close(fd)
        except OSError as e:
            errors.append(e)

    def writer():
        while True:
            item = chunks.get()
            if item is None:
                return
            target, b, at, n = item
            try:
                whole = n & ~4095
                done = 0
                while done < whole:
                    k = min(wbs, whole - done)
                    os.pwritev(target.fd, [b[done:done + k]], at + done)
                    done += k
                if whole < n:  # O_DIRECT needs whole blocks: the tail through the page cache
                    fd = os.open(target.path, os.O_WRONLY)
                    os.pwrite(fd, b[whole:n], at + whole)
                    os.close(fd)
            except OSError as e:
                errors.append(e)
            bufs.free.put(b)
            target.chunk_done()

    rs = [threading.Thread(target=reader) for _ in range(a.readers)]
    ws = [threading.Thread(target=writer) for _ in range(a.writers)]
    for t in rs + ws:
        t.start()
    for t in rs:
        t.join()
    for _ in ws:
        chunks.put(None)
    for t in ws:
        t.join()
    if errors:
        raise SystemExit(f"ceiling: {errors[0]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="the set (a directory tree)")
    ap.add_argument("rx", help="parent of the copy's fresh directory (on the disk measured)")
    ap.add_argument("--readers", type=int, default=4, help="reads in flight (default 4: sluice's streams)")
    ap.add_argument("--writers", type=int, default=16, help="writes in flight (default 16: sluice's receiver)")
    ap.add_argument("--rbs", type=int, default=8, help="read size, MiB (default 8: sluice's block)")
    ap.add_argument("--wbs", type=int, default=2, help="write size, MiB (default 2: sluice's O_DIRECT write)")
    ap.add_argument("--no-write", action="store_true", help="read only: the cold read ceiling")
    ap.add_argument("--small-pages", action="store_true", help="no MADV_HUGEPAGE on the buffers")
    ap.add_argument("--json", help="also write the result here")
    a = ap.parse_args()
    if a.readers < 1 or a.writers < 1 or not 1 <= a.rbs <= 64 or not 1 <= a.wbs <= a.rbs:
        ap.error("need readers, writers >= 1 and 1 <= wbs <= rbs <= 64")
    a.src = os.path.abspath(a.src)
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(a.src) for f in fs)
    total = sum(os.path.getsize(f) for f in files)
    os.makedirs(a.rx, exist_ok=True)
    subprocess.run(["chattr", "+T", a.rx], capture_output=True)
    dst = os.path.join(a.rx, f"ceiling-{os.getpid()}-{time.time_ns()}")
    os.makedirs(dst)
    dev = device_of(a.rx)
    measure.drop_caches()
    try:
        d0, t0 = diskstats(dev), time.monotonic()
        copy(a, files, dst)
        t1, d1 = time.monotonic(), diskstats(dev)
        os.sync()
        t2 = time.monotonic()
    finally:
        shutil.rmtree(dst, ignore_errors=True)
    rec = {"src": a.src, "files": len(files), "bytes": total, "seconds": round(t1 - t0, 2),
           "mb_s": round(total / 1e6 / (t1 - t0), 1), "files_s": round(len(files) / (t1 - t0), 1),
           "sync_after_s": round(t2 - t1, 2), "readers": a.readers, "writers": 0 if a.no_write else a.writers,
           "rbs_mib": a.rbs, "wbs_mib": a.wbs, "huge_pages": not a.small_pages, "device": dev,
           "disk": disk_summary(d0, d1, t1 - t0)}
    line = json.dumps(rec)
    print(line)
    if a.json:
        with open(a.json, "a") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
