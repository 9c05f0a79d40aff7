"""Encrypted get sessions on the get ring, and requests read by the ring (issue 15, h15i).

A client whose receiver encrypts (every one not on loopback; `sluice get --encrypt` on
loopback) is served by the ring: the TLS 1.3 handshake stepped on its sockets, records sealed
on the checksum pool. A client in another network namespace gets the right bytes that way,
and /_stats and -v say which path ran. A hostile TLS peer (garbage, a stalled handshake, a
tampered record) fails alone while others are served, and its fds go. Every request and
attach is read by the ring: connections that say nothing hold no thread, and --max-gets N
admits N clients at once."""
import hashlib
import hmac
import json
import os
import re
import select
import shutil
import socket
import struct
import subprocess
import urllib.request
from pathlib import Path

import pytest

import sluice_wire as w
from conftest import SLUICE, file_hash, make_cold, run_sluice, wait_for, write_random
from corrupting_proxy import CorruptingProxy
from serve_client import Server
from test_serve_get_ring import fds, get_done, settled_fds, start, stats, threads

NETNS = Path(__file__).resolve().parents[2] / "bench" / "testbed" / "netns.sh"


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "www"
    (r / "tree").mkdir(parents=True)
    write_random(r / "big.bin", 5 * (1 << 20) + 4321, 7)  # five 1 MiB sealed blocks and a short one
    (r / "one").write_bytes(b"x")
    (r / "tree" / "a").write_bytes(os.urandom(3000))
    return r


def get(s, path, dest, *args):
    # A --public server asks no token, and a client given one refuses such a server (h18p).
    return run_sluice("get", s.sluice_base + path + ("" if s.public else "?token=testtoken"), dest, "--json", *args)


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


def tls_hellos(links, rtoken="receiver-token-1"):
    """The receiver's side of the sluice hello with the encryption bit, on every link; the
    control connection's ClientHello comes first (data streams wait for its handshake).
    Returns the control connection, its ClientHello answered with ServerAuth ok."""
    nonces = {}
    for c in links:
        nonces[c] = os.urandom(16)
        c.sendall(w.MAGIC + struct.pack("<HHI", w.VERSION, w.FEATURE_ENCRYPTION, 0) + nonces[c])
    ready, _, _ = select.select(links, [], [], 60)
    assert ready, "no ClientHello within 60 s"
    c = ready[0]
    hello = w.recv_exact(c, 80)
    role, _, index = struct.unpack_from("<BBH", hello, 10)
    assert role == 0 and index == 0
    mac = hmac.new(rtoken.encode(), b"sluice-v1 server auth" + hello[32:48] + nonces[c], hashlib.sha256).digest()
    c.sendall(bytes(8) + mac)
    return c


def hostile_garbage_handshake(links):
    c = tls_hellos(links)
    assert w.recv_exact(c, 1) == b"\x16"  # the server's TLS ClientHello (a handshake record)
    c.sendall(b"GARBAGE!" * 25)


def hostile_stalled_handshake(links):
    c = tls_hellos(links)
    assert w.recv_exact(c, 1) == b"\x16"  # and never answered


@pytest.mark.parametrize("play,words", [
    (hostile_garbage_handshake, "TLS handshake with the client's receiver (control connection) failed"),
    (hostile_stalled_handshake, "no progress for 2 s"),
])
def test_a_hostile_tls_peer_fails_alone_and_its_fds_go(root, tmp_path, play, words):
    s = Server(root, "--port", "0", "--send-timeout", "2", "-v", public=True)
    try:
        base_fds, base_threads = settled_fds(s, tmp_path), threads(s)
        req, links = start(s, "big.bin", 2)
        play(links)
        r = get(s, "big.bin", tmp_path, "--encrypt")  # served meanwhile, encrypted, on the ring
        assert r.returncode == 0, r.stderr
        assert file_hash(tmp_path / "big.bin") == file_hash(root / "big.bin")
        assert threads(s) <= base_threads, (threads(s), base_threads)
        status, msg = get_done(req)
        assert status > 0 and words in msg, (status, msg)
        for c in [req] + links:
            c.close()
        assert wait_for(lambda: fds(s) <= base_fds, 30), (fds(s), base_fds)
        st = stats(s)
        assert st["get_sessions_failed"] == 1 and st["get_sessions_ring"] == 3, st
        assert st["get_sessions_ring_encrypted"] == 2 and st["get_sessions_thread"] == 0, st
    finally:
        s.kill()


