"""`sluice serve --allow-upload`: PUT and POST of files into DIR (issue 15). Stored under a
temporary name and renamed when the whole body arrived; confined to DIR; bounded in size,
time and count; a client that leaves mid-body leaves nothing; --sync answers once durable."""
import hashlib
import json
import os
import select
import signal
import socket
import subprocess
import time

import pytest

from conftest import write_random
from serve_client import Reader, Server, connect, request

AUTH = "Authorization: Bearer testtoken\r\n"
SHIM = os.environ.get("SLUICE_SLOW_FSYNC_SHIM", "")


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "www"
    (r / "sub").mkdir(parents=True)
    (r / "sub" / "old.txt").write_text("old\n")
    (r / "adir").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("outside\n")
    os.symlink(tmp_path / "outside", r / "out-link")          # a directory link out of DIR
    os.symlink(tmp_path / "outside" / "secret.txt", r / "leaf-link")  # a file link out of DIR
    os.symlink("sub", r / "in-link")                          # a link that stays inside
    return r


@pytest.fixture
def server(root):
    s = Server(root, "--allow-upload", "--max-upload-size", "4M", "--request-timeout", "2")
    yield s
    s.kill()


def curl(*args):
    return subprocess.run(["curl", "-s", "-S", "--path-as-is", *args], capture_output=True, timeout=60)


def curl_status(*args):
    return int(curl("-o", "/dev/null", "-w", "%{http_code}", *args).stdout)


def stats(server):
    return json.loads(curl(server.url("/_stats")).stdout)


def leftovers(tree):
    """Every temporary upload name under tree."""
    return [os.path.join(d, f) for d, _, fs in os.walk(tree) for f in fs if f.startswith(".sluice-upload.")]


def wait_uploads_settled(server, failed_at_least):
    """Until no body is being received and `failed_at_least` uploads were counted as failed
    (bounded: 300 polls of /_stats)."""
    for _ in range(300):
        s = stats(server)
        if s["uploads_open"] == 0 and s["uploads_failed"] >= failed_at_least:
            return s
        time.sleep(0.05)
    raise AssertionError(f"uploads never settled: {s}")


def test_put_and_post_then_get_back_equal_bytes(server, root, tmp_path):
    big = tmp_path / "big.bin"
    write_random(big, 3 << 20, 7)  # > 1 MiB: curl sends Expect: 100-continue first
    r = curl("-i", "-T", str(big), server.url("/new/dir/big.bin"))
    assert r.stdout.startswith(b"HTTP/1.1 100 Continue"), r.stdout[:200]
    assert b"HTTP/1.1 201 Created" in r.stdout
    assert curl(server.url("/new/dir/big.bin")).stdout == big.read_bytes()
    assert (root / "new" / "dir" / "big.bin").read_bytes() == big.read_bytes()
    # POST of a small body, then a PUT that replaces an existing file (200), read back at once
    assert curl_status("-X", "POST", "--data-binary", "first\n", server.url("/sub/p.txt")) == 201
    assert curl(server.url("/sub/old.txt")).stdout == b"old\n"  # now in the open-file cache
    assert curl_status("-X", "PUT", "--data-binary", "new\n", server.url("/sub/old.txt")) == 200
    assert curl(server.url("/sub/old.txt")).stdout == b"new\n"
    assert curl(server.url("/sub/p.txt")).stdout == b"first\n"
    # an empty body is an empty file
    assert curl_status("-X", "PUT", "-H", "Content-Length: 0", server.url("/empty")) == 201
    assert (root / "empty").read_bytes() == b""
    s = stats(server)
    assert s["uploads"] == 4 and s["uploads_open"] == 0 and s["upload_bytes"] == (3 << 20) + 6 + 4
    assert not leftovers(root)


def test_pipelined_put_then_get_on_one_connection(server, root):
    body = os.urandom(10_000)
    with connect(server.port) as s:
        rd = Reader(s)
        put = f"PUT /pipe.bin HTTP/1.1\r\nHost: x\r\n{AUTH}Content-Length: {len(body)}\r\n\r\n".encode()
        s.sendall(put + body + request("/pipe.bin", extra=AUTH))
        status, headers, _ = rd.response()
        assert status == 201 and headers["connection"] == "keep-alive"
        status, _, got = rd.response()
        assert status == 200 and got == body


