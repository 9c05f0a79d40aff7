"""Get sessions on the get ring (issue 15, h15g): single files are sent by one io_uring thread
for all sessions instead of a thread (and 1 + N stream threads) per session. Many clients at
once get the right bytes; a client that stalls or leaves mid-transfer holds no thread and no
fd once its deadline or its failure ends the session; a hostile client gets a clear error
(GET_DONE) and the others are still served; trees are sent by the ring too (h15r; more in
test_serve_get_ring_tree.py), and so are connect-back gets (h15t; more in
test_serve_get_ring_back.py), said in -v and counted in /_stats."""
import hashlib
import hmac
import json
import os
import select
import socket
import struct
import subprocess
import urllib.request

import pytest

import sluice_wire as w
from conftest import SLUICE, file_hash, journaled, kill_process, run_sluice, wait_for, write_random
from serve_client import Server

BLOCK = 8 << 20


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "www"
    (r / "tree").mkdir(parents=True)
    write_random(r / "big.bin", 3 * BLOCK + 12345, 5)  # blocks of 8 MiB and a short last one
    write_random(r / "stall.bin", 48 << 20, 6)         # more than the socket buffers of one stream hold
    (r / "empty").write_bytes(b"")
    (r / "one").write_bytes(b"x")
    (r / "tree" / "a").write_bytes(os.urandom(1000))
    return r


def stats(s):
    with urllib.request.urlopen(s.url("/_stats"), timeout=60) as r:
        return json.loads(r.read())


def fds(s):
    return len(os.listdir(f"/proc/{s.proc.pid}/fd"))


def settled_fds(s, tmp_path):
    """The server's fds once every thread has made its ring: after one whole get."""
    d = tmp_path / "warm"
    d.mkdir()
    r = get(s, "one", d)
    assert r.returncode == 0, r.stderr
    assert wait_for(lambda: stats(s)["get_sessions_open"] == 0, 60)
    return fds(s)


def threads(s):
    return len(os.listdir(f"/proc/{s.proc.pid}/task"))


def get(s, path, dest, *args):
    # A --public server asks no token, and a client given one refuses such a server (h18p).
    return run_sluice("get", s.sluice_base + path + ("" if s.public else "?token=testtoken"), dest, "--json", *args)


def start(s, path, streams, rtoken="receiver-token-1"):
    """A raw client: request, reply ok, 1 + streams connections attached. Returns (request, links)."""
    port = int(s.sluice_base.rstrip("/").rsplit(":", 1)[1])
    req = socket.create_connection(("127.0.0.1", port), timeout=60)
    w.read_get_frame(req, w.GET_HELLO)
    nonce = os.urandom(16)
    req.sendall(w.get_request(streams, path, nonce, rtoken))
    reply = w.read_get_frame(req, w.GET_REPLY)
    assert reply[0] == 0, reply
    links = []
    for _ in range(1 + streams):
        c = socket.create_connection(("127.0.0.1", port), timeout=60)
        w.read_get_frame(c, w.GET_HELLO)
        c.sendall(w.get_attach(nonce))
        links.append(c)
    return req, links


def handshakes(links, rtoken="receiver-token-1"):
    """The receiver's handshake on every link. Which link is the control connection is the
    server's choice (attaches are taken in the order their threads hand them over), and
    it answers the data streams' hellos only after the control's: so ServerHello goes out on
    all of them and each ClientHello is answered as it comes. Returns [control, data 1, ...]."""
    nonces = {}
    for c in links:
        nonces[c] = os.urandom(16)
        c.sendall(w.MAGIC + struct.pack("<HHI", w.VERSION, 0, 0) + nonces[c])
    by_index = {}
    pending = list(links)
    while pending:
        ready, _, _ = select.select(pending, [], [], 60)
        assert ready, "no ClientHello within 60 s"
        for c in ready:
            hello = w.recv_exact(c, 80)
            mac = hmac.new(rtoken.encode(), b"sluice-v1 server auth" + hello[32:48] + nonces[c], hashlib.sha256).digest()
            c.sendall(bytes(8) + mac)
            role, _, index = struct.unpack_from("<BBH", hello, 10)
            assert (role == 0) == (index == 0)
            by_index[index] = c
            pending.remove(c)
    return [by_index[i] for i in range(len(links))]


def get_done(req):
    p = w.read_get_frame(req, w.GET_DONE)
    status, n = struct.unpack_from("<II", p)
    return status, p[8:8 + n].decode(errors="replace")


def read_block(c):
    ftype, _, _, length = struct.unpack("<BBHI", w.recv_exact(c, 8))
    assert ftype in (w.BLOCK, w.STREAM_END), hex(ftype)
    p = w.recv_exact(c, length)
    if ftype == w.STREAM_END:
        return None, struct.unpack("<QQ", p)
    file_id, off, _ = struct.unpack_from("<QQQ", p)
    assert file_id == 0
    return off, p[24:]


