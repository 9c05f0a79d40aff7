"""HTTPS on `sluice serve --cert FILE --key FILE` (issue 18): the HTTP port speaks TLS 1.3 with
the handshake stepped on the ring threads and responses sealed by the record engine. Real
clients (curl, wget, aria2c, Python's ssl) against a CA made here at run time; hostile input
(plain HTTP, a bad ClientHello, a stalled handshake, a truncated or altered record) closes
that connection only, and is counted in /_stats."""
import hashlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import urllib.request

import pytest

from certs import self_signed, signed
from conftest import SLUICE, file_sha256 as sha256, wait_for, write_random
from serve_client import Reader, Server, request


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    out = {}
    out["ca"], _ = self_signed(d, "ca")
    out["other_ca"], _ = self_signed(d, "otherca")
    out["cert"], out["key"] = signed(d, "server", "ca", san="IP:127.0.0.1,DNS:localhost")
    out["other_cert"], out["other_key"] = self_signed(d, "other")
    return out


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "www"
    (r / "sub").mkdir(parents=True)
    write_random(r / "a.bin", 100_000, 1)
    write_random(r / "big.bin", 24 << 20, 2)
    (r / "sub" / "hello.txt").write_text("hello\n")
    return r


def https_server(root, pki, *args, **kw):
    return Server(root, "--cert", str(pki["cert"]), "--key", str(pki["key"]), *args, **kw)


@pytest.fixture
def server(root, pki):
    s = https_server(root, pki)
    yield s
    s.kill()


def curl(pki, *args, ca=None):
    return subprocess.run(["curl", "-s", "-S", "--cacert", str(ca or pki["ca"]), *args], capture_output=True, timeout=120)


