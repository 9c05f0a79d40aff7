"""Bound transfer tokens (h18p, docs/protocol.md "Get sessions"): in token mode without
certificates GET_REQUEST carries the client's one-time receiver_token in clear. An active man
in the middle reads it; so the transfer must be keyed with what only the two token holders can
compute (HMAC of the server's token over the request's nonce and receiver_token), never with
receiver_token itself. What must hold, each asserted on the wire:
- a MITM that relays the genuine request and reply, then answers the client's attached
  connections with a ClientHello keyed by the receiver_token it read, is refused (bad token);
  the same MITM keyed by the bound token (which needs the server's token) is admitted, so the
  refusal is the key's doing;
- a MITM that removes the offer (GET_HELLO bit 7) or says no token is needed ends the get
  before any stream (exit 3, the reason named);
- the server keys its sender with the bound token for a client that sets request bit 7, with
  receiver_token for a client from before, and MACs GET_REPLY accordingly;
- a server from before (no offer) still serves a new client: the request then carries the
  token the client's receiver admits.
Everything here is driven step by step (no timing): each side waits for the other's bytes."""
import hashlib
import hmac
import os
import select
import socket
import struct
import subprocess
import threading

import pytest

import sluice_wire as w
from conftest import SLUICE, kill_process
from serve_client import Server

TOKEN = "testtoken"
BOUND = 1 << 7  # GET_HELLO features bit 7 / GET_REQUEST features bit 7
CLEAR = 1 << 1  # GET_REQUEST bit 1: the client's receiver does not encrypt (loopback)
HELLO_BYTES = 8 + 8 + 2 + 2 + 1 + 16


def transfer_token(token, nonce, rtoken):
    return hmac.new(token.encode(), b"sluice-v1 get transfer" + nonce + rtoken.encode(), hashlib.sha256).hexdigest()


def reply_mac_bound(token, cnonce, snonce, features):
    return hmac.new(token.encode(), b"sluice-v1 get reply bound" + cnonce + snonce + struct.pack("<H", features),
                    hashlib.sha256).digest()


def reply_mac_old(token, cnonce, snonce):
    return hmac.new(token.encode(), b"sluice-v1 server auth" + cnonce + snonce, hashlib.sha256).digest()


def hello_fields(hello):
    """(features, token_required, nonce) of a whole GET_HELLO frame."""
    features, required = struct.unpack_from("<HB", hello, 18)
    return features, required, hello[21:37]


def read_frame_bytes(s):
    hdr = w.recv_exact(s, 8)
    return hdr + w.recv_exact(s, struct.unpack_from("<I", hdr, 4)[0])


def parse_request(frame):
    """(features, streams, reply_port, nonce, receiver_token) of a whole GET_REQUEST frame."""
    p = frame[8:]
    _, features, streams, port = struct.unpack_from("<HBHH", p, 0)
    nonce = p[7:23]
    (tlen,) = struct.unpack_from("<H", p, 23)
    return features, streams, port, nonce, p[25:25 + tlen].decode()


def signed_request(token, snonce, features, streams, path, nonce, rtoken, reply_port=0):
    tok, pb = rtoken.encode(), path.encode()
    body = (struct.pack("<HBHH", w.VERSION, features, streams, reply_port) + nonce + struct.pack("<H", len(tok)) + tok
            + struct.pack("<H", len(pb)) + pb)
    unsigned = w.frame(w.GET_REQUEST, body + bytes(32))[:-32]
    return unsigned + hmac.new(token.encode(), b"sluice-v1 client hello" + snonce + unsigned, hashlib.sha256).digest()


def client_hello(key, server_hello, role, index, count):
    """A sender's ClientHello answering server_hello, its MAC keyed by key."""
    signed = w.MAGIC + struct.pack("<HBBHH", w.VERSION, role, 0, index, count) + os.urandom(16) + os.urandom(16)
    return signed + hmac.new(key.encode(), b"sluice-v1 client hello" + server_hello[16:32] + signed, hashlib.sha256).digest()


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "www"
    (r / "tree").mkdir(parents=True)
    (r / "one").write_bytes(os.urandom(5000))
    (r / "tree" / "a").write_bytes(os.urandom(1000))
    return r


