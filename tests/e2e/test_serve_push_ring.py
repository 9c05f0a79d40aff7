"""Pushes' data streams on the serve's rings (issue 15, h15p). Before, each admitted push was
received by `sluice recv`'s engine on threads of its own: 2 + streams per push. Now its data
streams are received by the ring that admitted it (receives on the ring, each stream's parse,
writes and checksums on the ring's pool) and only the push's own two threads remain (admitting
its connections; its control). What must hold: four pushes of eight streams each, held
mid-transfer at once, add at most 2 threads per push to the server (the count cannot depend on
timing: no thread is ever made for a data stream; main's binary adds 10 per push); an
encrypted push's records are opened on the pool; blocks cut off page edges, in awkward orders
over several streams (test_hostile_blocks.py's scenarios, played by a hand-written pusher) are
written exactly by the ring's O_DIRECT plan; a server told to stop during a push ends it
(nothing incomplete under a final name) instead of hanging on the streams it hosts. No timed
assertions: every wait_for is a hang guard."""
import json
import os
import random
import socket
import subprocess
import urllib.request
from pathlib import Path

from conftest import SLUICE, file_hash, kill_process, leftovers, run_sluice, tree_digest, wait_for, write_random
from serve_client import Server
import sluice_wire as w
import test_hostile_blocks as hb
import pytest

TOKEN = "testtoken"


def stats(server):
    return json.loads(urllib.request.urlopen(server.url("/_stats"), timeout=30).read())


def threads(server):
    return len(os.listdir(f"/proc/{server.proc.pid}/task"))


def tree(root, seed, big):
    root.mkdir(parents=True)
    write_random(root / "big.bin", big, seed)
    for i in range(20):
        (root / f"f{i:02d}").write_bytes(os.urandom(100 + i * 37))
    return root


def journaled(root):
    return list(Path(root).rglob(".sluice-part.*.j"))


