"""Tree gets on the get ring (issue 15, h15r): a directory asked for is sent by the ring's state
machines, with no thread per session: nested directories, empty files and directories, symlinks
that stay inside, a large file and more than one manifest page of small files arrive identical,
in clear and encrypted; a receiver's resume ranges and RESEND are honoured per file; a get cut
short resumes; --get-rate-limit paces a tree on the ring; 16 tree gets at once leave the
server's thread count where it was; /_stats (get_sessions_ring_tree) and -v say which path sent
each."""
import os
import re
import select
import struct
import subprocess
import time

import pytest

import sluice_wire as w
from conftest import SLUICE, file_hash, kill_process, leftovers, wait_for, write_random
from serve_client import Server
from test_serve_get_ring import cut_then_resume, get, get_done, handshakes, settled_fds, start, stats, threads

BLOCK = 8 << 20
SMALL = 1100  # small files: with the rest, more than one manifest page (1,024 entries)


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "www"
    t = r / "set"
    (t / "a" / "b" / "c").mkdir(parents=True)
    (t / "a" / "empty_dir").mkdir()
    (t / "small").mkdir()
    write_random(t / "big.bin", 3 * BLOCK + 12345, 11)  # blocks of 8 MiB and a short last one
    (t / "empty.txt").write_bytes(b"")
    (t / "a" / "b" / "c" / "deep.txt").write_text("deep\n")
    (t / "a" / "b" / "empty").write_bytes(b"")
    for i in range(SMALL):
        (t / "small" / f"f{i:04d}").write_bytes(os.urandom(i * 7 % 3000))
    os.symlink("big.bin", t / "link")
    os.symlink("../empty.txt", t / "a" / "up")
    (r / "one").write_bytes(b"x")
    return r


def listing(top):
    """{relative path: ('d',) | ('l', target) | ('f', hash)} of a tree, links never followed."""
    out = {}

    def walk(d, rel):
        for e in os.scandir(d):
            p = rel + e.name
            if e.is_symlink():
                out[p] = ("l", os.readlink(e.path))
            elif e.is_dir(follow_symlinks=False):
                out[p] = ("d",)
                walk(e.path, p + "/")
            else:
                out[p] = ("f", file_hash(e.path))

    walk(top, "")
    return out


@pytest.mark.parametrize("streams,extra", [(1, []), (4, []), (3, ["--encrypt"])])
def test_a_tree_arrives_identical_on_the_ring(root, tmp_path, streams, extra):
    s = Server(root, "--port", "0", "-v")
    try:
        dest = tmp_path / "in"
        dest.mkdir()
        r = get(s, "set", dest, "--streams", str(streams), *extra)
        assert r.returncode == 0, r.stderr
        want = listing(root / "set")
        assert listing(dest / "set") == want
        assert leftovers(dest) == []
        st = stats(s)
        assert st["get_sessions_ring"] == 1 and st["get_sessions_ring_tree"] == 1 and st["get_sessions_thread"] == 0, st
        assert st["get_sessions_ring_encrypted"] == (1 if extra else 0), st
        assert st["get_bytes_sent"] == sum((root / "set" / p).stat().st_size for p, v in want.items() if v[0] == "f")
        _, _, err = s.stop()
        entries = 1 + len(want)  # the directory asked for, then everything in it
        assert re.search(rf"get 'set' by 127\.0\.0\.1 \(on the get ring, a tree of {entries} entries[,)].*: sent", err), err
    finally:
        s.kill()


def test_a_rate_limited_tree_is_paced_on_the_ring(root, tmp_path):
    """--get-rate-limit no longer sends a get to a session thread: the ring paces the session
    (its token bucket), and -v says so. The rate is not timed here (no timed assertions); the
    resume tests below rely on it being slow enough to cut."""
    s = Server(root, "--port", "0", "--get-rate-limit", "64M", "-v")
    try:
        for i, extra in enumerate([[], ["--encrypt"]]):
            dest = tmp_path / f"in{i}"
            dest.mkdir()
            r = get(s, "set", dest, "--streams", "2", *extra)
            assert r.returncode == 0, r.stderr
            assert listing(dest / "set") == listing(root / "set")
        st = stats(s)
        assert st["get_sessions_ring_tree"] == 2 and st["get_sessions_thread"] == 0, st
        _, _, err = s.stop()
        assert err.count("paced at 67108864 bytes/s (--get-rate-limit)") == 2, err
        assert "sent by a session thread" not in err, err
    finally:
        s.kill()


