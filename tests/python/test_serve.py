"""sluice.serve / sluice.Server and sluice.get (issue 15): a server in this process, HTTP reads
with the token, get sessions over sluice's protocol, stats, refusals as the right exception."""
import hashlib
import json
import urllib.error
import urllib.request

import pytest

import sluice
from conftest import make_tree, tree_listing


def regular_files(listing):
    return {k: v for k, v in listing.items() if v[0] == "file"}


def test_serve_http_and_get(tmp_path):
    src = make_tree(tmp_path / "www")
    with sluice.serve(src, http_port=0, port=0, token="pytok", bind_address="127.0.0.1", threads=1) as srv:
        assert srv.port > 0 and srv.get_port > 0 and srv.get_port != srv.port
        body = urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/big.bin?token=pytok", timeout=60).read()
        assert body == (src / "big.bin").read_bytes()
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/big.bin", timeout=60)
        assert e.value.code == 401

        dest = tmp_path / "in"
        dest.mkdir()
        seen = []
        stats = sluice.get(f"sluice://127.0.0.1:{srv.get_port}/a?token=pytok", dest, streams=3,
                           progress=seen.append, progress_interval=0.05)
        assert stats["files"] == 20 and stats["streams"] == 3 and seen
        assert regular_files(tree_listing(dest / "a")) == regular_files(tree_listing(src / "a"))
        back = tmp_path / "back"  # the server connecting to this host instead
        back.mkdir()
        assert sluice.get(f"sluice://127.0.0.1:{srv.get_port}/a?token=pytok", back, connect_back=True)["files"] == 20
        assert regular_files(tree_listing(back / "a")) == regular_files(tree_listing(src / "a"))

        with pytest.raises(sluice.AuthError):
            sluice.get(f"sluice://127.0.0.1:{srv.get_port}/big.bin", dest, token="wrong")
        with pytest.raises(sluice.SourceError, match="not found"):
            sluice.get(f"sluice://127.0.0.1:{srv.get_port}/nope?token=pytok", dest)
        sealed = tmp_path / "sealed"  # encrypted on loopback: the server's get ring follows
        sealed.mkdir()
        stats = sluice.get(f"sluice://127.0.0.1:{srv.get_port}/big.bin?token=pytok", sealed, encrypt=True)
        assert stats["encryption"].startswith("tls13") and (sealed / "big.bin").read_bytes() == (src / "big.bin").read_bytes()
        st = srv.stats()
        assert st["get_sessions"] == 5 and st["get_sessions_failed"] == 2 and st["requests"] == 2
        assert st["get_sessions_ring_encrypted"] == 1, st
    with pytest.raises(sluice.UsageError):
        sluice.Server(tmp_path / "www", http_port=70000)
    with pytest.raises(sluice.DestinationError):
        sluice.Server(tmp_path / "missing", token="x")


