"""`sluice get` from `sluice serve --port` (issue 15): files and trees over sluice's protocol
with several streams, checksums and resume; refusals with the right status; nothing outside
the served directory."""
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import SLUICE, file_hash, journaled, kill_process, leftovers, run_sluice, wait_for, write_random
from serve_client import Server


def files_digest(root):
    """Regular files only (get sends no symlinks, specials or empty directories)."""
    out = {}
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            p = Path(dirpath) / name
            if p.is_symlink() or name.startswith(".sluice-part."):
                continue
            st = p.stat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mode & 0o777, st.st_mtime_ns, file_hash(p))
    return out


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "www"
    (r / "data" / "deep" / "er").mkdir(parents=True)
    write_random(r / "data" / "big.bin", 20 << 20, 3)  # several 8 MiB blocks
    write_random(r / "data" / "deep" / "er" / "mid.bin", 300_000, 4)
    for i in range(40):
        (r / "data" / f"small{i:02d}").write_bytes(os.urandom(i * 97))
    os.chmod(r / "data" / "small07", 0o600)
    os.utime(r / "data" / "small08", ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))
    (r / "top.txt").write_text("top\n")
    outside = tmp_path / "secret.txt"
    outside.write_text("not served\n")
    os.symlink(outside, r / "data" / "escape")  # in a tree: left out, never followed
    os.symlink(tmp_path, r / "up")              # as a path: refused
    return r


@pytest.fixture
def server(root):
    s = Server(root, "--port", "0")
    yield s
    s.kill()


def get(server, path, dest, *args, token="testtoken"):
    url = server.sluice_base + path.lstrip("/") + (f"?token={token}" if token else "")
    return run_sluice("get", url, dest, "--json", *args)


def test_get_a_file_a_tree_and_everything(server, root, tmp_path):
    dest = tmp_path / "in"
    dest.mkdir()
    r = get(server, "/data/big.bin", dest, "--streams", "4")
    assert r.returncode == 0, r.stderr
    assert file_hash(dest / "big.bin") == file_hash(root / "data" / "big.bin")
    s = json.loads(r.stdout.splitlines()[-1])
    assert s["bytes"] == 20 << 20 and s["files"] == 1 and s["streams"] == 4

    r = get(server, "/data", dest, "--streams", "3")
    assert r.returncode == 0, r.stderr
    want = files_digest(root / "data")
    assert files_digest(dest / "data") == want and "escape" not in want
    assert not (dest / "data" / "escape").exists()
    assert "1 entries not sent" in r.stderr

    everything = tmp_path / "all"
    everything.mkdir()
    r = get(server, "/", everything)
    assert r.returncode == 0, r.stderr
    assert files_digest(everything) == files_digest(root)
    assert leftovers(dest) == [] and leftovers(everything) == []

    rc, out, err = server.stop()
    assert rc == 0, err


def test_stats_count_get_sessions(root, tmp_path):
    s = Server(root, "--port", "0", "--json")
    try:
        dest = tmp_path / "in"
        dest.mkdir()
        assert get(s, "/top.txt", dest).returncode == 0
        assert get(s, "/nothing", dest).returncode != 0
        import urllib.request

        stats = json.loads(urllib.request.urlopen(s.url("/_stats"), timeout=30).read())
        assert stats["get_sessions"] == 2 and stats["get_sessions_failed"] == 1
        assert stats["get_bytes_sent"] == 4 and stats["get_sessions_open"] == 0
    finally:
        s.kill()


