"""`sluice serve --allow-upload` with chunked request bodies (issue 15): curl -T - from a pipe
is stored whole, renamed only at the last chunk; ambiguous or unknown framings are refused;
hostile framing (bad or overflowing sizes, long extensions, trailer floods, one-byte chunks
trickled forever) is refused or timed out, and never leaves a file presented as complete."""
import os
import select
import socket
import subprocess

import pytest

from conftest import write_random
from serve_client import Reader, Server, connect, request
from test_serve_upload import AUTH, curl, leftovers, stats, wait_uploads_settled


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "www"
    r.mkdir()
    (r / "old.txt").write_text("old\n")
    return r


@pytest.fixture
def server(root):
    s = Server(root, "--allow-upload", "--max-upload-size", "4M", "--request-timeout", "2", "--upload-timeout", "6")
    yield s
    s.kill()


def head(path, extra=""):
    return f"PUT {path} HTTP/1.1\r\nHost: x\r\n{AUTH}Transfer-Encoding: chunked\r\n{extra}\r\n".encode()


def chunks(data, size):
    out = b""
    for i in range(0, len(data), size):
        piece = data[i:i + size]
        out += b"%x\r\n" % len(piece) + piece + b"\r\n"
    return out + b"0\r\n\r\n"


def curl_pipe(url, data, *args):
    """curl -T - reading `data` from a pipe: it sends Transfer-Encoding: chunked."""
    return subprocess.run(["curl", "-s", "-S", "-v", "-o", "/dev/null", "-w", "%{http_code}", *args, "-T", "-", url],
                          input=data, capture_output=True, timeout=120)


def test_curl_from_a_pipe_is_stored_whole(server, root, tmp_path):
    src = tmp_path / "src.bin"
    write_random(src, 3 << 20, 11)
    data = src.read_bytes()
    r = curl_pipe(server.url("/piped/new.bin"), data)
    assert b"Transfer-Encoding: chunked" in r.stderr and b"Expect: 100-continue" in r.stderr, r.stderr[-2000:]
    assert b"HTTP/1.1 100 Continue" in r.stderr
    assert int(r.stdout) == 201, r.stderr[-2000:]
    assert (root / "piped" / "new.bin").read_bytes() == data
    assert curl(server.url("/piped/new.bin")).stdout == data
    # without Expect, replacing a file the open-file cache holds, and an empty chunked body
    assert curl(server.url("/old.txt")).stdout == b"old\n"
    assert int(curl_pipe(server.url("/old.txt"), b"new\n", "-H", "Expect:").stdout) == 200
    assert curl(server.url("/old.txt")).stdout == b"new\n"
    assert int(curl_pipe(server.url("/empty.bin"), b"").stdout) == 201
    assert (root / "empty.bin").read_bytes() == b""
    s = stats(server)
    assert s["uploads"] == 3 and s["uploads_open"] == 0 and s["upload_bytes"] == len(data) + 4
    assert not leftovers(root)


def test_sync_keeps_its_meaning_for_chunked_bodies(root, tmp_path):
    s = Server(root, "--allow-upload", "--sync", "--threads", "1")
    try:
        data = os.urandom(300_000)
        r = curl_pipe(s.url("/durable.bin"), data)
        assert int(r.stdout) == 201, r.stderr[-2000:]
        assert (root / "durable.bin").read_bytes() == data and not leftovers(root)
    finally:
        s.kill()


def test_pipelined_chunked_put_then_get_with_trailers_and_extensions(server, root):
    body = os.urandom(10_000)
    framed = b""
    for i in range(0, len(body), 999):
        piece = body[i:i + 999]
        framed += b"%X;name=\"v\";flag\r\n" % len(piece) + piece + b"\r\n"
    framed += b"0;last\r\nX-Checksum: abc\r\nX-Other: 1\r\n\r\n"
    with connect(server.port) as s:
        rd = Reader(s)
        s.sendall(head("/pipe.bin") + framed + request("/pipe.bin", extra=AUTH))
        status, headers, _ = rd.response()
        assert status == 201 and headers["connection"] == "keep-alive"
        status, _, got = rd.response()
        assert status == 200 and got == body
    # the same, one byte per send
    with connect(server.port) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        msg = head("/slow.bin") + chunks(b"abcdefgh", 3)
        for i in range(len(msg)):
            s.sendall(msg[i:i + 1])
        assert Reader(s).response()[0] == 201
    assert (root / "slow.bin").read_bytes() == b"abcdefgh"


@pytest.mark.parametrize("framing", [
    b"zz\r\nhello\r\n0\r\n\r\n",                      # not hex
    b"10000000000000005\r\nhello\r\n0\r\n\r\n",        # 17 hex digits: would overflow 64 bits
    b"-5\r\nhello\r\n0\r\n\r\n",
    b"5\nhello\r\n0\r\n\r\n",                          # a bare LF
    b"3\r\nhello\r\n0\r\n\r\n",                        # data longer than its size
    b"5;" + b"e" * 2000 + b"\r\nhello\r\n0\r\n\r\n",   # an extension over the bound
    b"5\r\nhello\r\n0\r\nbad trailer\r\n\r\n",
    b"5\r\nhello\r\n0\r\n" + b"t: v\r\n" * 100 + b"\r\n",  # too many trailers
], ids=["not-hex", "overflow", "negative", "bare-lf", "long-data", "huge-ext", "bad-trailer", "trailer-flood"])
def test_hostile_framing_is_400_and_nothing_is_stored(server, root, framing):
    with connect(server.port) as s:
        s.sendall(head("/evil.bin") + framing + request("/old.txt", extra=AUTH))
        rd = Reader(s)
        status, headers, _ = rd.response()
        assert status == 400 and headers["connection"] == "close"
        assert rd.closed()  # what followed the broken frame was not read as a request
    wait_uploads_settled(server, 1)
    assert not (root / "evil.bin").exists() and not leftovers(root)


