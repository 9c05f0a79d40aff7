"""Connect-back and certificate-mode gets on the get rings (issue 15, h15t). Before, each went
to a session thread (the public send(): 1 + N threads per get); now the ring connects out to
the client's receiver itself (IORING_OP_CONNECT) and steps the certificate handshake and the
request's records on its own loop. What must hold: with --threads 1, four connect-back gets and
four certificate-mode gets held mid-transfer at once add no thread to the server (the count
cannot depend on timing: no thread is ever made for a get); a connect-back to a port that never
answers fails by its connect deadline, naming it, while another get is served on the same ring;
a client certificate that --pin does not name is still refused, and one it names is served;
`/_stats` and -v say the ring sent them. Certificates are made with openssl at run time."""
import json
import os
import select
import socket
import ssl
import struct
import urllib.request

import pytest

import sluice_wire as w
from certs import pin_of, self_signed, signed
from conftest import file_hash, run_sluice, wait_for, write_random
from serve_client import Server


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    out = {}
    out["ca"], _ = self_signed(d, "ca")
    out["server"], out["server_key"] = signed(d, "server", "ca")
    out["client"], out["client_key"] = signed(d, "client", "ca")
    out["other"], out["other_key"] = signed(d, "otherclient", "ca")
    return out


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "www"
    r.mkdir()
    write_random(r / "big.bin", 48 << 20, 7)  # more than the socket buffers of a held stream take
    (r / "one").write_bytes(b"x")
    return r


def serve(root, pki, *args):
    return Server(root, "--port", "0", "--cert", pki["server"], "--key", pki["server_key"], *args, token=None, public=True)


def stats(s):
    # The HTTP port speaks HTTPS with the same certificate; what is read here is only counters.
    with urllib.request.urlopen(s.url("/_stats"), timeout=60, context=ssl._create_unverified_context()) as r:
        return json.loads(r.read())


def threads(s):
    return len(os.listdir(f"/proc/{s.proc.pid}/task"))


def sluice_port(s):
    return int(s.sluice_base.rstrip("/").rsplit(":", 1)[1])


def get(s, path, dest, *args):
    dest.mkdir(exist_ok=True)
    return run_sluice("get", s.sluice_base + path, dest, "--json", *args)


def hold_connect_back(s, rtoken):
    """A raw client asking the server to connect back: its receiver takes the control
    connection and the data stream, reads the manifest and never acks it. Returns what to close."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(60)
    req = socket.create_connection(("127.0.0.1", sluice_port(s)), timeout=60)
    w.read_get_frame(req, w.GET_HELLO)
    req.sendall(w.get_request(1, "big.bin", os.urandom(16), rtoken, reply_port=listener.getsockname()[1]))
    assert w.read_get_frame(req, w.GET_REPLY)[0] == 0
    ctl, _ = listener.accept()
    ctl.settimeout(60)
    w.receiver_hello(ctl, rtoken)  # the control connection's first: the stream connects after it
    dat, _ = listener.accept()
    dat.settimeout(60)
    w.receiver_hello(dat, rtoken)
    assert w.read_frame(ctl)[0] == w.MANIFEST
    return [req, ctl, dat, listener]


def hold_certificate(s, pki, rtoken):
    """A raw client in certificate mode: the TLS 1.3 handshake verifying the server (Python's
    ssl), GET_REQUEST and GET_REPLY in records, two connections attached in clear, the manifest
    read and never acked."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.check_hostname = False
    ctx.load_verify_locations(pki["ca"])
    raw = socket.create_connection(("127.0.0.1", sluice_port(s)), timeout=60)
    hello = w.read_get_frame(raw, w.GET_HELLO)
    assert struct.unpack_from("<H", hello, 10)[0] & 0x40  # bit 6: a certificate on this port
    req = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    nonce = os.urandom(16)
    req.sendall(w.get_request(1, "big.bin", nonce, rtoken))
    assert w.read_get_frame(req, w.GET_REPLY)[0] == 0
    links = []
    for _ in range(2):
        c = socket.create_connection(("127.0.0.1", sluice_port(s)), timeout=60)
        w.read_get_frame(c, w.GET_HELLO)
        c.sendall(w.get_attach(nonce))
        links.append(c)
    w.receiver_hello(links[0], rtoken)  # attaches are taken in the order they came: the first is control
    w.receiver_hello(links[1], rtoken)
    assert w.read_frame(links[0])[0] == w.MANIFEST
    return [req] + links