def test_a_tampered_record_fails_that_get_only(root, tmp_path):
    s = Server(root, "--port", "0", "-v")
    proxy = CorruptingProxy(int(s.sluice_base.rstrip("/").rsplit(":", 1)[1]), at=300_000, from_upstream=True)
    try:
        d = tmp_path / "bad"
        d.mkdir()
        r = run_sluice("get", f"sluice://127.0.0.1:{proxy.port}/big.bin?token=testtoken", d, "--encrypt", "--streams", "1")
        assert proxy.flipped
        assert r.returncode == 8, r.stderr  # integrity: the record's tag
        assert not (d / "big.bin").exists()
        assert wait_for(lambda: stats(s)["get_sessions_failed"] == 1 and stats(s)["get_sessions_open"] == 0, 60), stats(s)
        r = get(s, "big.bin", tmp_path, "--encrypt")
        assert r.returncode == 0, r.stderr
        assert file_hash(tmp_path / "big.bin") == file_hash(root / "big.bin")
        st = stats(s)
        assert st["get_sessions_ring_encrypted"] == 2, st
    finally:
        proxy.close()
        s.kill()


def test_encrypt_on_loopback_the_ring_seals_a_file_and_a_tree(root, tmp_path):
    s = Server(root, "--port", "0", "-v")
    try:
        for i, streams in enumerate([1, 3]):  # resend and uneven stream shares alike
            d = tmp_path / f"in{i}"
            d.mkdir()
            r = get(s, "big.bin", d, "--encrypt", "--streams", str(streams))
            assert r.returncode == 0, r.stderr
            assert last_json(r.stdout)["encryption"].startswith("tls13"), r.stdout
            assert file_hash(d / "big.bin") == file_hash(root / "big.bin")
        r = get(s, "tree", tmp_path, "--encrypt")  # a tree on the ring, sealed as the request says
        assert r.returncode == 0, r.stderr
        assert last_json(r.stdout)["encryption"].startswith("tls13")
        assert (tmp_path / "tree" / "a").read_bytes() == (root / "tree" / "a").read_bytes()
        r = get(s, "one", tmp_path)  # loopback, clear: the ring in clear
        assert r.returncode == 0 and last_json(r.stdout)["encryption"] == "off", r.stderr
        st = stats(s)
        assert st["get_sessions_ring"] == 4 and st["get_sessions_ring_encrypted"] == 3 and st["get_sessions_thread"] == 0, st
        assert st["get_sessions_ring_tree"] == 1, st
        assert "encrypted as the client's receiver asks" in st["get_path"]
        assert st["get_path"].startswith("2 get rings"), st["get_path"]  # Server(): --threads 2
        _, _, err = s.stop()
        assert len(re.findall(r"\(on the get ring, encrypted: TLS 1\.3; blocks sealed on the ring \d+, on the pool "
                              r"\(not in the page cache\) \d+; of these, in the cache but still being read \d+\): sent", err)) == 2, err
        assert re.search(r"get 'tree' by 127\.0\.0\.1 \(on the get ring, a tree of 2 entries, encrypted: TLS 1\.3; .*\): sent", err), err
    finally:
        s.kill()