def test_client_leaving_mid_body_leaves_nothing(server, root):
    for expect in ("", "Expect: 100-continue\r\n"):
        with connect(server.port) as s:
            s.sendall(f"PUT /sub/partial.bin HTTP/1.1\r\nHost: x\r\n{AUTH}{expect}Content-Length: 1000000\r\n\r\n".encode())
            if expect:
                rd = Reader(s)
                while b"\r\n\r\n" not in rd.buf:
                    rd._fill()
                assert rd.buf.startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
            s.sendall(os.urandom(300_000))
        # closed with 700,000 bytes still owed
    wait_uploads_settled(server, 2)
    assert not (root / "sub" / "partial.bin").exists()
    assert not leftovers(root)


def test_a_stalled_body_is_closed_by_its_deadline(server, root):
    with connect(server.port) as s:
        s.sendall(f"PUT /stall.bin HTTP/1.1\r\nHost: x\r\n{AUTH}Content-Length: 1000\r\n\r\n".encode() + b"x" * 10)
        assert Reader(s).closed()  # --request-timeout 2 without a byte: closed, not answered
    wait_uploads_settled(server, 1)
    assert not (root / "stall.bin").exists() and not leftovers(root)


@pytest.mark.parametrize("path,status", [
    ("/../escape.txt", 400), ("/sub/../../escape.txt", 400), ("/%2e%2e/escape.txt", 400),
    ("/out-link/escape.txt", 403),  # a symlinked directory out of DIR
    ("/in-link/x.txt", 403),        # uploads follow no symlink, even one that stays inside
    ("/out-link/new/escape.txt", 403),
    ("/.sluice-upload.1.2.3", 403),  # the temporary names are the server's
    ("/adir", 409),                  # a directory of that name
    ("/sub/", 400),
])
def test_paths_out_of_dir_refused(server, root, tmp_path, path, status):
    before = sorted(os.listdir(tmp_path / "outside"))
    r = curl("-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT", "--data-binary", "evil", server.url(path))
    assert int(r.stdout) == status
    assert sorted(os.listdir(tmp_path / "outside")) == before
    assert (tmp_path / "outside" / "secret.txt").read_text() == "outside\n"
    assert not (tmp_path / "escape.txt").exists() and not (root / "sub" / "x.txt").exists()
    assert not leftovers(tmp_path)


def test_a_symlink_as_the_name_is_replaced_never_followed(server, root, tmp_path):
    assert curl_status("-X", "PUT", "--data-binary", "mine\n", server.url("/leaf-link")) == 200
    assert not os.path.islink(root / "leaf-link") and (root / "leaf-link").read_text() == "mine\n"
    assert (tmp_path / "outside" / "secret.txt").read_text() == "outside\n"


def test_oversize_refused_with_413_before_the_body(server, root):
    with connect(server.port) as s:
        s.sendall(f"PUT /huge.bin HTTP/1.1\r\nHost: x\r\n{AUTH}Expect: 100-continue\r\n"
                  f"Content-Length: {5 << 20}\r\n\r\n".encode())
        rd = Reader(s)
        status, headers, _ = rd.response()  # not 100 Continue: the body is never asked for
        assert status == 413 and headers["connection"] == "close" and rd.closed()
    data = os.urandom((4 << 20) + 1)
    r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT", "--data-binary", "@-",
                        server.url("/huge2.bin")], input=data, capture_output=True, timeout=60)
    assert int(r.stdout) == 413
    assert not (root / "huge.bin").exists() and not (root / "huge2.bin").exists() and not leftovers(root)


def test_lengthless_bodies_get_411(server, root):
    # (chunked bodies are stored: test_serve_chunked.py)
    with connect(server.port) as s:
        s.sendall(f"PUT /n.txt HTTP/1.1\r\nHost: x\r\n{AUTH}\r\n".encode())
        assert Reader(s).response()[0] == 411
    with connect(server.port) as s:
        s.sendall(f"PUT /e.txt HTTP/1.1\r\nHost: x\r\n{AUTH}Expect: magic\r\nContent-Length: 1\r\n\r\n".encode())
        assert Reader(s).response()[0] == 417
    assert not any((root / n).exists() for n in ("n.txt", "e.txt"))