def stats(server, pki):
    r = curl(pki, server.url("/_stats"))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def tls_client(port):
    """A TLS socket that trusts any certificate: for the tests that only need the bytes."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    raw = socket.create_connection(("127.0.0.1", port), timeout=30)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def test_url_get_head_range_304_listing_and_stats(server, root, pki):
    assert server.base.startswith("https://127.0.0.1:")
    data = (root / "a.bin").read_bytes()
    r = curl(pki, "-w", "%{http_version} %{ssl_verify_result}", "-o", "/dev/null", server.url("/a.bin"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == "1.1 0"
    assert curl(pki, server.url("/a.bin")).stdout == data
    assert curl(pki, "-r", "100-199", server.url("/a.bin")).stdout == data[100:200]
    assert curl(pki, "-r", "99990-", server.url("/a.bin")).stdout == data[99990:]
    head = curl(pki, "-I", server.url("/a.bin")).stdout.decode("latin-1")
    assert head.startswith("HTTP/1.1 200") and "content-length: 100000" in head.lower()
    etag = [line.split(":", 1)[1].strip() for line in head.split("\r\n") if line.lower().startswith("etag:")][0]
    code = curl(pki, "-o", "/dev/null", "-w", "%{http_code}", "-H", f"If-None-Match: {etag}", server.url("/a.bin"))
    assert code.stdout == b"304"
    big = curl(pki, server.url("/big.bin")).stdout
    assert hashlib.sha256(big).hexdigest() == sha256(root / "big.bin")
    assert "hello.txt" in curl(pki, server.url("/sub/")).stdout.decode()
    assert curl(pki, "-o", "/dev/null", "-w", "%{http_code}", server.base + "a.bin").stdout == b"401"  # no token
    doc = stats(server, pki)
    assert doc["https"] is True
    assert doc["tls_handshakes"] >= 9 and doc["tls_handshakes_failed"] == 0 and doc["tls_bad_records"] == 0
    assert "TLS 1.3" in doc["tls_path"] and ("ipsec-mb" in doc["tls_path"] or "openssl" in doc["tls_path"])
    assert doc["body_bytes_sent"] >= len(data) * 2 + (24 << 20)


def test_a_wrong_ca_is_refused_by_curl(server, pki):
    r = curl(pki, server.url("/a.bin"), ca=pki["other_ca"])
    assert r.returncode == 60, r.stderr  # peer certificate cannot be authenticated
    assert wait_for(lambda: stats(server, pki)["tls_handshakes_failed"] >= 1)


def test_keep_alive_and_pipelining_over_tls(server, root):
    data = (root / "a.bin").read_bytes()
    with tls_client(server.port) as s:
        assert s.version() == "TLSv1.3" and s.cipher()[0] == "TLS_AES_128_GCM_SHA256"
        rd = Reader(s)
        tok = "Authorization: Bearer testtoken\r\n"
        s.sendall(request("/a.bin", extra=tok) + request("/sub/hello.txt", extra=tok) +
                  request("/a.bin", extra=tok + "Range: bytes=5-9\r\n"))
        assert rd.response()[2] == data
        assert rd.response()[2] == b"hello\n"
        st, hd, body = rd.response()
        assert st == 206 and body == data[5:10]
        s.sendall(request("/a.bin", extra=tok, method="HEAD"))
        st, hd, body = rd.response(head_only=True)
        assert st == 200 and hd["content-length"] == "100000"


def test_alpn_is_http_1_1(server):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    with ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port), timeout=30)) as s:
        assert s.selected_alpn_protocol() == "http/1.1"


def test_resume_with_curl_and_wget(server, root, pki, tmp_path):
    want = sha256(root / "big.bin")
    part = tmp_path / "curl.bin"
    part.write_bytes((root / "big.bin").read_bytes()[: 7 << 20])
    r = curl(pki, "-C", "-", "-o", str(part), server.url("/big.bin"))
    assert r.returncode == 0, r.stderr
    assert sha256(part) == want
    if not shutil.which("wget"):
        pytest.skip("wget is not installed")
    part = tmp_path / "wget.bin"
    part.write_bytes((root / "big.bin").read_bytes()[: 3 << 20])
    r = subprocess.run(["wget", "-q", "-c", "--ca-certificate", str(pki["ca"]), "-O", str(part),
                        "--header", "Authorization: Bearer testtoken", server.base + "big.bin"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert sha256(part) == want
    assert stats(server, pki)["tls_handshakes_failed"] == 0


def test_upload_over_https(root, pki, tmp_path):
    s = https_server(root, pki, "--allow-upload")
    try:
        src = tmp_path / "up.bin"
        write_random(src, (5 << 20) + 123, 9)
        r = curl(pki, "-T", str(src), "-o", "/dev/null", "-w", "%{http_code}", s.url("/sub/up.bin"))
        assert r.stdout in (b"201", b"204", b"200"), r.stderr
        assert sha256(root / "sub" / "up.bin") == sha256(src)
        assert hashlib.sha256(curl(pki, s.url("/sub/up.bin")).stdout).hexdigest() == sha256(src)
        # chunked (no Content-Length): the decoder sees the same plain bytes
        r = subprocess.run(["curl", "-s", "-S", "--cacert", str(pki["ca"]), "-T", "-", "-H", "Transfer-Encoding: chunked",
                            "-o", "/dev/null", "-w", "%{http_code}", s.url("/sub/chunked.txt")],
                           input=b"chunked body\n" * 5000, capture_output=True, timeout=120)
        assert r.stdout in (b"201", b"204", b"200"), r.stderr
        assert (root / "sub" / "chunked.txt").read_bytes() == b"chunked body\n" * 5000
    finally:
        s.kill()


@pytest.mark.skipif(not shutil.which("aria2c"), reason="aria2c is not installed (scripts/bootstrap installs aria2)")
def test_aria2c_16_connections_sha256(server, root, pki, tmp_path):
    out = tmp_path / "out"
    r = subprocess.run(["aria2c", "-q", "-x16", "-s16", "-k1M", "--allow-overwrite=true", "--file-allocation=none",
                        "--ca-certificate", str(pki["ca"]), "--header", "Authorization: Bearer testtoken",
                        "-d", str(out), "-o", "big.bin", server.base + "big.bin"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sha256(out / "big.bin") == sha256(root / "big.bin")


def test_python_urllib_with_an_ssl_context(server, root, pki):
    ctx = ssl.create_default_context(cafile=str(pki["ca"]))
    req = urllib.request.Request(server.base + "big.bin", headers={"Authorization": "Bearer testtoken"})
    with urllib.request.urlopen(req, context=ctx, timeout=60) as resp:
        assert resp.status == 200
        assert hashlib.sha256(resp.read()).hexdigest() == sha256(root / "big.bin")
    bad = ssl.create_default_context(cafile=str(pki["other_ca"]))
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(req, context=bad, timeout=60)


def test_plain_http_to_the_tls_port_is_answered_and_closed(server, pki):
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(request("/a.bin"))
        got = b""
        while chunk := s.recv(4096):
            got += chunk
    assert got.startswith(b"HTTP/1.1 400") and b"https://" in got
    doc = stats(server, pki)
    assert doc["tls_plain_http"] == 1 and doc["tls_handshakes_failed"] >= 1


def test_a_bad_client_hello_is_closed(server, pki):
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(b"\x16\x03\x01\x00\x10" + b"\x01\x00\x00\x0cnot a hello!")
        rd = Reader(s)
        assert rd.closed()
    assert wait_for(lambda: stats(server, pki)["tls_handshakes_failed"] >= 1)
    assert curl(pki, server.url("/sub/hello.txt")).stdout == b"hello\n"


def test_a_stalled_handshake_times_out_while_others_are_served(root, pki):
    s = https_server(root, pki, "--request-timeout", "2")
    try:
        with socket.create_connection(("127.0.0.1", s.port), timeout=60) as stalled:
            stalled.sendall(b"\x16\x03\x01\x02\x00")  # a ClientHello record's header, then nothing
            for _ in range(3):  # others are served meanwhile, each with its own handshake
                assert curl(pki, s.url("/sub/hello.txt")).stdout == b"hello\n"
            assert Reader(stalled).closed()  # by the server's deadline (the socket's 60 s would raise)
        doc = stats(s, pki)
        assert doc["tls_handshakes_timed_out"] == 1 and doc["connections_timed_out"] >= 1
    finally:
        s.kill()


def handshaken(port):
    """A TLS 1.3 connection driven through memory BIOs: (socket, SSLObject, outgoing BIO), so
    a test can send the records it makes whole, cut short or altered."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="127.0.0.1")
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    while True:
        try:
            obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            sock.sendall(out.read())
            data = sock.recv(65536)
            assert data, "closed during the handshake"
            inc.write(data)
    sock.sendall(out.read())
    return sock, obj, out