def test_held_connect_back_and_certificate_gets_add_no_thread(root, tmp_path, pki):
    s = serve(root, pki, "--threads", "1", "-v")
    held = []
    try:
        # Warm: one of each kind end to end, so every thread the server makes at all is made.
        assert get(s, "one", tmp_path / "w1", "--connect-back").returncode == 0
        assert get(s, "one", tmp_path / "w2", "--ca", pki["ca"]).returncode == 0
        assert wait_for(lambda: stats(s)["get_sessions_open"] == 0, 60)
        base = threads(s)
        for i in range(4):
            held.append(hold_connect_back(s, f"back-{i}"))
            held.append(hold_certificate(s, pki, f"cert-{i}"))
        st = stats(s)
        assert st["get_sessions_open"] == 8, st  # all eight are mid-transfer now
        # Before h15t each held 1 + 1 threads of its own (send()'s, on a session thread).
        assert threads(s) <= base, (threads(s), base)
        # The ring still serves the others meanwhile.
        r = get(s, "one", tmp_path / "other")
        assert r.returncode == 0, r.stderr
        for socks in held:
            for c in socks:
                c.close()
        held = []
        assert wait_for(lambda: stats(s)["get_sessions_open"] == 0, 120), stats(s)
        st = stats(s)
        assert st["get_sessions_thread"] == 0 and st["get_sessions_ring"] == 11, st
        assert st["get_sessions_ring_connect_back"] == 5 and st["get_sessions_certificate"] == 5, st
        rc, _, err = s.stop()
        assert rc == 0, err
        assert "connected back to 127.0.0.1:" in err and "(--connect-back)" in err, err
        assert "certificate mode (the request's TLS handshake and records on the get ring)" in err, err
        assert "session thread" not in err, err
    finally:
        for socks in held:
            for c in socks:
                c.close()
        s.kill()


def test_a_connect_back_to_a_port_that_never_answers_fails_by_its_deadline(root, tmp_path, pki):
    """A listener whose accept queue is full (backlog 0, one connection never accepted) drops
    every SYN: the ring's connect waits, bounded by its deadline, and the ring serves others."""
    s = serve(root, pki, "--threads", "1", "-v")
    full = socket.socket()
    filler = socket.socket()
    try:
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        filler.connect(full.getsockname())  # fills the queue: later SYNs are dropped
        req = socket.create_connection(("127.0.0.1", sluice_port(s)), timeout=120)
        w.read_get_frame(req, w.GET_HELLO)
        req.sendall(w.get_request(1, "big.bin", os.urandom(16), "never", reply_port=full.getsockname()[1]))
        assert w.read_get_frame(req, w.GET_REPLY)[0] == 0
        # Another get on the same (only) ring, while that connect is pending.
        r = get(s, "one", tmp_path / "other")
        assert r.returncode == 0, r.stderr
        assert (tmp_path / "other" / "one").read_bytes() == b"x"
        ready, _, _ = select.select([req], [], [], 120)
        assert ready, "no GET_DONE within 120 s"
        p = w.read_get_frame(req, w.GET_DONE)
        status, n = struct.unpack_from("<II", p)
        msg = p[8:8 + n].decode(errors="replace")
        assert status == 1 + 3, (status, msg)  # network
        assert "connecting back to the client's receiver at 127.0.0.1:" in msg and "no connection within" in msg, msg
        req.close()
        st = stats(s)
        assert st["get_sessions_failed"] == 1 and st["get_sessions_open"] == 0, st
    finally:
        filler.close()
        full.close()
        s.kill()


def test_a_client_certificate_that_no_pin_names_is_refused(root, tmp_path, pki):
    s = serve(root, pki, "--pin", pin_of(pki["client"]), "-v")
    try:
        r = get(s, "one", tmp_path / "a", "--ca", pki["ca"], "--cert", pki["other"], "--key", pki["other_key"])
        assert r.returncode == 3, r.stderr
        assert "refused this side's certificate" in r.stderr, r.stderr
        assert list((tmp_path / "a").iterdir()) == []
        r = get(s, "big.bin", tmp_path / "b", "--ca", pki["ca"], "--cert", pki["client"], "--key", pki["client_key"])
        assert r.returncode == 0, r.stderr
        assert file_hash(tmp_path / "b" / "big.bin") == file_hash(root / "big.bin")
        st = stats(s)
        assert st["get_certificate_failed"] == 1 and st["get_sessions_certificate"] == 2, st
        assert st["get_sessions_ring"] == 1 and st["get_sessions_thread"] == 0, st
        rc, _, err = s.stop()
        assert "matches no --pin" in err and pin_of(pki["other"]) in err, err
    finally:
        s.kill()


def test_a_connect_back_get_of_many_streams_arrives_whole(root, tmp_path, pki):
    """40 streams connected back, encrypted: more than the 16 pending connections the client's
    receiver keeps per source (its flood bound), so the ring must open them a few at a time."""
    s = serve(root, pki, "--threads", "1")
    try:
        r = get(s, "big.bin", tmp_path / "a", "--connect-back", "--streams", "40", "--encrypt")
        assert r.returncode == 0, r.stderr
        assert file_hash(tmp_path / "a" / "big.bin") == file_hash(root / "big.bin")
        st = stats(s)
        assert st["get_sessions_ring_connect_back"] == 1 and st["get_sessions_ring_encrypted"] == 1, st
        assert st["get_sessions_failed"] == 0, st
    finally:
        s.kill()
