"""Pushes into `sluice serve DIR --port P --allow-upload` (issue 15, h15s): `sluice send` stores
files and trees under DIR with the guarantees of `sluice recv DIR` (checksums, temporary names,
resume, N streams, confinement); refusals are clear and write nothing; several pushes at once
beside a get and HTTP; a stalling or garbage pusher is closed by its deadline while the others
complete. No timed assertions: every wait_for is a hang guard."""
import json
import os
import signal
import socket
import subprocess
import threading
import urllib.request
from pathlib import Path

from conftest import SLUICE, file_hash, kill_process, leftovers, run_sluice, tree_digest, wait_for, write_random
from serve_client import Server
import sluice_wire as w

TOKEN = "testtoken"


def odd_tree(root, seed, small=150, big=24 << 20):
    """Many small files, a large one (several 8 MiB blocks), odd names, a link that stays inside."""
    (root / "sub dir" / "ünïcode").mkdir(parents=True)
    write_random(root / "big.bin", big, seed)
    for i in range(small):
        d = [root / "sub dir", root / "sub dir" / "ünïcode", root][i % 3]
        (d / f"f{i:03d} #%&'.txt").write_bytes(os.urandom((i * 131 + seed) % 5000))
    (root / "-leading dash").write_bytes(b"x" * 10)
    (root / "empty").write_bytes(b"")
    os.chmod(root / "f002 #%&'.txt", 0o600)
    os.utime(root / "f005 #%&'.txt", ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))
    os.symlink("big.bin", root / "link-inside")
    return root


def push(server, *paths, token=TOKEN, args=(), timeout=300):
    url = server.sluice_base + (f"?token={token}" if token else "")
    return run_sluice("send", *map(str, paths), url, "--json", *args, timeout=timeout)


def stats(server):
    return json.loads(urllib.request.urlopen(server.url("/_stats"), timeout=30).read())


def journaled(root):
    return list(Path(root).rglob(".sluice-part.*.j"))


def raw_push(port, streams=1):
    """A hand-written pusher: PUSH_REQUEST (answered ok), then its control connection attached
    and through the handshake with the derived token. Returns (request socket, control socket)."""
    req = socket.create_connection(("127.0.0.1", port), timeout=60)
    hello = w.read_get_frame(req, w.GET_HELLO)
    assert int.from_bytes(hello[10:12], "little") & w.FEATURE_GET_PUSH
    nonce, rtok = os.urandom(16), os.urandom(16).hex()
    req.sendall(w.push_request(TOKEN, hello[-16:], streams, nonce, rtok))
    assert w.read_get_frame(req, w.GET_REPLY)[0] == 0
    c = socket.create_connection(("127.0.0.1", port), timeout=60)
    w.read_get_frame(c, w.GET_HELLO)
    c.sendall(w.get_attach(nonce))
    assert w.sender_hello(c, w.push_transfer_token(TOKEN, nonce, rtok), 0, 0, streams, os.urandom(16)) == 0
    return req, c


def test_push_a_tree_and_a_file(tmp_path):
    src = odd_tree(tmp_path / "src" / "host1", 1)
    single = tmp_path / "single.bin"
    write_random(single, 3 << 20, 2)
    served = tmp_path / "served"
    served.mkdir()
    s = Server(served, "--port", "0", "--allow-upload", "-v")
    try:
        r = push(s, src, single, args=("--streams", "3"))
        assert r.returncode == 0, r.stderr
        assert tree_digest(served / "host1") == tree_digest(src)
        assert file_hash(served / "single.bin") == file_hash(single)
        assert leftovers(served) == []
        sent = json.loads(r.stdout.splitlines()[-1])
        assert sent["streams"] == 3
        st = stats(s)
        assert st["pushes"] == 1 and st["pushes_done"] == 1 and st["pushes_open"] == 0 and st["pushes_failed"] == 0
        assert st["push_bytes"] == sent["bytes"]
        assert "data streams received on the ring" in st["push_path"]
        assert st["push_streams_ring"] == 3  # every data stream on a ring, none on a thread of its own
        # What was pushed is served at once, over HTTP and to sluice get.
        body = urllib.request.urlopen(s.url("/single.bin"), timeout=30).read()
        assert body == single.read_bytes()
        # The same push again: everything is in place already (recv's quick check), nothing sent.
        again = push(s, src, single)
        assert again.returncode == 0, again.stderr
        a = json.loads(again.stdout.splitlines()[-1])
        assert a["bytes_sent"] == 0 and a["bytes_skipped"] == a["bytes"]
        rc, _, err = s.stop()
        assert rc == 0, err
        assert "push from 127.0.0.1: stored" in err
        assert "3 data streams on the ring (hosted)" in err, err
    finally:
        s.kill()