def test_upload_and_stop_drains_an_upload_in_flight(tmp_path):
    import socket
    import threading
    root = tmp_path / "up"
    root.mkdir()
    srv = sluice.serve(root, token="pytok", public=True, allow_upload=True, max_upload_size="1M",
                       bind_address="127.0.0.1", threads=1)
    try:
        req = urllib.request.Request(f"http://127.0.0.1:{srv.port}/d/x.bin", data=b"abc" * 1000, method="PUT",
                                     headers={"Authorization": "Bearer pytok"})
        assert urllib.request.urlopen(req, timeout=60).status == 201
        assert (root / "d" / "x.bin").read_bytes() == b"abc" * 1000
        with pytest.raises(urllib.error.HTTPError) as e:  # public reads, but not public uploads
            urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{srv.port}/y", data=b"x", method="PUT"),
                                   timeout=60)
        assert e.value.code == 401
        body = bytes(range(256)) * 400
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
        s.sendall(b"PUT /drained.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer pytok\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body[:100])
        for _ in range(300):  # bounded: until the server holds the upload
            if srv.stats()["uploads_open"] == 1:
                break
            threading.Event().wait(0.05)
        stopper = threading.Thread(target=srv.stop)
        stopper.start()  # stop() drains: it returns once this upload is answered
        for _ in range(300):  # bounded: until the listener is closed (the drain began)
            try:
                socket.create_connection(("127.0.0.1", srv.port), timeout=5).close()
                threading.Event().wait(0.05)
            except OSError:
                break
        else:
            raise AssertionError("still accepting after stop()")
        s.sendall(body[100:])
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = s.recv(4096)
            assert chunk, "closed without an answer"
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 201") and b"Connection: close" in answer
        stopper.join(60)
        assert not stopper.is_alive()
        assert (root / "drained.bin").read_bytes() == body
        s.close()
    finally:
        srv.stop()


def test_serve_https_in_process(tmp_path):
    import ssl
    import subprocess
    src = make_tree(tmp_path / "www")
    d = tmp_path / "pki"
    d.mkdir()
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", "k.pem", "-out", "c.pem", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1"], cwd=d, check=True, capture_output=True, timeout=60)
    ctx = ssl.create_default_context(cafile=str(d / "c.pem"))
    with sluice.serve(src, token="pytok", bind_address="127.0.0.1", threads=1, cert=d / "c.pem", key=d / "k.pem") as srv:
        body = urllib.request.urlopen(f"https://127.0.0.1:{srv.port}/big.bin?token=pytok", context=ctx, timeout=60).read()
        assert hashlib.sha256(body).digest() == hashlib.sha256((src / "big.bin").read_bytes()).digest()
        st = srv.stats()
        assert st["https"] is True and st["tls_handshakes"] == 1 and "TLS 1.3" in st["tls_path"]
    with pytest.raises(sluice.UsageError, match="k.pem"):
        sluice.Server(src, token="x", cert=d / "c.pem", key=d / "missing" / "k.pem")


def test_push_with_send_into_a_serve(tmp_path):
    """sluice.send to a serve's sluice port pushes (h15s): stored under DIR as recv would,
    counted in the stats; a serve without allow_upload refuses with AuthError."""
    src = make_tree(tmp_path / "src" / "host1")
    root = tmp_path / "www"
    root.mkdir()
    with sluice.serve(root, http_port=0, port=0, token="pytok", bind_address="127.0.0.1", threads=1, allow_upload=True,
                      max_pushes=2) as srv:
        stats = sluice.send([src], f"sluice://127.0.0.1:{srv.get_port}/?token=pytok", streams=2)
        assert tree_listing(root / "host1") == tree_listing(src)
        st = srv.stats()
        assert st["pushes_done"] == 1 and st["push_bytes"] == stats["bytes"]
    other = tmp_path / "ro"
    other.mkdir()
    with sluice.serve(other, http_port=0, port=0, token="pytok", bind_address="127.0.0.1", threads=1) as srv:
        with pytest.raises(sluice.AuthError, match="does not take pushes"):
            sluice.send([src], f"sluice://127.0.0.1:{srv.get_port}/?token=pytok")
    assert list(other.iterdir()) == []


def test_push_trust_options(tmp_path):
    """push_keep_owners / push_keep_privileges (h15o) reach the server (stats' push_metadata
    says the policy), and need allow_upload with a port."""
    root = tmp_path / "www"
    root.mkdir()
    for kwargs, policy in (({}, "own user and group"), ({"push_keep_owners": True}, "owners and groups kept"),
                           ({"push_keep_privileges": True}, "as a root sluice recv does")):
        with sluice.serve(root, http_port=0, port=0, token="pytok", bind_address="127.0.0.1", threads=1,
                          allow_upload=True, **kwargs) as srv:
            assert policy in srv.stats()["push_metadata"]
            assert srv.stats()["push_metadata_not_kept"] == []
    with pytest.raises(sluice.UsageError, match="need port= and allow_upload"):
        sluice.serve(root, http_port=0, port=0, token="pytok", push_keep_owners=True)
    with pytest.raises(sluice.UsageError, match="expected True or False"):
        sluice.serve(root, http_port=0, port=0, token="pytok", allow_upload=True, push_keep_privileges="yes")