def test_held_pushes_add_no_thread_per_stream(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    (served / "page.txt").write_text("still served\n")
    srcs = [tree(tmp_path / f"src{i}" / f"host{i}", 20 + i, 48 << 20) for i in range(4)]
    s = Server(served, "--port", "0", "--allow-upload", "--threads", "1", "-v")
    url = s.sluice_base + f"?token={TOKEN}"
    procs = []
    try:
        # Warm: a push end to end, so every thread the server makes at all is made.
        warm = tree(tmp_path / "warm" / "w", 1, 1 << 20)
        r = run_sluice("send", warm, url, "--streams", "8", timeout=300)
        assert r.returncode == 0, r.stderr
        assert wait_for(lambda: stats(s)["pushes_open"] == 0, 60)
        base = threads(s)
        # Four pushes of eight streams, slow enough (2 MB/s each) to be held mid-transfer while
        # the threads are counted: each has verified and journaled a block of its large file.
        procs = [subprocess.Popen([SLUICE, "send", str(p), url, "--streams", "8", "--block-size", "256K", "--rate-limit", "2M"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for p in srcs]
        assert wait_for(lambda: stats(s)["pushes_open"] == 4, 120), stats(s)
        assert wait_for(lambda: all(journaled(served / f"host{i}") for i in range(4)), 120), stats(s)
        # Every stream joined (a binary without the count, as main's before h15p: at once).
        assert wait_for(lambda: stats(s).get("push_streams_ring", -1) in (-1, 8 + 4 * 8), 120), stats(s)
        held = threads(s)
        print("threads: base", base, "with 4 pushes of 8 streams held", held)
        # Before h15p each push held 2 + 8 threads (sluice recv's engine); now its 2 alone.
        assert held <= base + 2 * 4, (held, base)
        assert stats(s)["push_streams_ring"] == 8 + 4 * 8
        # The ring still serves others meanwhile.
        assert urllib.request.urlopen(s.url("/page.txt"), timeout=60).read() == b"still served\n"
        for p in procs:
            kill_process(p)
        procs = []
        assert wait_for(lambda: stats(s)["pushes_open"] == 0, 120), stats(s)
        assert threads(s) <= base
        rc, _, err = s.stop()
        assert rc == 0, err
        assert "8 data streams on the ring (hosted)" in err, err
    finally:
        for p in procs:
            kill_process(p)
        s.kill()


def test_an_encrypted_push_on_the_ring(tmp_path):
    # A file size off a page: O_DIRECT writes whole pages only, the last one padded and the
    # file cut to its size when finished.
    src = tree(tmp_path / "src" / "enc", 3, (20 << 20) + 12345)
    served = tmp_path / "served"
    served.mkdir()
    s = Server(served, "--port", "0", "--allow-upload", "-v")
    try:
        r = run_sluice("send", src, s.sluice_base + f"?token={TOKEN}", "--encrypt", "--streams", "3", "--block-size", "1M",
                       "--json", timeout=300)
        assert r.returncode == 0, r.stderr
        assert tree_digest(served / "enc") == tree_digest(src)
        assert leftovers(served) == []
        st = stats(s)
        assert st["pushes_done"] == 1 and st["push_streams_ring"] == 3, st
        rc, _, err = s.stop()
        assert rc == 0, err
        assert "3 data streams on the ring (tls_hosted)" in err, err
        assert "slower path" not in err, err  # O_DIRECT on this file system
    finally:
        s.kill()


def test_a_server_stopped_during_a_push_ends_it(tmp_path):
    src = tree(tmp_path / "src" / "h", 4, 48 << 20)
    served = tmp_path / "served"
    served.mkdir()
    s = Server(served, "--port", "0", "--allow-upload", "-v")
    tx = subprocess.Popen([SLUICE, "send", str(src), s.sluice_base + f"?token={TOKEN}", "--streams", "4", "--block-size", "1M",
                           "--rate-limit", "4M"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: journaled(served), 120), stats(s)
        rc, _, err = s.stop(timeout=120)  # the drain ends the push: the server does not hang on its streams
        assert rc == 0, err
        assert "push from 127.0.0.1: failed" in err, err
        _, terr = tx.communicate(timeout=120)
        assert tx.returncode != 0, terr
        # Nothing incomplete under its final name; what was verified stays journaled for a resume.
        assert not (served / "h" / "big.bin").exists()
        assert journaled(served)
    finally:
        kill_process(tx)
        s.kill()


@pytest.fixture(scope="module")
def block_server(tmp_path_factory):
    served = tmp_path_factory.mktemp("blocks")
    s = Server(served, "--port", "0", "--allow-upload", "--threads", "1")
    yield s, served
    s.kill()


@pytest.mark.parametrize("name", sorted(hb.SCENARIOS))
def test_blocks_off_page_edges_pushed_are_written_exactly(block_server, name):
    s, served = block_server
    for old in served.iterdir():
        old.unlink()
    sizes, blocks, streams = hb.SCENARIOS[name]
    rng = random.Random(name)
    files = [rng.randbytes(size) for size in sizes]
    port = int(s.sluice_base.rsplit(":", 1)[1].rstrip("/"))
    req = socket.create_connection(("127.0.0.1", port), timeout=60)
    hello = w.read_get_frame(req, w.GET_HELLO)
    nonce, rtok = os.urandom(16), os.urandom(16).hex()
    req.sendall(w.push_request(TOKEN, hello[-16:], streams, nonce, rtok))
    assert w.read_get_frame(req, w.GET_REPLY)[0] == 0
    token = w.push_transfer_token(TOKEN, nonce, rtok)

    def connect(role, index, count, tid):
        c = socket.create_connection(("127.0.0.1", port), timeout=120)
        w.read_get_frame(c, w.GET_HELLO)
        c.sendall(w.get_attach(nonce))
        return c, w.sender_hello(c, token, role, index, count, tid)

    try:
        assert hb.transfer(None, files, blocks, streams, served if "in-turn" in name else None, connect) == 0
    finally:
        req.close()
    hb.assert_written(served, files, f"{name}, pushed")