class Mitm:
    """A man in the middle on the get port: relays the request connection (GET_HELLO through
    `alter`), keeps what GET_REQUEST says, relays GET_REPLY, then takes the client's attached
    connections itself and plays the server's sender on the first with a ClientHello keyed by
    key(request). Every read has a 60 s deadline; the thread ends on any failure."""

    def __init__(self, upstream, alter=lambda hello: hello, key=None, streams=1):
        self.upstream, self.alter, self.key, self.streams = upstream, alter, key, streams
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(60)
        self.port = self.listener.getsockname()[1]
        self.request = self.reply = self.auth = None
        self.error = None
        self.socks = [self.listener]
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def accept(self):
        c, _ = self.listener.accept()
        c.settimeout(60)
        self.socks.append(c)
        return c

    def run(self):
        try:
            c = self.accept()
            up = socket.create_connection(("127.0.0.1", self.upstream), timeout=60)
            self.socks.append(up)
            hello = w.recv_exact(up, HELLO_BYTES)
            c.sendall(self.alter(hello))
            req = read_frame_bytes(c)
            self.request = parse_request(req)
            up.sendall(req)
            reply = read_frame_bytes(up)
            self.reply = reply
            c.sendall(reply)
            if self.key is None:
                return
            links = []
            for _ in range(1 + self.streams):
                a = self.accept()
                a.sendall(hello)
                w.read_get_frame(a, w.GET_ATTACH)
                links.append(a)
            sh = w.recv_exact(links[0], 32)  # the client's receiver speaks first
            links[0].sendall(client_hello(self.key(self.request), sh, 0, 0, self.streams))
            self.auth = w.recv_exact(links[0], 40)
        except Exception as e:  # the test names it
            self.error = e

    def close(self):
        for s in self.socks:
            s.close()