def manifest_entries(payload):
    """A MANIFEST page's entries: [(id, size, kind, path)]."""
    _, count = struct.unpack_from("<II", payload)
    at, out = 8, []
    for _ in range(count):
        fid, size, _, _, kind, _, plen, tlen, _ = struct.unpack_from("<QQqIBBHHH", payload, at)
        at += 36
        out.append((fid, size, kind, payload[at:at + plen].decode()))
        at += plen + tlen
    assert at == len(payload)
    return out


def read_data(c):
    """A BLOCK (file, offset, bytes) or STREAM_END (None, (blocks, bytes)) from a data stream."""
    ftype, _, _, length = struct.unpack("<BBHI", w.recv_exact(c, 8))
    assert ftype in (w.BLOCK, w.STREAM_END), hex(ftype)
    p = w.recv_exact(c, length)
    if ftype == w.STREAM_END:
        return None, None, struct.unpack("<QQ", p)
    fid, off, _ = struct.unpack_from("<QQQ", p)
    return fid, off, p[24:]


def test_pages_resume_ranges_and_a_resend_per_file(root):
    """A raw receiver: every manifest page acked in turn, with big.bin's first block and one small
    file already verified; the rest arrives exactly once, in blocks naming the right files; a
    RESEND of a small file is honoured; the end counts every block."""
    s = Server(root, "--port", "0", public=True)
    try:
        req, links = start(s, "set", 1)
        ctl, dat = handshakes(links)
        pages, entries, page_of = 0, [], {}
        while True:
            ftype, p = w.read_frame(ctl)
            if ftype == w.MANIFEST_END:
                break
            assert ftype == w.MANIFEST, hex(ftype)
            for e in manifest_entries(p):
                page_of[e[0]] = pages
                entries.append(e)
            pages += 1
        assert pages >= 2 and [e[0] for e in entries] == list(range(len(entries)))
        assert struct.unpack_from("<IIQQ", p)[0] == pages and struct.unpack_from("<IIQQ", p)[2] == len(entries)
        by_path = {path: (fid, size, kind) for fid, size, kind, path in entries}
        assert by_path["set"][2] == w.DIR and by_path["set/link"][2] == w.SYMLINK and by_path["set/a/empty_dir"][2] == w.DIR
        big, small = by_path["set/big.bin"][0], by_path["set/small/f0009"][0]
        assert by_path["set/small/f0009"][1] == 63
        for seq in range(pages):  # each page's ack names only its own files
            ranges = [(f, o, l) for f, o, l in [(big, 0, BLOCK), (small, 0, 63)] if page_of[f] == seq]
            ctl.sendall(w.manifest_ack(seq, ranges))
        want = {fid: size for fid, size, kind, _ in entries if kind == w.FILE and size > 0 and fid != small}
        got = {}
        need = sum(want.values()) - BLOCK
        while sum(len(v) for v in got.values()) < need:
            fid, off, chunk = read_data(dat)
            assert fid in want and (fid, off) not in got, (fid, off)
            assert not (fid == big and off < BLOCK)  # verified already: never sent
            got[(fid, off)] = chunk
        paths = {fid: path for fid, _, _, path in entries}
        for (fid, off), chunk in got.items():
            with open(root / paths[fid], "rb") as f:
                f.seek(off)
                assert f.read(len(chunk)) == chunk, paths[fid]
        other = by_path["set/small/f0100"][0]
        ctl.sendall(w.frame(w.RESEND, struct.pack("<QQQ", other, 0, 700)))
        fid, off, chunk = read_data(dat)
        assert (fid, off) == (other, 0) and chunk == (root / "set/small/f0100").read_bytes()
        ctl.sendall(w.frame(w.ALL_VERIFIED, b""))
        _, _, (blocks, nbytes) = read_data(dat)
        assert blocks == len(got) + 1 and nbytes == need + 700
        ftype, p = w.read_frame(ctl)
        assert ftype == w.TRANSFER_END and struct.unpack_from("<IIQQ", p) == (1, 0, blocks, nbytes)
        ctl.sendall(w.final_status(0, len(want), need))
        assert get_done(req) == (0, "")
        st = stats(s)
        assert st["get_sessions_ring_tree"] == 1 and st["get_sessions_failed"] == 0, st
    finally:
        s.kill()