def test_many_clients_at_once_get_the_right_bytes_with_no_thread_each(root, tmp_path):
    s = Server(root, "--port", "0", "--max-gets", "32", "-v")
    try:
        jobs = []
        names = ["big.bin", "empty", "one"] * 4
        for i, name in enumerate(names):
            d = tmp_path / f"in{i}"
            d.mkdir()
            url = s.sluice_base + name + "?token=testtoken"
            p = subprocess.Popen([SLUICE, "get", url, str(d), "--streams", str(1 + i % 4)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            jobs.append((p, d, name))
        for p, d, name in jobs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
            assert file_hash(d / name) == file_hash(root / name)
        st = stats(s)
        assert st["get_sessions_ring"] == len(names) and st["get_sessions_thread"] == 0, st
        assert st["get_sessions_failed"] == 0 and st["get_sessions_open"] == 0, st
        assert st["get_bytes_sent"] == sum((root / n).stat().st_size for n in names)
        assert "get ring" in st["get_path"]
        _, _, err = s.stop()
        assert err.count("(on the get ring): sent") == len(names), err
    finally:
        s.kill()


def test_a_connect_back_get_is_sent_by_the_ring_and_says_so(root, tmp_path):
    s = Server(root, "--port", "0", "-v")
    try:
        r = get(s, "tree", tmp_path, "--connect-back")
        assert r.returncode == 0, r.stderr
        assert (tmp_path / "tree" / "a").read_bytes() == (root / "tree" / "a").read_bytes()
        st = stats(s)
        assert st["get_sessions_thread"] == 0 and st["get_sessions_ring"] == 1, st
        assert st["get_sessions_ring_connect_back"] == 1, st
        _, _, err = s.stop()
        assert "get 'tree' by 127.0.0.1 (on the get ring, a tree of " in err and "connected back to 127.0.0.1:" in err, err
        assert "session thread" not in err, err
    finally:
        s.kill()


def test_the_whole_protocol_with_resume_ranges_and_a_resend(root):
    """A raw receiver: ack with the first block already verified, ask for a block again, then
    the end: STREAM_END and TRANSFER_END must count every block the streams carried."""
    s = Server(root, "--port", "0", public=True)
    try:
        data = (root / "big.bin").read_bytes()
        req, links = start(s, "big.bin", 1)
        ctl, dat = handshakes(links)
        assert w.read_frame(ctl)[0] == w.MANIFEST
        ftype, end = w.read_frame(ctl)
        assert ftype == w.MANIFEST_END and struct.unpack_from("<IIQQ", end)[2:] == (1, len(data))
        ctl.sendall(w.manifest_ack(0, [(0, 0, BLOCK)]))
        got = {}
        while sum(len(v) for v in got.values()) < len(data) - BLOCK:
            off, chunk = read_block(dat)
            assert off is not None and off >= BLOCK, off  # the verified block is not sent
            got[off] = chunk
        for off, chunk in got.items():
            assert data[off:off + len(chunk)] == chunk
        ctl.sendall(w.frame(w.RESEND, struct.pack("<QQQ", 0, BLOCK, BLOCK)))
        off, chunk = read_block(dat)
        assert off == BLOCK and chunk == data[BLOCK:2 * BLOCK]
        ctl.sendall(w.frame(w.ALL_VERIFIED, b""))
        off, (blocks, nbytes) = read_block(dat)
        assert off is None and blocks == len(got) + 1 and nbytes == len(data) - BLOCK + BLOCK
        ftype, p = w.read_frame(ctl)
        assert ftype == w.TRANSFER_END and struct.unpack_from("<IIQQ", p) == (1, 0, blocks, nbytes)
        ctl.sendall(w.final_status(0, 1, len(data)))
        assert get_done(req) == (0, "")
        assert wait_for(lambda: stats(s)["get_sessions_open"] == 0, 60)
        assert stats(s)["get_sessions_failed"] == 0
    finally:
        s.kill()


def test_stalled_clients_hold_no_thread_and_their_fds_go_at_the_deadline(root, tmp_path):
    s = Server(root, "--port", "0", "--send-timeout", "2", "-v", public=True)
    try:
        base_fds, base_threads = settled_fds(s, tmp_path), threads(s)
        held = []
        for i in range(4):
            req, links = start(s, "stall.bin", 1, rtoken=f"rt{i}")
            links = handshakes(links, rtoken=f"rt{i}")
            w.read_frame(links[0])
            w.read_frame(links[0])
            links[0].sendall(w.manifest_ack(0))
            held.append((req, links))  # and never read the data
        # The session threads that read the requests are gone; the transfers are the ring's.
        assert wait_for(lambda: threads(s) <= base_threads, 60), (threads(s), base_threads)
        r = get(s, "one", tmp_path)  # the others are served meanwhile
        assert r.returncode == 0, r.stderr
        assert wait_for(lambda: stats(s)["get_sessions_failed"] == 4, 120), stats(s)
        for req, _ in held:
            status, msg = get_done(req)
            assert status == 1 + 3 and "no progress" in msg, (status, msg)  # network
        for req, links in held:
            for c in [req] + links:
                c.close()
        assert wait_for(lambda: fds(s) <= base_fds, 60), (fds(s), base_fds)
        assert stats(s)["get_sessions_open"] == 0
    finally:
        s.kill()


def test_a_client_that_leaves_mid_transfer_frees_its_session_at_once(root, tmp_path):
    s = Server(root, "--port", "0", public=True)  # send timeout 60 s: the end must come from the close
    try:
        base_fds = settled_fds(s, tmp_path)
        req, links = start(s, "stall.bin", 2)
        links = handshakes(links)
        w.read_frame(links[0])
        w.read_frame(links[0])
        links[0].sendall(w.manifest_ack(0))
        read_block(links[1])
        for c in [req] + links:
            c.close()
        assert wait_for(lambda: stats(s)["get_sessions_failed"] == 1 and stats(s)["get_sessions_open"] == 0, 30), stats(s)
        assert stats(s)["get_sessions_ring"] == 2
        assert wait_for(lambda: fds(s) <= base_fds, 30), (fds(s), base_fds)
    finally:
        s.kill()


def hostile_garbage_hello(links):
    for c in links:
        c.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + bytes(6))


def hostile_oversized_frame(links):
    links[:] = handshakes(links)
    w.read_frame(links[0])
    w.read_frame(links[0])
    links[0].sendall(struct.pack("<BBHI", w.MANIFEST_ACK, 0, 0, 1 << 20))  # within the protocol's 8 MiB


def hostile_wrong_frame(links):
    links[:] = handshakes(links)
    w.read_frame(links[0])
    w.read_frame(links[0])
    links[0].sendall(w.frame(w.BLOCK, bytes(40)))


def hostile_bad_mac(links):
    for c in links:
        c.sendall(w.MAGIC + struct.pack("<HHI", w.VERSION, 0, 0) + os.urandom(16))
    ready, _, _ = select.select(links, [], [], 60)  # the control connection's ClientHello comes first
    assert ready
    w.recv_exact(ready[0], 80)
    ready[0].sendall(bytes(40))  # status ok, but a MAC of zeros


@pytest.mark.parametrize("play,words", [
    (hostile_garbage_hello, "is not a sluice receiver"),
    (hostile_oversized_frame, "bytes (a get on the serve ring takes at most 262144)"),
    (hostile_wrong_frame, "BLOCK on the control connection"),
    (hostile_bad_mac, "could not prove it holds the request's token"),
])
def test_a_hostile_client_gets_a_clear_error_and_others_are_served(root, tmp_path, play, words):
    s = Server(root, "--port", "0", public=True)
    try:
        base_fds = settled_fds(s, tmp_path)
        req, links = start(s, "big.bin", 1)
        play(links)
        status, msg = get_done(req)
        assert status > 0 and words in msg, (status, msg)
        r = get(s, "big.bin", tmp_path)
        assert r.returncode == 0, r.stderr
        assert file_hash(tmp_path / "big.bin") == file_hash(root / "big.bin")
        for c in [req] + links:
            c.close()
        assert wait_for(lambda: fds(s) <= base_fds, 30), (fds(s), base_fds)
        st = stats(s)
        assert st["get_sessions_failed"] == 1 and st["get_sessions_ring"] == 3, st
    finally:
        s.kill()


def cut_then_resume(root, path, dest):
    """A get of path into dest cut short on a rate-limited server (slow enough to kill once a
    verified block is journaled), then finished by a server without the limit: the receiver's
    journal answers MANIFEST_ACK with what it has, and only the rest is sent. Returns that
    second server's /_stats."""
    slow = Server(root, "--port", "0", "--get-rate-limit", "8M")
    try:
        first = subprocess.Popen([SLUICE, "get", slow.sluice_base + path + "?token=testtoken", str(dest), "--streams", "2"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert wait_for(lambda: journaled(dest), 60), "no verified block was journaled"
        finally:
            kill_process(first)
    finally:
        slow.kill()
    s = Server(root, "--port", "0")
    try:
        r = get(s, path, dest, "--streams", "2")
        assert r.returncode == 0, r.stderr
        st = json.loads(r.stdout.splitlines()[-1])
        assert st["bytes_skipped"] > 0 and st["bytes_sent"] + st["bytes_skipped"] == st["bytes"], st
        return stats(s)
    finally:
        s.kill()


def test_a_real_client_resumes_on_the_ring(root, tmp_path):
    dest = tmp_path / "in"
    dest.mkdir()
    st = cut_then_resume(root, "big.bin", dest)
    assert file_hash(dest / "big.bin") == file_hash(root / "big.bin")
    assert st["get_sessions_ring"] == 1