def test_uploads_need_the_token_and_the_option(root, tmp_path):
    s = Server(root, "--allow-upload", "--public")
    try:
        assert curl(s.url("/sub/old.txt", token=False)).stdout == b"old\n"  # public reads
        assert curl_status("-X", "PUT", "--data-binary", "x", s.url("/a.txt", token=False)) == 401
        assert curl_status("-X", "PUT", "--data-binary", "x", "-H", "Authorization: Bearer wrong",
                           s.url("/a.txt", token=False)) == 401
        assert curl_status("-X", "PUT", "--data-binary", "x", s.url("/a.txt")) == 201
    finally:
        s.kill()
    s = Server(root)  # no --allow-upload
    try:
        assert curl_status("-X", "PUT", "--data-binary", "x", s.url("/b.txt")) == 403
        assert curl_status("-X", "POST", "--data-binary", "x", s.url("/b.txt")) == 403
    finally:
        s.kill()
    assert not (root / "b.txt").exists() and not leftovers(root)


def test_concurrent_uploads_are_bounded(root):
    s = Server(root, "--allow-upload", "--max-uploads", "1")
    try:
        with connect(s.port) as first:
            first.sendall(f"PUT /one.bin HTTP/1.1\r\nHost: x\r\n{AUTH}Content-Length: 6\r\n\r\nabc".encode())
            for _ in range(300):  # until the first is being received
                if stats(s)["uploads_open"] == 1:
                    break
                time.sleep(0.05)
            assert curl_status("-X", "PUT", "--data-binary", "two", s.url("/two.bin")) == 503
            first.sendall(b"def")
            assert Reader(first).response()[0] == 201
        assert (root / "one.bin").read_bytes() == b"abcdef" and not (root / "two.bin").exists()
    finally:
        s.kill()


@pytest.mark.skipif(not SHIM, reason="needs the slow-fsync shim (run through meson)")
def test_sync_answers_after_fsync_without_stalling_others(root, monkeypatch):
    # One ring thread, fsyncs made 3 s long: the answer waits for them, and meanwhile the
    # same thread serves a GET (the fsyncs run on the pool, not on the ring thread).
    monkeypatch.setenv("LD_PRELOAD", SHIM)
    monkeypatch.setenv("SLUICE_TEST_FSYNC_DELAY_MS", "3000")
    s = Server(root, "--allow-upload", "--sync", "--threads", "1")
    monkeypatch.delenv("LD_PRELOAD")
    try:
        body = os.urandom(100_000)
        with connect(s.port) as up:
            up.sendall(f"PUT /durable.bin HTTP/1.1\r\nHost: x\r\n{AUTH}Content-Length: {len(body)}\r\n\r\n".encode() + body)
            assert curl(s.url("/sub/old.txt")).stdout == b"old\n"
            ready, _, _ = select.select([up], [], [], 0)
            assert not ready, "answered before the fsyncs ended"
            status, _, _ = Reader(up).response()
            assert status == 201
        assert (root / "durable.bin").read_bytes() == body
    finally:
        s.kill()


def test_sigterm_lets_an_upload_in_flight_finish(server, root):
    body = os.urandom(200_000)
    with connect(server.port) as s:
        s.sendall(f"PUT /drain.bin HTTP/1.1\r\nHost: x\r\n{AUTH}Content-Length: {len(body)}\r\n\r\n".encode() + body[:1000])
        for _ in range(300):
            if stats(server)["uploads_open"] == 1:
                break
            time.sleep(0.05)
        server.proc.send_signal(signal.SIGTERM)
        # the listener closes at once: a new connection is refused while this one goes on
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
                time.sleep(0.05)
            except OSError:
                break
        else:
            raise AssertionError("still accepting after SIGTERM")
        s.sendall(body[1000:])
        rd = Reader(s)
        status, headers, _ = rd.response()
        assert status == 201 and headers["connection"] == "close" and rd.closed()
    rc, out, err = server.stop()
    assert rc == 0, err
    assert (root / "drain.bin").read_bytes() == body
