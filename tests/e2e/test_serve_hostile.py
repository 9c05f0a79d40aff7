"""`sluice serve` against hostile clients: paths out of DIR, bad requests, limits, and slow
or idle clients closed by their deadlines without holding up anyone else (issue 15)."""
import json
import os
import socket
import subprocess

import pytest

from serve_client import Reader, Server, connect, request

AUTH = "Authorization: Bearer testtoken\r\n"


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "www"
    (r / "sub").mkdir(parents=True)
    (r / "sub" / "ok.txt").write_text("inside\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    os.symlink(tmp_path / "secret.txt", r / "abs-escape")
    os.symlink("../secret.txt", r / "rel-escape")
    os.symlink("..", r / "up")
    os.symlink("sub/ok.txt", r / "inside-link")
    os.mkfifo(r / "fifo")
    return r


@pytest.fixture
def server(root):
    s = Server(root, "--request-timeout", "1", "--idle-timeout", "2")
    yield s
    s.kill()


def one(port, raw):
    """Sends raw bytes on a new connection; (status, headers, closed after)."""
    with connect(port) as s:
        s.sendall(raw)
        rd = Reader(s)
        status, headers, _ = rd.response()
        closed = headers.get("connection") == "close" and rd.closed()
        return status, headers, closed


@pytest.mark.parametrize("path", ["/../secret.txt", "/sub/../../secret.txt", "/%2e%2e/secret.txt", "/sub/%2E%2E/%2e%2e/secret.txt",
                                  "/sub%2f..%2f..%2fsecret.txt", "/ok%00.txt", "/%zz", "secret.txt"])
def test_traversal_refused(server, path):
    status, _, closed = one(server.port, request(path, extra=AUTH))
    assert status == 400 and closed


@pytest.mark.parametrize("path", ["/abs-escape", "/rel-escape", "/up/secret.txt", "/up/", "/fifo"])
def test_symlink_escape_and_special_files_refused(server, path):
    status, _, _ = one(server.port, request(path, extra=AUTH))
    assert status == 403


def test_symlink_inside_is_followed(server):
    with connect(server.port) as s:
        s.sendall(request("/inside-link", extra=AUTH))
        assert Reader(s).response()[2] == b"inside\n"


@pytest.mark.parametrize("raw,status", [
    (b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(100)) + b"\r\n", 431),
    (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n", 431),
    (b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    (b"BREW / HTTP/1.1\r\nHost: x\r\n\r\n", 501),
    (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505),
    (b"GET / HTTP/1.1\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400),
    (b"PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 403),  # no --allow-upload
    (b"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 403),
    (b"GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 413),  # a body only with uploads
    (b"GET /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 501),
    (b"garbage\r\n\r\n", 400),
])
def test_bad_requests_get_their_status_and_close(server, raw, status):
    got, _, closed = one(server.port, raw)
    assert got == status
    if status != 501 or b"BREW" not in raw:
        assert closed


def test_other_methods_get_405_with_allow(server):
    status, headers, _ = one(server.port, request("/sub/ok.txt", method="DELETE", extra=AUTH + "Connection: close\r\n"))
    assert status == 405 and headers["allow"] == "GET, HEAD"


def test_slow_and_idle_clients_are_closed_without_stalling_others(server):
    # A slowloris (half a request head), a client that connects and says nothing, and one
    # that goes quiet after a first request: each is closed by its deadline, while a normal
    # client on another connection is served at once.
    slow = connect(server.port)
    slow.sendall(b"GET /sub/ok.txt HTTP/1.1\r\nHost: x\r\n")
    silent = connect(server.port)
    idle = connect(server.port)
    idle.sendall(request("/sub/ok.txt", extra=AUTH))
    idle_rd = Reader(idle)
    assert idle_rd.response()[2] == b"inside\n"
    with connect(server.port) as normal:
        normal.sendall(request("/sub/ok.txt", extra=AUTH))
        assert Reader(normal).response()[2] == b"inside\n"
    # Answered while all three were held open by their clients; now each is closed by the
    # server (EOF, not the client's own 30 s socket timeout, which would raise).
    assert Reader(slow).closed()
    assert Reader(silent).closed()
    assert idle_rd.closed()
    with connect(server.port) as s:
        s.sendall(request("/_stats", extra=AUTH))
        doc = json.loads(Reader(s).response()[2])
    assert doc["connections_timed_out"] >= 3


def test_client_that_floods_pipelined_requests_without_reading_is_closed(server, root):
    # The client never reads: the first response fills the socket, the requests behind it
    # pile up. The server holds a bounded amount of them (16 KiB) and then closes, instead of
    # buffering without end; sending on fails with a reset, not a timeout.
    (root / "big.bin").write_bytes(os.urandom(4 << 20))
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(30)
    s.connect(("127.0.0.1", server.port))
    with pytest.raises((BrokenPipeError, ConnectionResetError)):
        for _ in range(20000):  # bounded: ~1.5 MB of requests
            s.sendall(request("/big.bin", extra=AUTH))
    s.close()
    # the server is still serving others
    with connect(server.port) as n:
        n.sendall(request("/sub/ok.txt", extra=AUTH))
        assert Reader(n).response()[2] == b"inside\n"
