"""A hand-written pusher against `sluice serve --port --allow-upload` (PUSH_REQUEST,
docs/protocol.md "Pushes"), for the hostile-push probes (test_push_hostile*.py): the serve under
test with short deadlines, its request and attach frames built field by field, and a check that
it still serves HTTP and a real push."""
import hashlib
import hmac
import json
import os
import socket
import struct
import urllib.request

import pytest

import sluice_wire as w
from conftest import run_sluice
from serve_client import Server

TOKEN = "testtoken"
HANG = 60
REQUEST_TIMEOUT = 2  # --request-timeout: the first frame's deadline
SEND_TIMEOUT = 3  # --send-timeout: a push's receiver's idle timeout

@pytest.fixture
def served(tmp_path):
    d = tmp_path / "served"
    d.mkdir()
    (d / "page.txt").write_text("still served\n")
    return d


@pytest.fixture
def server(served):
    s = Server(served, "--port", "0", "--allow-upload", "--max-pushes", "2", "--request-timeout", str(REQUEST_TIMEOUT),
               "--send-timeout", str(SEND_TIMEOUT), "-v")
    s.sport = int(s.sluice_base.rsplit(":", 1)[1].rstrip("/"))
    s.root = served
    yield s
    s.kill()


def stats(s):
    return json.loads(urllib.request.urlopen(s.url("/_stats"), timeout=30).read())


def still_serving(s, tmp_path, name="probe"):
    """The serve answers HTTP and takes a real push while (or after) a probe holds it."""
    assert urllib.request.urlopen(s.url("/page.txt"), timeout=30).read() == b"still served\n"
    src = tmp_path / f"real-{name}"
    src.write_bytes(os.urandom(70000))
    r = run_sluice("send", src, s.sluice_base + f"?token={TOKEN}", timeout=HANG)
    assert r.returncode == 0, r.stderr
    assert (s.root / src.name).read_bytes() == src.read_bytes()


def hello(port):
    """A connection to the sluice port and its GET_HELLO nonce."""
    c = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    h = w.read_get_frame(c, w.GET_HELLO)
    return c, h[-16:]


def reply(c):
    """(status, message) of the GET_REPLY on c."""
    p = w.read_get_frame(c, w.GET_REPLY)
    (n,) = struct.unpack_from("<I", p, 1 + 32 + 16)
    return p[0], p[1 + 32 + 16 + 4:1 + 32 + 16 + 4 + n].decode(errors="replace")


def closed_by_server(c, within=HANG):
    c.settimeout(within)
    try:
        while c.recv(1 << 16):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def raw_request(token, hello_nonce, streams, nonce, receiver_token, path=b"", reply_port=0, features=None):
    """PUSH_REQUEST with every field the caller's (sluice_wire.push_request fixes most)."""
    if features is None:
        features = w.FEATURE_GET_SESSIONS | w.GET_BOUND_TRANSFER | w.GET_CLEAR
    tok = receiver_token if isinstance(receiver_token, bytes) else receiver_token.encode()
    body = (struct.pack("<HBHH", w.VERSION, features, streams, reply_port) + nonce + struct.pack("<H", len(tok)) + tok
            + struct.pack("<H", len(path)) + path)
    unsigned = w.frame(w.PUSH_REQUEST, body + bytes(32))[:-32]
    mac = hmac.new(token.encode(), b"sluice-v1 client hello" + hello_nonce + unsigned, hashlib.sha256).digest()
    return unsigned + mac


class Pusher:
    """A hand-written push: the request (answered ok), its control connection attached and
    through the handshake; then what the caller plays."""

    def __init__(self, port, streams=1, hello_count=None):
        self.port = port
        self.req, n = hello(port)
        self.nonce, self.rtok = os.urandom(16), os.urandom(16).hex()
        self.req.sendall(w.push_request(TOKEN, n, streams, self.nonce, self.rtok))
        status, msg = reply(self.req)
        assert status == 0, msg
        self.key = w.push_transfer_token(TOKEN, self.nonce, self.rtok)
        self.tid = os.urandom(16)
        self.count = streams if hello_count is None else hello_count
        self.ctl = self.attach()
        assert w.sender_hello(self.ctl, self.key, 0, 0, self.count, self.tid) == 0

    def attach(self, nonce=None):
        c, _ = hello(self.port)
        c.sendall(w.get_attach(nonce or self.nonce))
        return c

    def stream(self, index):
        d = self.attach()
        assert w.sender_hello(d, self.key, 1, index, self.count, self.tid) == 0
        return d

    def manifest(self, entries, total):
        self.ctl.sendall(w.manifest(0, entries))
        ftype, payload = w.read_frame(self.ctl)
        assert ftype == w.MANIFEST_ACK, (hex(ftype), payload)
        self.ctl.sendall(w.frame(w.MANIFEST_END, struct.pack("<IIQQ", 1, 0, len(entries), total)))

    def finish(self, streams, blocks, nbytes):
        """STREAM_END on each data stream (all blocks on the first), TRANSFER_END; FINAL_STATUS's status."""
        for i, d in enumerate(streams):
            d.sendall(w.frame(w.STREAM_END, struct.pack("<QQ", blocks if i == 0 else 0, nbytes if i == 0 else 0)))
        self.ctl.sendall(w.frame(w.TRANSFER_END, struct.pack("<IIQQ", len(streams), 0, blocks, nbytes)))
        while True:
            ftype, payload = w.read_frame(self.ctl)
            if ftype == w.FINAL_STATUS:
                return struct.unpack_from("<I", payload)[0]
            assert ftype in (w.ALL_VERIFIED, w.MANIFEST_ACK), hex(ftype)


def manifest_raw(seq, entries, count=None):
    """MANIFEST with byte paths, and a count of the caller's (entries: (id, kind, path bytes, size))."""
    body = struct.pack("<II", seq, len(entries) if count is None else count)
    for fid, kind, path, size in entries:
        body += struct.pack("<QQqIBBHHH", fid, size, 0, 0o644, kind, 0, len(path), 0, 0) + path
    return w.frame(w.MANIFEST, body)