def test_pushes_share_one_manifest_budget(tmp_path):
    """--max-pushes receivers at once split the quarter of memory one `sluice recv` may hold for
    its manifest (else N hostile pushers with huge manifests could each take all of it)."""
    import re

    def budget_mib(max_pushes):
        served = tmp_path / f"served{max_pushes}"
        served.mkdir()
        s = Server(served, "--port", "0", "--allow-upload", "--max-pushes", str(max_pushes))
        try:
            m = re.search(r"manifest held to (\d+) MiB", stats(s)["push_path"])
            assert m, stats(s)["push_path"]
            return int(m.group(1))
        finally:
            s.kill()

    alone, shared = budget_mib(1), budget_mib(64)
    assert alone >= 256
    assert shared < alone
    assert abs(shared - max(alone // 64, 64)) <= 1


def test_refused_without_upload_or_token_and_nothing_written(tmp_path):
    src = odd_tree(tmp_path / "src" / "host1", 3, small=10, big=1 << 20)
    served = tmp_path / "served"
    served.mkdir()
    s = Server(served, "--port", "0")  # no --allow-upload
    try:
        r = push(s, src)
        assert r.returncode != 0
        assert f"127.0.0.1:{s.sluice_base.rsplit(':', 1)[1].rstrip('/')}" in r.stderr
        assert "does not take pushes" in r.stderr and "--allow-upload" in r.stderr
        assert stats(s)["pushes_refused"] == 1
    finally:
        s.kill()
    assert os.listdir(served) == []

    for public in (False, True):
        s = Server(served, "--port", "0", "--allow-upload", public=public)
        try:
            r = push(s, src, token="wrong")
            assert r.returncode == 3 and "wrong token" in r.stderr, r.stderr
            r = push(s, src, token=None)
            assert r.returncode != 0 and "token" in r.stderr
            assert os.listdir(served) == []
            if public:  # --public opens reads only: with the token, a push is taken
                r = push(s, src)
                assert r.returncode == 0, r.stderr
                assert tree_digest(served / "host1") == tree_digest(src)
        finally:
            s.kill()


def test_confined_a_symlink_in_dir_and_dotdot(tmp_path):
    src = odd_tree(tmp_path / "src" / "host1", 4, small=10, big=1 << 20)
    outside = tmp_path / "outside"
    outside.mkdir()
    served = tmp_path / "served"
    served.mkdir()
    os.symlink(outside, served / "host1")  # a symlink in DIR where the pushed tree goes
    os.symlink(outside / "target.txt", served / "f002 #%&'.txt")  # and where a pushed file goes
    s = Server(served, "--port", "0", "--allow-upload")
    try:
        # Never followed: recv's rules replace a symlink standing where a directory or a file of
        # the transfer goes (as rsync does), and write nothing through it.
        r = push(s, src)
        assert r.returncode == 0, r.stderr
        assert not (served / "host1").is_symlink() and tree_digest(served / "host1") == tree_digest(src)
        r = push(s, src / "f002 #%&'.txt")
        assert r.returncode == 0, r.stderr
        assert not (served / "f002 #%&'.txt").is_symlink()
        assert file_hash(served / "f002 #%&'.txt") == file_hash(src / "f002 #%&'.txt")
        assert os.listdir(outside) == []
        assert leftovers(served) == []

        # A sender naming '..' (the real sender never does: a raw one here) is refused by the
        # receiver's path check before anything is made.
        port = int(s.sluice_base.rsplit(":", 1)[1].rstrip("/"))
        req, c = raw_push(port)
        c.sendall(w.manifest(0, [(0, 1, "../escape.txt", 5, "")]))
        ftype, payload = w.read_frame(c)
        assert ftype == w.ABORT and b"escape.txt" in payload, (hex(ftype), payload)
        c.close()
        req.close()
        assert not (tmp_path / "escape.txt").exists()
        assert wait_for(lambda: stats(s)["pushes_failed"] == 1 and stats(s)["pushes_open"] == 0, 60)
    finally:
        s.kill()
    assert os.listdir(outside) == []


def test_interrupted_push_resumes(tmp_path):
    src = odd_tree(tmp_path / "src" / "host1", 5, small=100, big=48 << 20)
    served = tmp_path / "served"
    served.mkdir()
    s = Server(served, "--port", "0", "--allow-upload")
    url = s.sluice_base + f"?token={TOKEN}"
    args = [SLUICE, "send", str(src), url, "--block-size", "1M", "--streams", "4"]
    tx = subprocess.Popen(args + ["--rate-limit", "12M"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: len(journaled(served)) > 0, 60), "no partial file was journaled"
        tx.send_signal(signal.SIGKILL)
        tx.communicate(timeout=60)
        assert wait_for(lambda: stats(s)["pushes_failed"] == 1 and stats(s)["pushes_open"] == 0, 120)
        assert not (served / "host1" / "big.bin").exists() or (served / "host1" / "big.bin").stat().st_size == 48 << 20
        again = subprocess.run(args + ["--json"], capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        a = json.loads(again.stdout.splitlines()[-1])
        assert a["bytes_skipped"] > 0 and a["bytes_sent"] + a["bytes_skipped"] == a["bytes"]
        assert tree_digest(served / "host1") == tree_digest(src)
        assert leftovers(served) == [] and journaled(served) == []
    finally:
        kill_process(tx)
        s.kill()


def test_concurrent_pushes_beside_a_get_and_http(tmp_path):
    served = tmp_path / "served"
    (served / "pub").mkdir(parents=True)
    write_random(served / "pub" / "big.bin", 20 << 20, 9)
    srcs = [odd_tree(tmp_path / f"src{i}" / f"host{i}", 10 + i, small=60, big=12 << 20) for i in range(3)]
    s = Server(served, "--port", "0", "--allow-upload", "--threads", "2")
    url = s.sluice_base + f"?token={TOKEN}"
    dest = tmp_path / "got"
    dest.mkdir()
    procs = [subprocess.Popen([SLUICE, "send", str(p), url, "--streams", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for p in srcs]
    procs.append(subprocess.Popen([SLUICE, "get", s.sluice_base + f"pub/big.bin?token={TOKEN}", str(dest)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    got = {}
    http = threading.Thread(target=lambda: got.update(body=urllib.request.urlopen(s.url("/pub/big.bin"), timeout=120).read()))
    http.start()
    try:
        for p in procs:
            _, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
        http.join(timeout=300)
        assert got["body"] == (served / "pub" / "big.bin").read_bytes()
        assert file_hash(dest / "big.bin") == file_hash(served / "pub" / "big.bin")
        for i, p in enumerate(srcs):
            assert tree_digest(served / f"host{i}") == tree_digest(p)
        st = stats(s)
        assert st["pushes_done"] == 3 and st["pushes_open"] == 0
        assert leftovers(served) == []
    finally:
        for p in procs:
            kill_process(p)
        s.kill()


def test_busy_and_hostile_pushers_closed_by_their_deadlines(tmp_path):
    src = odd_tree(tmp_path / "src" / "host1", 6, small=20, big=2 << 20)
    served = tmp_path / "served"
    served.mkdir()
    (served / "page.txt").write_text("still served\n")
    s = Server(served, "--port", "0", "--allow-upload", "--max-pushes", "1", "--request-timeout", "2",
               "--send-timeout", "3", "-v")
    port = int(s.sluice_base.rsplit(":", 1)[1].rstrip("/"))
    try:
        # Garbage where a request belongs: answered (refused) or closed, never held.
        g = socket.create_connection(("127.0.0.1", port), timeout=60)
        w.read_get_frame(g, w.GET_HELLO)
        g.sendall(os.urandom(64))
        assert _ends(g)
        # A hello read, then silence: closed by the request deadline; meanwhile a real push and
        # HTTP are served.
        q = socket.create_connection(("127.0.0.1", port), timeout=60)
        w.read_get_frame(q, w.GET_HELLO)
        r = push(s, src)
        assert r.returncode == 0, r.stderr
        assert tree_digest(served / "host1") == tree_digest(src)
        assert urllib.request.urlopen(s.url("/page.txt"), timeout=30).read() == b"still served\n"
        assert _ends(q)

        # A pusher that is admitted and then attaches nothing holds the only place until its
        # control connection's deadline: meanwhile a real push is refused as busy, at once.
        req = socket.create_connection(("127.0.0.1", port), timeout=60)
        hello = w.read_get_frame(req, w.GET_HELLO)
        assert int.from_bytes(hello[10:12], "little") & w.FEATURE_GET_PUSH
        nonce, rtok = os.urandom(16), "s" * 32
        req.sendall(w.push_request(TOKEN, hello[-16:], 2, nonce, rtok))
        assert w.read_get_frame(req, w.GET_REPLY)[0] == 0
        r = push(s, src)
        assert r.returncode != 0 and "busy" in r.stderr and "--max-pushes" in r.stderr, r.stderr
        assert urllib.request.urlopen(s.url("/page.txt"), timeout=30).read() == b"still served\n"
        assert wait_for(lambda: stats(s)["pushes_open"] == 0 and stats(s)["pushes_failed"] == 1, 120)
        req.close()

        # Admitted, its control connection through the handshake, then silent: the receiver's
        # idle deadline (--send-timeout) ends it.
        req, c = raw_push(port)
        assert wait_for(lambda: stats(s)["pushes_failed"] == 2 and stats(s)["pushes_open"] == 0, 120)
        assert _ends(c)

        # The place is free again: a real push goes through (everything in place: nothing sent).
        r = push(s, src)
        assert r.returncode == 0, r.stderr
        assert tree_digest(served / "host1") == tree_digest(src)
        rc, _, err = s.stop()
        assert rc == 0, err
        assert "did not join within the deadline" in err
    finally:
        s.kill()


def _ends(sock):
    """True once the server has closed (or reset) the connection; frames before are read."""
    try:
        while sock.recv(1 << 16):
            pass
        return True
    except ConnectionResetError:
        return True