def start_get(port, dest, *args):
    return subprocess.Popen([SLUICE, "get", f"sluice://127.0.0.1:{port}/one?token={TOKEN}", str(dest), "--streams", "1",
                             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("keyed_by", ["receiver_token", "bound"])
def test_a_mitm_holding_the_receiver_token_is_refused(root, tmp_path, keyed_by):
    s = Server(root, "--port", "0")
    upstream = int(s.sluice_base.rstrip("/").rsplit(":", 1)[1])
    dest = tmp_path / "dest"
    dest.mkdir()
    if keyed_by == "receiver_token":
        key = lambda q: q[4]  # what an eavesdropper on GET_REQUEST reads
    else:
        key = lambda q: transfer_token(TOKEN, q[3], q[4])  # needs the server's token
    m = Mitm(upstream, key=key)
    client = start_get(m.port, dest)
    try:
        m.thread.join(90)
        assert not m.thread.is_alive() and m.error is None, m.error
        assert m.request[0] & BOUND, "a client with a token always sets request bit 7"
        assert m.reply[8] == 0, "the genuine reply is ok"
        if keyed_by == "receiver_token":
            assert m.auth[0] == 1, f"the receiver admitted a ClientHello keyed by the request's receiver_token: {m.auth[0]}"
        else:
            assert m.auth[0] == 0, f"the bound token is the receiver's key, yet refused: {m.auth[0]}"
    finally:
        kill_process(client)
        m.close()
        s.stop()
    assert not (dest / "one").exists()


def strip_offer(hello):
    features, _, _ = hello_fields(hello)
    return hello[:18] + struct.pack("<H", features & ~BOUND) + hello[20:]


def say_public(hello):
    return hello[:20] + b"\x00" + hello[21:]


@pytest.mark.parametrize("alter,says", [(strip_offer, "GET_HELLO was altered on the way"),
                                        (say_public, "does not ask for a token")])
def test_an_altered_hello_ends_the_get_before_any_stream(root, tmp_path, alter, says):
    s = Server(root, "--port", "0")
    upstream = int(s.sluice_base.rstrip("/").rsplit(":", 1)[1])
    dest = tmp_path / "dest"
    dest.mkdir()
    m = Mitm(upstream, alter=alter)
    client = start_get(m.port, dest)
    try:
        _, err = client.communicate(timeout=90)
        assert client.returncode == 3, err
        assert says in err
        m.close()  # a client that refused the hello sent no request: the relay ends here
        m.thread.join(90)
    finally:
        kill_process(client)
        m.close()
        s.stop()
    assert not (dest / "one").exists()


def sender_key(links, candidates):
    """The receiver's side on every attached link: ServerHello out, each ClientHello read as it
    comes; returns which candidate key makes its MAC (the same for every link)."""
    nonces = {}
    for c in links:
        nonces[c] = os.urandom(16)
        c.sendall(w.MAGIC + struct.pack("<HHI", w.VERSION, 0, 0) + nonces[c])
    keys = set()
    pending = list(links)
    while pending:
        ready, _, _ = select.select(pending, [], [], 60)
        assert ready, "no ClientHello within 60 s"
        for c in ready:
            h = w.recv_exact(c, 80)
            found = [k for k in candidates if hmac.compare_digest(
                h[48:], hmac.new(k.encode(), b"sluice-v1 client hello" + nonces[c] + h[:48], hashlib.sha256).digest())]
            assert len(found) == 1, "the sender's ClientHello is keyed by neither candidate"
            keys.add(found[0])
            c.sendall(bytes(8) + hmac.new(found[0].encode(), b"sluice-v1 server auth" + h[32:48] + nonces[c],
                                          hashlib.sha256).digest())
            pending.remove(c)
    assert len(keys) == 1
    return keys.pop()


@pytest.mark.parametrize("path,args", [("one", []), ("tree", []),  # the get ring
                                       ("tree", ["--get-rate-limit", "1G"])])  # the ring, paced
@pytest.mark.parametrize("bound", [True, False])   # a client of now, and one from before
def test_the_server_keys_its_sender_as_the_request_asks(root, path, args, bound):
    s = Server(root, "--port", "0", *args)
    port = int(s.sluice_base.rstrip("/").rsplit(":", 1)[1])
    socks = []
    try:
        req = socket.create_connection(("127.0.0.1", port), timeout=60)
        socks.append(req)
        hello = w.recv_exact(req, HELLO_BYTES)
        features, required, snonce = hello_fields(hello)
        assert required == 1 and features & BOUND, "a server with a token offers bound transfer tokens"
        nonce, rtoken = os.urandom(16), "rt-" + os.urandom(8).hex()
        flags = w.FEATURE_GET_SESSIONS | CLEAR | (BOUND if bound else 0)
        req.sendall(signed_request(TOKEN, snonce, flags, 1, path, nonce, rtoken))
        reply = w.read_get_frame(req, w.GET_REPLY)
        assert reply[0] == 0, reply
        want = reply_mac_bound(TOKEN, nonce, snonce, features) if bound else reply_mac_old(TOKEN, nonce, snonce)
        assert reply[1:33] == want
        links = []
        for _ in range(2):
            c = socket.create_connection(("127.0.0.1", port), timeout=60)
            socks.append(c)
            w.read_get_frame(c, w.GET_HELLO)
            c.sendall(w.get_attach(nonce))
            links.append(c)
        derived = transfer_token(TOKEN, nonce, rtoken)
        assert sender_key(links, [rtoken, derived]) == (derived if bound else rtoken)
    finally:
        for c in socks:
            c.close()
        s.stop()


def test_a_server_from_before_still_serves(tmp_path):
    """A server without the offer: the client's request carries the token its receiver admits
    (in clear, as before: that server keys the transfer with it), and the old reply MAC passes."""
    dest = tmp_path / "dest"
    dest.mkdir()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(60)
    client = start_get(listener.getsockname()[1], dest, "--connect-back", "--bind", "127.0.0.1")
    socks = [listener]
    try:
        c, _ = listener.accept()
        c.settimeout(60)
        socks.append(c)
        snonce = os.urandom(16)
        c.sendall(w.frame(w.GET_HELLO, w.MAGIC + struct.pack("<HHB", w.VERSION, w.FEATURE_GET_SESSIONS, 1) + snonce))
        req = read_frame_bytes(c)
        assert hmac.compare_digest(req[-32:], hmac.new(TOKEN.encode(), b"sluice-v1 client hello" + snonce + req[:-32],
                                                       hashlib.sha256).digest())
        features, _, reply_port, nonce, rtoken = parse_request(req)
        assert features & BOUND and reply_port != 0
        c.sendall(w.frame(w.GET_REPLY, b"\x00" + reply_mac_old(TOKEN, nonce, snonce) + struct.pack("<QQI", 1, 1, 0)))
        s, status = w.handshake("127.0.0.1", reply_port, rtoken, 0, 0, 1, os.urandom(16))
        socks.append(s)
        assert status == 0, f"the client's receiver refused the token its request carried: {status}"
    finally:
        kill_process(client)
        for x in socks:
            x.close()