def test_an_ack_naming_another_pages_file_fails_the_get(root):
    s = Server(root, "--port", "0", public=True)
    try:
        req, links = start(s, "set", 1)
        ctl, _ = handshakes(links)
        ids = []
        while True:
            ftype, p = w.read_frame(ctl)
            if ftype == w.MANIFEST_END:
                break
            ids.append([e[0] for e in manifest_entries(p)])
        ctl.sendall(w.manifest_ack(0, [(ids[1][-1], 0, 1)]))  # a file of page 1 in page 0's ack
        status, msg = get_done(req)
        assert status == 6 and "outside the page's files" in msg, (status, msg)  # protocol
    finally:
        s.kill()


def test_a_tree_cut_short_resumes_on_the_ring(root, tmp_path):
    """A tree get cut short (on a rate-limited server: slow enough to kill mid-way) is finished by
    a server without the limit: each file's verified ranges are skipped, the rest sent."""
    dest = tmp_path / "in"
    dest.mkdir()
    st = cut_then_resume(root, "set", dest)
    assert listing(dest / "set") == listing(root / "set")
    assert leftovers(dest) == []
    assert st["get_sessions_ring_tree"] == 1


def test_16_tree_gets_at_once_add_no_thread(root, tmp_path):
    """16 tree gets held mid-transfer (raw receivers that read the first manifest page and stop)
    are all open at once while the server's thread count stays where it was; a real client is
    served meanwhile; 16 real clients at once then all get the tree whole."""
    s = Server(root, "--port", "0", "--max-gets", "40", public=True)
    held = []
    try:
        settled_fds(s, tmp_path)
        base = threads(s)
        for i in range(16):
            req, links = start(s, "set", 2, rtoken=f"rt{i}")
            links = handshakes(links, rtoken=f"rt{i}")
            assert w.read_frame(links[0])[0] == w.MANIFEST
            held.append((req, links))
        assert stats(s)["get_sessions_open"] == 16
        assert threads(s) == base, (threads(s), base)
        dest = tmp_path / "during"
        dest.mkdir()
        r = run_get(s, "set", dest)
        assert r.returncode == 0, r.stderr
        assert listing(dest / "set") == listing(root / "set")
        assert threads(s) == base
        for req, links in held:
            for c in [req] + links:
                c.close()
        held = []
        assert wait_for(lambda: stats(s)["get_sessions_open"] == 0, 60), stats(s)

        jobs = []
        for i in range(16):
            d = tmp_path / f"in{i}"
            d.mkdir()
            jobs.append((subprocess.Popen([SLUICE, "get", s.sluice_base + "set", str(d), "--streams", str(1 + i % 4)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True), d))
        seen = set()
        deadline = time.monotonic() + 300
        try:
            while any(p.poll() is None for p, _ in jobs) and time.monotonic() < deadline:
                seen.add(threads(s))  # never more than before, whenever it is looked at
                select.select([], [], [], 0.05)
        finally:
            for p, _ in jobs:
                if p.poll() is None:
                    kill_process(p)
        assert seen <= {base}, (seen, base)
        want = listing(root / "set")
        for p, d in jobs:
            assert p.returncode == 0, p.stderr.read()
            assert listing(d / "set") == want
        st = stats(s)
        assert st["get_sessions_ring_tree"] == 16 + 16 + 1 and st["get_sessions_thread"] == 0, st
    finally:
        for req, links in held:
            for c in [req] + links:
                c.close()
        s.kill()


def run_get(s, path, dest, *args):
    return subprocess.run([SLUICE, "get", s.sluice_base + path, str(dest), *args], capture_output=True, text=True, timeout=300)