def test_a_cold_file_is_sealed_on_the_pool_and_arrives_whole(root, tmp_path):
    """Blocks in the page cache are sealed on the ring; a file dropped from the cache is read,
    hashed and sealed on the pool instead (the ring never waits for the disk)."""
    s = Server(root, "--port", "0", "-v", public=True)
    try:
        path = root / "big.bin"
        make_cold(path)
        r = get(s, "big.bin", tmp_path, "--encrypt", "--streams", "2")
        assert r.returncode == 0, r.stderr
        assert last_json(r.stdout)["encryption"].startswith("tls13")
        assert file_hash(tmp_path / "big.bin") == file_hash(path)
        assert stats(s)["get_sessions_ring_encrypted"] == 1
        _, _, err = s.stop()
        pooled = re.search(r"on the pool \(not in the page cache\) (\d+); of these, in the cache but still being read \d+\): sent", err)
        assert pooled and int(pooled.group(1)) >= 1, err
    finally:
        s.kill()


def test_cold_gets_of_several_clients_at_once_are_read_by_several_pool_threads(root, tmp_path):
    """Several encrypted clients of one cold file, 4 streams each: the ring's pool has more than
    one block read in flight (4 threads per ring, h15n), and every client's copy is whole.
    Which blocks a thread takes, and whether the pool or the ring seals each, is the
    scheduler's: the assertions are the bytes, the pool's size and that it sealed something."""
    path = root / "cold.bin"
    write_random(path, 12 * (1 << 20) + 777, 11)  # twelve 1 MiB sealed blocks and a short one
    s = Server(root, "--port", "0", "-v", public=True)
    try:
        st = stats(s)
        assert "4 pool threads per ring" in st["get_path"], st["get_path"]
        assert threads(s) >= 2 * 4 + 2, threads(s)  # Server(): --threads 2, each ring with its pool
        make_cold(path)
        dests = [tmp_path / f"in{i}" for i in range(3)]
        procs = []
        for d in dests:
            d.mkdir()
            procs.append(subprocess.Popen([SLUICE, "get", s.sluice_base + "cold.bin" + ("" if s.public else "?token=testtoken"), str(d), "--json",
                                           "--encrypt", "--streams", "4"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
        try:
            outs = [p.communicate(timeout=120) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        for p, (out, err) in zip(procs, outs):
            assert p.returncode == 0, err
            assert last_json(out)["encryption"].startswith("tls13"), out
        want = file_hash(path)
        assert all(file_hash(d / "cold.bin") == want for d in dests)
        _, _, err = s.stop()
        pooled = [int(n) for n in re.findall(r"on the pool \(not in the page cache\) (\d+); of these", err)]
        assert len(pooled) == 3 and sum(pooled) >= 1, err
    finally:
        s.kill()


def test_max_gets_n_admits_n_clients_at_once(root, tmp_path):
    """Attached connections hold no session slot (each held one while a thread handed it
    over, so N clients at once could be told busy)."""
    s = Server(root, "--port", "0", "--max-gets", "3", public=True)
    try:
        held = [start(s, "big.bin", 4, rtoken=f"rt{i}") for i in range(3)]  # each reply ok, 15 attaches
        port = int(s.sluice_base.rstrip("/").rsplit(":", 1)[1])
        extra = socket.create_connection(("127.0.0.1", port), timeout=60)
        w.read_get_frame(extra, w.GET_HELLO)
        extra.sendall(w.get_request(1, "one", os.urandom(16), "rt9"))
        assert w.read_get_frame(extra, w.GET_REPLY)[0] == 3  # busy: the three are sending
        for req, links in held:
            for c in [req] + links:
                c.close()
        extra.close()
        assert wait_for(lambda: stats(s)["get_sessions_open"] == 0, 60), stats(s)
        jobs = []
        for i in range(3):  # three real clients at once, 5 connections each: none is told busy
            d = tmp_path / f"in{i}"
            d.mkdir()
            jobs.append((subprocess.Popen([SLUICE, "get", s.sluice_base + "big.bin", str(d), "--streams", "4"],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), d))
        for p, d in jobs:
            _, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
            assert file_hash(d / "big.bin") == file_hash(root / "big.bin")
    finally:
        s.kill()


def test_silent_connections_hold_no_thread_and_go_at_the_request_deadline(root, tmp_path):
    s = Server(root, "--port", "0", "--request-timeout", "1", public=True)
    try:
        base_fds, base_threads = settled_fds(s, tmp_path), threads(s)
        port = int(s.sluice_base.rstrip("/").rsplit(":", 1)[1])
        silent = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(40)]
        for c in silent:
            w.read_get_frame(c, w.GET_HELLO)
        assert threads(s) <= base_threads, (threads(s), base_threads)
        r = get(s, "big.bin", tmp_path)  # others are served meanwhile
        assert r.returncode == 0, r.stderr
        for c in silent:  # each closed at its deadline, without a word
            c.settimeout(60)
            assert c.recv(1) == b""
            c.close()
        assert wait_for(lambda: fds(s) <= base_fds, 30), (fds(s), base_fds)
        assert stats(s)["get_sessions"] == 2  # a connection that never asked is no session
    finally:
        s.kill()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"), reason="needs root and iproute2 for namespaces")
def test_clients_in_another_namespace_are_served_by_the_ring_encrypted(root, tmp_path):
    tag = f"{os.getpid() % 10000}"
    env = dict(os.environ, SB_NS_SND=f"sl15c{tag}", SB_NS_RCV=f"sl15s{tag}", SB_IP_SND="10.215.9.1", SB_IP_RCV="10.215.9.2")
    env.pop("SLUICE_TOKEN", None)
    subprocess.run([str(NETNS), "up"], env=env, check=True, capture_output=True)
    server = None
    try:
        server = subprocess.Popen([str(NETNS), "exec", "rcv", SLUICE, "serve", str(root), "--bind", "10.215.9.2", "--port", "0",
                                   "--http", "0", "--token", "tok", "--threads", "2", "-v"],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        http = server.stdout.readline().strip().split("?")[0]
        base = server.stdout.readline().strip().split("?")[0]
        assert base.startswith("sluice://10.215.9.2:"), server.stderr.read()
        jobs = []
        for i, path in enumerate(["big.bin", "big.bin", "big.bin", "tree"]):
            d = tmp_path / f"in{i}"
            d.mkdir()
            jobs.append((subprocess.Popen([str(NETNS), "exec", "snd", SLUICE, "get", base + path + "?token=tok", str(d),
                                           "--json", "--streams", str(1 + i)], env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True), d, path))
        for p, d, path in jobs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
            assert last_json(out)["encryption"].startswith("tls13"), out
        for _, d, path in jobs[:3]:
            assert file_hash(d / path) == file_hash(root / path)
        assert (jobs[3][1] / "tree" / "a").read_bytes() == (root / "tree" / "a").read_bytes()
        st = json.loads(subprocess.run([str(NETNS), "exec", "snd", "python3", "-c",
                                        f"import urllib.request; print(urllib.request.urlopen('{http}_stats?token=tok', timeout=60).read().decode())"],
                                       env=env, capture_output=True, text=True, check=True, timeout=120).stdout)
        assert st["get_sessions_ring"] == 4 and st["get_sessions_ring_encrypted"] == 4, st
        assert st["get_sessions_thread"] == 0 and st["get_sessions_failed"] == 0, st
        server.terminate()
        _, err = server.communicate(timeout=60)
        assert len(re.findall(r"by 10\.215\.9\.1 \(on the get ring, encrypted: TLS 1\.3; blocks sealed on the ring \d+, "
                              r"on the pool \(not in the page cache\) \d+; of these, in the cache but still being read \d+\): sent", err)) == 3, err
    finally:
        if server and server.poll() is None:
            server.kill()
            server.wait()
        subprocess.run([str(NETNS), "down"], env=env, capture_output=True)
