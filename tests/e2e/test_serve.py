"""`sluice serve`: GET/HEAD, ranges, validators, keep-alive and pipelining, listings, auth,
/_stats and the drain on SIGTERM (issue 15)."""
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from conftest import make_cold, write_random
from serve_client import Reader, Server, connect, request


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "www"
    (r / "sub").mkdir(parents=True)
    write_random(r / "a.bin", 100_000, 1)
    write_random(r / "big.bin", 8 << 20, 2)
    (r / "sub" / "hello.txt").write_text("hello\n")
    (r / "<img src=x onerror=alert(1)>.txt").write_text("hostile name\n")
    (r / "a&b \"c' d.txt").write_text("quotes\n")
    (r / "dir with space").mkdir()
    return r


@pytest.fixture
def server(root):
    s = Server(root)
    yield s
    s.kill()


def curl(*args):
    r = subprocess.run(["curl", "-s", "-S", *args], capture_output=True, timeout=60)
    return r


def curl_status(*args):
    r = curl("-o", "/dev/null", "-w", "%{http_code}", *args)
    return int(r.stdout)


def test_get_head_range_and_validators(server, root):
    data = (root / "a.bin").read_bytes()
    r = curl(server.url("/a.bin"))
    assert r.returncode == 0 and r.stdout == data
    head = curl("-I", server.url("/a.bin")).stdout.decode()
    assert head.startswith("HTTP/1.1 200")
    assert "Content-Length: 100000" in head and "Accept-Ranges: bytes" in head
    etag = re.search(r"ETag: (\S+)", head)[1]
    last_modified = re.search(r"Last-Modified: (.+?)\r", head)[1]
    # one range, an open-ended one and a suffix
    assert curl("-r", "100-199", server.url("/a.bin")).stdout == data[100:200]
    assert curl("-r", "99990-", server.url("/a.bin")).stdout == data[99990:]
    assert curl("-H", "Range: bytes=-10", server.url("/a.bin")).stdout == data[-10:]
    r = curl("-i", "-r", "100-199", server.url("/a.bin")).stdout.decode("latin-1")
    assert r.startswith("HTTP/1.1 206") and "Content-Range: bytes 100-199/100000" in r
    r = curl("-i", "-r", "200000-", server.url("/a.bin")).stdout.decode("latin-1")
    assert r.startswith("HTTP/1.1 416") and "Content-Range: bytes */100000" in r
    assert curl_status("-H", f"If-None-Match: {etag}", server.url("/a.bin")) == 304
    assert curl_status("-H", 'If-None-Match: "other"', server.url("/a.bin")) == 200
    assert curl_status("-H", f"If-Modified-Since: {last_modified}", server.url("/a.bin")) == 304
    assert curl_status("-H", "If-Modified-Since: Mon, 01 Jan 2001 00:00:00 GMT", server.url("/a.bin")) == 200
    # If-Range: the range only for the version the client has
    assert curl("-r", "0-9", "-H", f"If-Range: {etag}", server.url("/a.bin")).stdout == data[:10]
    assert curl("-r", "0-9", "-H", 'If-Range: "stale"', server.url("/a.bin")).stdout == data
    assert curl_status(server.url("/missing")) == 404


def test_keep_alive_and_pipelining(server, root):
    data = (root / "a.bin").read_bytes()
    with connect(server.port) as s:
        rd = Reader(s)
        auth = "Authorization: Bearer testtoken\r\n"
        # keep-alive: two requests one after the other on one connection
        s.sendall(request("/sub/hello.txt", extra=auth))
        assert rd.response()[2] == b"hello\n"
        s.sendall(request("/a.bin", extra=auth))
        assert rd.response()[2] == data
        # pipelining: four requests in one write, answered in order
        s.sendall(request("/sub/hello.txt", extra=auth) + request("/a.bin", extra=auth + "Range: bytes=5-9\r\n") +
                  request("/a.bin", extra=auth, method="HEAD") + request("/nothing", extra=auth + "Connection: close\r\n"))
        st1, _, b1 = rd.response()
        st2, h2, b2 = rd.response()
        st3, h3, b3 = rd.response(head_only=True)
        st4, h4, _ = rd.response()
        assert (st1, b1) == (200, b"hello\n")
        assert (st2, b2) == (206, data[5:10])
        assert st3 == 200 and h3["content-length"] == "100000"
        assert st4 == 404 and h4["connection"] == "close"
        assert rd.closed()