def test_refusals(server, root, tmp_path):
    dest = tmp_path / "in"
    dest.mkdir()
    r = get(server, "/data/big.bin", dest, token="wrong")
    assert r.returncode == 3 and "wrong token" in r.stderr
    r = get(server, "/data/none.bin", dest)
    assert r.returncode == 5 and "'data/none.bin': not found" in r.stderr
    r = get(server, "/up/secret.txt", dest)  # a symlink out of DIR
    assert r.returncode != 0 and "not served" in r.stderr
    r = get(server, "/data/../../secret.txt", dest)
    assert r.returncode == 2 and "remote path" in r.stderr
    r = get(server, "/data/big.bin", dest, token=None)
    assert r.returncode == 2 and "requires a token" in r.stderr
    r = get(server, "/top.txt", tmp_path / "no-such-dir")
    assert r.returncode == 6
    assert os.listdir(dest) == []
    # an HTTP client on the sluice port, and sluice get on the HTTP port: clear errors, no hang
    r = run_sluice("get", f"sluice://127.0.0.1:{server.port}/top.txt?token=testtoken", dest, "--connect-timeout", "2",
                   timeout=60)
    assert r.returncode == 4 and "GET_HELLO" in r.stderr and "--port" in r.stderr
    with __import__("socket").create_connection(("127.0.0.1", int(server.sluice_base.rsplit(":", 1)[1].rstrip("/")))) as c:
        c.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        c.settimeout(30)
        got = b""
        while chunk := c.recv(4096):
            got += chunk
        assert got[0] == 0x60 and got.find(b"\x62") > 0  # GET_HELLO, then GET_REPLY bad_request


def test_public_server_needs_no_token(root, tmp_path):
    s = Server(root, "--port", "0", "--public", token=None)
    try:
        dest = tmp_path / "in"
        dest.mkdir()
        r = get(s, "/top.txt", dest, token=None)
        assert r.returncode == 0, r.stderr
        assert (dest / "top.txt").read_text() == "top\n"
    finally:
        s.kill()


def test_busy_server_says_so(root, tmp_path):
    s = Server(root, "--port", "0", "--max-gets", "1", "--get-rate-limit", "4M")
    try:
        slow = tmp_path / "slow"
        slow.mkdir()
        url = s.sluice_base + "data/big.bin?token=testtoken"
        first = subprocess.Popen([SLUICE, "get", url, str(slow)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert wait_for(lambda: list(slow.glob(".sluice-part.*")), 60), "the first get never started"
            dest = tmp_path / "in"
            dest.mkdir()
            r = get(s, "/top.txt", dest)
            assert r.returncode == 4 and "limit of get sessions" in r.stderr, r.stderr
        finally:
            kill_process(first)
    finally:
        s.kill()


def test_resume_after_the_client_is_killed(root, tmp_path):
    s = Server(root, "--port", "0", "--get-rate-limit", "8M", "-v")
    try:
        dest = tmp_path / "in"
        dest.mkdir()
        url = s.sluice_base + "data/big.bin?token=testtoken"
        first = subprocess.Popen([SLUICE, "get", url, str(dest), "--streams", "2"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        assert wait_for(lambda: journaled(dest), 60), "no verified block was journaled"
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=60)
        assert not (dest / "big.bin").exists()
        r = run_sluice("get", url, dest, "--json", "--streams", "2", timeout=120)
        assert r.returncode == 0, r.stderr
        st = json.loads(r.stdout.splitlines()[-1])
        assert st["bytes_skipped"] > 0 and st["bytes_sent"] + st["bytes_skipped"] == st["bytes"]
        assert file_hash(dest / "big.bin") == file_hash(root / "data" / "big.bin")
        assert leftovers(dest) == []
        # The killed get's failure, as the server logs (and sends in GET_DONE): it names the
        # client by a real address, not "127.0.0.1:0" (the client connected out, listening nowhere).
        _, _, err = s.stop()
        # (The get ring's words since h15r: "by 127.0.0.1 (on the get ring, paced ...): ...".)
        failed = [l for l in err.splitlines() if l.startswith("sluice: get 'data/big.bin' by 127.0.0.1 ") and not l.endswith(": sent")]
        assert failed, err
        assert not re.search(r"127\.0\.0\.1:0\b", err), err
    finally:
        s.kill()