@pytest.mark.parametrize("how", ["truncated", "altered"])
def test_a_truncated_or_altered_record_is_closed_and_counted(server, pki, how):
    sock, obj, out = handshaken(server.port)
    with sock:
        obj.write(request("/sub/hello.txt", extra="Authorization: Bearer testtoken\r\n"))
        rec = bytearray(out.read())
        if how == "truncated":
            sock.sendall(bytes(rec[:-7]))
            sock.shutdown(socket.SHUT_WR)
        else:
            rec[len(rec) // 2] ^= 0x40
            sock.sendall(bytes(rec))
        assert Reader(sock).closed()
    assert wait_for(lambda: stats(server, pki)["tls_bad_records"] >= 1)
    assert curl(pki, server.url("/sub/hello.txt")).stdout == b"hello\n"


def test_bad_certificate_files_are_usage_errors_naming_the_file(root, pki, tmp_path):
    def serve(*args):
        return subprocess.run([SLUICE, "serve", str(root), "--http", "0", "--bind", "127.0.0.1", "--token", "t", *args],
                              capture_output=True, text=True, timeout=60)
    missing = tmp_path / "missing.pem"
    r = serve("--cert", str(missing), "--key", str(pki["key"]))
    assert r.returncode == 2 and str(missing) in r.stderr and "cannot read" in r.stderr, r.stderr
    r = serve("--cert", str(pki["cert"]), "--key", str(pki["other_key"]))
    assert r.returncode == 2 and str(pki["other_key"]) in r.stderr and "not the private key" in r.stderr, r.stderr
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    r = serve("--cert", str(garbage), "--key", str(pki["key"]))
    assert r.returncode == 2 and str(garbage) in r.stderr, r.stderr
    r = serve("--cert", str(pki["cert"]))
    assert r.returncode == 2 and "--key" in r.stderr, r.stderr
    assert r.stdout == ""  # nothing listened, no URL printed