def test_listing_html_escapes_names_and_links_work(server, root):
    page = curl(server.url("/")).stdout.decode()
    assert "<img src=x" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;.txt" in page
    assert "a&amp;b &quot;c&#39; d.txt" in page
    hrefs = re.findall(r'href="([^"]+)"', page)
    assert len(hrefs) == 6  # the six entries; no "../" at the root
    for href in hrefs:
        href = href.replace("&amp;", "&")
        assert "token=testtoken" in href  # a browser that came with ?token= keeps it
        url = server.base + href[2:]  # "./name?token=..." beneath the root
        code = curl_status("-L", url)
        assert code == 200, href
    assert curl(server.base + "%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E.txt?token=testtoken").stdout == b"hostile name\n"
    # a directory without its '/' is redirected, so that relative links resolve beneath it
    r = curl("-i", server.url("/sub")).stdout.decode()
    assert r.startswith("HTTP/1.1 301") and "Location: /sub/?token=testtoken" in r


def test_listing_json(server, root):
    for args in ([server.url("/?format=json")], ["-H", "Accept: application/json", server.url("/")]):
        r = curl(*args)
        doc = json.loads(r.stdout)
        names = {e["name"]: e for e in doc["entries"]}
        assert doc["path"] == "/" and doc["truncated"] is False
        assert names["<img src=x onerror=alert(1)>.txt"]["type"] == "file"
        assert names["a.bin"]["size"] == 100_000
        assert names["sub"]["type"] == "dir"


def test_token_required_unless_public(root):
    s = Server(root, token="s3cret")
    try:
        r = curl("-i", s.base + "sub/hello.txt").stdout.decode()
        assert r.startswith("HTTP/1.1 401") and "WWW-Authenticate: Bearer" in r
        assert curl_status("-H", "Authorization: Bearer wrong", s.base + "sub/hello.txt") == 401
        assert curl_status(s.base + "sub/hello.txt?token=s3cre") == 401
        assert curl("-H", "Authorization: Bearer s3cret", s.base + "sub/hello.txt").stdout == b"hello\n"
        assert curl(s.base + "sub/hello.txt?token=s3cret").stdout == b"hello\n"
        assert curl_status(s.base + "_stats") == 401
    finally:
        s.kill()
    p = Server(root, token=None, public=True)
    try:
        assert curl(p.base + "sub/hello.txt").stdout == b"hello\n"
    finally:
        p.kill()


def test_stats_count_requests_and_bytes(server, root):
    for _ in range(3):
        assert curl(server.url("/sub/hello.txt")).stdout == b"hello\n"
    doc = json.loads(curl(server.url("/_stats")).stdout)
    assert doc["requests"] >= 4 and doc["responses_2xx"] >= 3
    assert doc["body_bytes_sent"] >= 18
    assert doc["threads"] == 2
    assert doc["recv_path"] and doc["cold_check"]


def test_sigterm_drains_a_response_in_flight(server, root):
    data = (root / "big.bin").read_bytes()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)  # the response cannot all be queued at once
    s.settimeout(60)
    s.connect(("127.0.0.1", server.port))
    s.sendall(request("/big.bin", extra="Authorization: Bearer testtoken\r\n"))
    rd = Reader(s)
    while b"\r\n\r\n" not in rd.buf:
        rd._fill()
    server.proc.send_signal(signal.SIGTERM)
    status, headers, body = rd.response()
    assert status == 200 and hashlib.sha256(body).digest() == hashlib.sha256(data).digest()
    assert headers["connection"] == "keep-alive"  # sent before the signal
    assert rd.closed()  # then closed, not kept alive
    rc, _, err = server.stop()
    assert rc == 0, err
    # new connections are refused once it has drained
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=5).recv(1)


def test_a_range_not_in_the_page_cache_is_read_by_the_pool(server, root):
    # Dropped from the page cache, the file is read in by the cold-read pool (counted in
    # /_stats) and then sent from the cache: the bytes are the file's either way.
    path = root / "big.bin"
    want = path.read_bytes()
    make_cold(path)
    before = json.loads(curl(server.url("/_stats")).stdout)["cold_reads"]
    assert curl(server.url("/big.bin")).stdout == want
    after = json.loads(curl(server.url("/_stats")).stdout)
    assert after["cold_check"].startswith("cachestat")
    assert after["cold_reads"] > before


