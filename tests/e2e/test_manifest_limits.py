"""The receiver's memory for the manifest is bounded in total, not only per field (issue 14,
item 8): a sender listing many entries with long paths and symlink targets is refused once the
file table would pass --max-manifest-bytes, before the receiver's memory follows it."""
import os
import select
import struct
import time

import pytest

import sluice_wire as w

PAGE_BYTES = 8 << 20  # the largest control frame payload


def long_symlinks(count, start=0):
    """Entries of ~8 KB each: a 4,095-byte path (one deep directory, a unique last name) and a
    4,095-byte target, the longest the protocol allows."""
    parent = "/".join(["d" * 240] * 16)  # 3,855 bytes
    for i in range(start, start + count):
        name = f"{i:010d}" + "n" * (4095 - len(parent) - 1 - 10)
        yield (i, w.SYMLINK, parent + "/" + name, 0, "t" * 4095)


def manifest_pages(entries):
    page, size = [], 8
    for e in entries:
        cost = 40 + len(e[2]) + len(e[4])
        if page and (size + cost > PAGE_BYTES or len(page) == 65536):
            yield page
            page, size = [], 8
        page.append(e)
        size += cost
    if page:
        yield page


def wait_with_peak_rss(rx, timeout=60):
    """Waits for the receiver to exit; returns (exit code, stderr, peak RSS in kB). The peak is
    the kernel's ru_maxrss from wait4, the VmHWM of the whole life of the process, so no moment
    of it is missed (its /proc status loses VmHWM once it has exited)."""
    err = b""
    fd = rx.proc.stderr.fileno()
    deadline = time.monotonic() + timeout
    while True:  # stderr reaches end of file when the receiver exits
        left = deadline - time.monotonic()
        assert left > 0, "the receiver did not exit"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            err += chunk
    _, status, usage = os.wait4(rx.proc.pid, 0)
    rx.proc.returncode = os.waitstatus_to_exitcode(status)
    return rx.proc.returncode, err.decode(errors="replace"), usage.ru_maxrss


def send_manifest(port, entries):
    """Sends the entries page by page, each after the previous one's ack, as a sender does.
    Returns (pages acked, the ABORT message if the receiver refused)."""
    c, status = w.handshake("127.0.0.1", port, "testtoken", 0, 0, 1, os.urandom(16))
    assert status == 0
    acked = 0
    for seq, page in enumerate(manifest_pages(entries)):
        try:
            c.sendall(w.manifest(seq, page))
            ftype, payload = w.read_frame(c)
        except (ConnectionError, OSError):
            return acked, None
        if ftype == w.ABORT:
            code, n = struct.unpack_from("<II", payload)
            return acked, payload[8:8 + n].decode()
        assert ftype == w.MANIFEST_ACK, ftype
        acked += 1
    return acked, None


def test_manifest_over_the_memory_limit_is_refused_with_the_limit_named(tmp_path, receiver_factory):
    limit = 16 << 20
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest, "--max-manifest-bytes", str(limit))
    # 20,000 entries of ~8 KB, the attack of issue 14: ~160 MB of manifest, 330 MB held before.
    acked, abort = send_manifest(rx.port, long_symlinks(20_000))
    rc, err, hwm_kb = wait_with_peak_rss(rx)
    assert rc == 7, (rc, err)  # protocol
    assert "--max-manifest-bytes" in err and str(limit) in err, err
    assert abort is None or "--max-manifest-bytes" in abort, abort
    assert acked < 20_000 * 8230 // PAGE_BYTES  # refused part way, not at the end
    assert not list(dest.rglob("*")) or all(p.is_dir() for p in dest.rglob("*"))
    if os.environ.get("SLUICE_SANITIZED"):
        # AddressSanitizer keeps freed memory in quarantine (256 MiB) and adds shadow memory: the
        # peak says nothing about the receiver's own bound there (scripts/test-asan sets this).
        pytest.skip(f"peak RSS not judged under a sanitizer ({hwm_kb} kB)")
    # Generous: the limit, two 8 MiB pages (the frame and its decoded entries) and the process.
    assert hwm_kb < (limit >> 10) + 64 * 1024, f"receiver peak RSS {hwm_kb} kB"


def test_a_manifest_under_the_limit_still_arrives(tmp_path, receiver_factory):
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest, "--max-manifest-bytes", str(16 << 20))
    acked, abort = send_manifest(rx.port, long_symlinks(500))
    assert abort is None and acked == 1
    rx.kill()