def test_ambiguous_and_unknown_framings(server, root):
    cases = [
        (head("/a.bin", "Content-Length: 5\r\n") + b"5\r\nhello\r\n0\r\n\r\n", 400),  # both framings
        (b"PUT /a.bin HTTP/1.1\r\nHost: x\r\n" + AUTH.encode() + b"Content-Length: 5\r\n"
         b"Transfer-Encoding: chunked\r\n\r\nhello", 400),
        (head("/a.bin", "Transfer-Encoding: chunked\r\n"), 400),  # chunked twice
        (b"PUT /a.bin HTTP/1.1\r\nHost: x\r\n" + AUTH.encode() + b"Transfer-Encoding: gzip, chunked\r\n\r\n", 501),
        (b"PUT /a.bin HTTP/1.1\r\nHost: x\r\n" + AUTH.encode() + b"Transfer-Encoding: chunked, gzip\r\n\r\n", 400),
        (b"GET /old.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: br\r\n\r\n", 501),
        (b"PUT /a.bin HTTP/1.0\r\n" + AUTH.encode() + b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ]
    for msg, want in cases:
        with connect(server.port) as s:
            s.sendall(msg)
            rd = Reader(s)
            status, headers, _ = rd.response()
            assert (status, headers["connection"]) == (want, "close"), msg
            assert rd.closed()
    assert not (root / "a.bin").exists() and not leftovers(root)


def test_over_the_upload_limit_is_413(server, root):
    # A size line that passes the limit (4M) is refused before its data is sent: alone ...
    with connect(server.port) as s:
        s.sendall(head("/big0.bin", "Expect: 100-continue\r\n"))
        rd = Reader(s)
        assert rd.response()[0] == 100
        s.sendall(b"500000\r\n")
        status, headers, _ = rd.response()
        assert status == 413 and headers["connection"] == "close"
    # ... or after earlier chunks (3 MiB, then 2 MiB more)
    with connect(server.port) as s:
        s.sendall(head("/big.bin") + b"300000\r\n" + b"x" * 0x300000 + b"\r\n" + b"200000\r\n")
        rd = Reader(s)
        status, headers, _ = rd.response()
        assert status == 413 and headers["connection"] == "close"
    # ... and one that claims 2^64 - 1 at once
    with connect(server.port) as s:
        s.sendall(head("/big2.bin") + b"ffffffffffffffff\r\n")
        assert Reader(s).response()[0] == 413
    # curl from a pipe with a body over the limit: refused, whatever curl makes of the close
    r = curl_pipe(server.url("/big3.bin"), os.urandom((4 << 20) + 100_000))
    assert r.stdout in (b"413", b"000"), r.stderr[-2000:]
    wait_uploads_settled(server, 4)
    assert not any((root / n).exists() for n in ("big0.bin", "big.bin", "big2.bin", "big3.bin")) and not leftovers(root)


def test_a_client_leaving_or_stalling_mid_body_leaves_nothing(server, root):
    # leaves: in a chunk's data, and between chunks
    for tail in (b"100\r\n" + b"x" * 10, b"5\r\nhello\r\n"):
        with connect(server.port) as s:
            s.sendall(head("/gone.bin") + tail)
    wait_uploads_settled(server, 2)
    # stalls inside a chunk: closed by --request-timeout 2, not answered as complete
    with connect(server.port) as s:
        s.sendall(head("/stall.bin") + b"100\r\n" + b"x" * 10)
        assert Reader(s).closed()
    wait_uploads_settled(server, 3)
    assert not (root / "gone.bin").exists() and not (root / "stall.bin").exists() and not leftovers(root)


def test_slowloris_chunks_end_at_the_upload_deadline(server, root):
    # One-byte chunks, each inside the request timeout (2 s), never a last chunk: the upload's
    # own deadline (6 s from its head) closes it. Bounded: at most 60 sends over 30 s.
    with connect(server.port) as s:
        s.sendall(head("/loris.bin"))
        closed = False
        for _ in range(60):
            try:
                s.sendall(b"1\r\nx\r\n")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            readable, _, _ = select.select([s], [], [], 0.5)
            if readable:
                closed = Reader(s).closed()  # closed without an answer: not stored
                break
        assert closed, "still open after 60 chunks"
    s2 = wait_uploads_settled(server, 1)
    assert s2["connections_timed_out"] >= 1
    assert not (root / "loris.bin").exists() and not leftovers(root)


def test_framing_flood_is_refused(server, root):
    # one-byte chunks behind 1000-byte extensions: the framing outgrows the data, 400
    one = b"1;" + b"e" * 1000 + b"\r\nx\r\n"
    with connect(server.port) as s:
        s.sendall(head("/flood.bin") + one * 70)  # ~70 KB of framing for 70 bytes of data
        status, headers, _ = Reader(s).response()
        assert status == 400 and headers["connection"] == "close"
    wait_uploads_settled(server, 1)
    assert not (root / "flood.bin").exists() and not leftovers(root)