def test_a_large_response_to_a_slow_reader_beside_small_ones(root):
    # One thread: a large response to a slow reader is parked on POLLOUT again and again while
    # another connection's small requests are answered; the small responses meanwhile and the
    # large body are all exact.
    s = Server(root, "--threads", "1")
    try:
        data = (root / "big.bin").read_bytes()
        small = (root / "a.bin").read_bytes()
        big = socket.socket()
        big.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)  # it cannot all be queued at once
        big.settimeout(60)
        big.connect(("127.0.0.1", s.port))
        big.sendall(request("/big.bin", extra="Authorization: Bearer testtoken\r\n"))
        got = b""
        with connect(s.port) as c:
            rc = Reader(c)
            for _ in range(20):
                c.sendall(request("/a.bin", extra="Authorization: Bearer testtoken\r\n"))
                assert rc.response()[2] == small
                got += big.recv(1 << 14)  # the large one moves on meanwhile, a little at a time
        while b"\r\n\r\n" not in got:
            got += big.recv(1 << 16)
        head, body = got.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 200")
        while len(body) < len(data):
            chunk = big.recv(1 << 16)
            assert chunk, "closed before the body's end"
            body += chunk
        assert body == data
        big.close()
    finally:
        s.kill()


def test_many_clients_of_one_cold_file_get_its_bytes(root):
    # Eight clients at once of a file dropped from the page cache, on one ring thread: ranges
    # another client's pool read is still filling are waited for on the pool (cold_waits),
    # reads ahead run while the read-in part is sent; every client gets the file's bytes and
    # at least one range went through the pool.
    # Nothing but the server reads the file between the drop and the clients: the expected
    # hash is taken first (read after the clients started, it raced them and, on a busy
    # machine, brought the whole file back into the cache before the server looked: no range
    # was cold, cold_reads stayed 0).
    s = Server(root, "--threads", "1")
    try:
        path = root / "big.bin"
        want = hashlib.sha256(path.read_bytes()).digest()
        make_cold(path)
        procs = [subprocess.Popen(["curl", "-s", "-S", "--max-time", "120", s.url("/big.bin")], stdout=subprocess.PIPE)
                 for _ in range(8)]
        for p in procs:
            out, _ = p.communicate(timeout=180)
            assert p.returncode == 0 and hashlib.sha256(out).digest() == want
        doc = json.loads(curl(s.url("/_stats")).stdout)
        assert doc["cold_reads"] >= 1 and "cold_waits" in doc
    finally:
        s.kill()


def wait_stats(server, ready, what, polls=300):
    """/_stats until ready(doc) (bounded: per-client rows are published every 200 ms)."""
    for _ in range(polls):
        doc = json.loads(curl(server.url("/_stats")).stdout)
        if ready(doc):
            return doc
        time.sleep(0.05)
    raise AssertionError(f"/_stats never showed {what}: {doc}")


def test_stats_per_client_requests_bytes_and_rate(server, root):
    data = (root / "a.bin").read_bytes()
    with connect(server.port) as s:
        rd = Reader(s)
        for _ in range(5):
            s.sendall(request("/a.bin", extra="Authorization: Bearer testtoken\r\n"))
            assert rd.response()[2] == data
        doc = wait_stats(server, lambda d: any(c["address"] == "127.0.0.1" and c["requests"] >= 5 and
                                               c["bytes_per_s"] > 0 for c in d["clients"]), "a rate for 127.0.0.1")
        me = next(c for c in doc["clients"] if c["address"] == "127.0.0.1")
        assert me["bytes_sent"] >= 5 * len(data) and me["bytes_received"] > 0
        assert me["connections_open"] >= 1 and me["connections"] >= 2 and me["requests_per_s"] >= 0
        assert doc["clients_tracked"] >= 1


def test_stats_track_a_bounded_number_of_clients(root):
    # 256 addresses per thread are tracked; the 257th with all of them busy is only counted.
    s = Server(root, "--threads", "1", "--request-timeout", "120")
    held = []
    try:
        for i in range(256):
            c = socket.socket()
            c.bind((f"127.0.1.{i}", 0))
            c.connect(("127.0.0.1", s.port))
            held.append(c)
        doc = wait_stats(s, lambda d: d["clients_tracked"] == 256 and d["clients_untracked"] >= 1, "256 tracked")
        assert len(doc["clients"]) == 100  # the busiest 100 are listed
        assert all(c["address"].startswith("127.0.1.") for c in doc["clients"])
    finally:
        for c in held:
            c.close()
        s.kill()
