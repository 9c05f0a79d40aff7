"""A hostile pusher against `sluice serve --port --allow-upload` (PUSH_REQUEST, docs/protocol.md
"Pushes"), played by hand (sluice_wire.py) against the protocol only, so the probes hold
whichever thread or ring receives a push: truncated and oversized request frames, counts and
lengths at and past every bound, paths that are not relative names (refused, and escaped in the
serve's -v log), attaches beyond the request's count and onto another push's nonce, a handshake
claiming more streams than the request asked, a push that stops mid-block or before
TRANSFER_END, and slowloris on each phase. For every probe: the serve stays up and serves others
meanwhile (HTTP and a real push), refuses with a clear message or closes by its deadline, and
leaves nothing under the final name of a file it did not receive whole. No timed assertions:
every wait_for is a bound against a hang."""
import hashlib
import hmac
import json
import os
import socket
import struct
import time
import urllib.request

import pytest

import sluice_wire as w
from conftest import leftovers, run_sluice, wait_for
from serve_client import Server

TOKEN = "testtoken"
HANG = 60
REQUEST_TIMEOUT = 2  # --request-timeout: the first frame's deadline
SEND_TIMEOUT = 3  # --send-timeout: a push's receiver's idle timeout

try:
    import ctypes
    import ctypes.util

    _xxh = ctypes.CDLL(ctypes.util.find_library("xxhash"))
    _xxh.XXH3_64bits.restype = ctypes.c_uint64
    _xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
except (OSError, TypeError):
    pytest.skip("libxxhash (a build dependency of sluice) is needed for XXH3 checksums", allow_module_level=True)


def block(file_id, offset, data):
    return w.frame(w.BLOCK, struct.pack("<QQQ", file_id, offset, _xxh.XXH3_64bits(data, len(data))) + data)


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


# ------------------------------------------------------------------ the request ---------------


def test_truncated_oversized_and_garbage_requests(server, served, tmp_path):
    port = server.sport
    # A header that promises more than ever comes: closed by the request deadline, not held.
    c, n = hello(port)
    whole = w.push_request(TOKEN, n, 1, os.urandom(16), "r" * 32)
    c.sendall(whole[:len(whole) // 2])
    # Oversized: a length past the largest first frame is refused at the header, at once.
    big, _ = hello(port)
    big.sendall(struct.pack("<BBHI", w.PUSH_REQUEST, 0, 0, 1 << 30))
    # An unknown frame type as the first frame.
    odd, _ = hello(port)
    odd.sendall(struct.pack("<BBHI", 0x7F, 0, 0, 4) + b"abcd")
    still_serving(server, tmp_path, "during")
    for s in (c, big, odd):
        assert closed_by_server(s)
    st = stats(server)
    assert st["pushes_open"] == 0
    assert leftovers(served) == []


@pytest.mark.parametrize("streams", [0, 129, 65535])
def test_stream_counts_past_the_bound_are_refused(server, served, tmp_path, streams):
    c, n = hello(server.sport)
    c.sendall(raw_request(TOKEN, n, streams, os.urandom(16), "r" * 32))
    # Refused with a message naming the count, or closed: never admitted.
    try:
        status, msg = reply(c)
        assert status != 0 and str(streams) in msg, msg
    except (ConnectionError, AssertionError) as e:
        if isinstance(e, AssertionError) and "streams" not in str(e):
            raise
    assert stats(server)["pushes_open"] == 0
    still_serving(server, tmp_path)


@pytest.mark.parametrize("path", [b"../escape", b"/etc/passwd", b"a\x00b", b"\x1b[31mred\x07", b"\xff\xfe bad utf-8",
                                  b"x" * 4096])
def test_a_push_naming_a_path_is_refused_and_its_text_escaped_in_the_log(server, served, tmp_path, path):
    c, n = hello(server.sport)
    c.sendall(raw_request(TOKEN, n, 1, os.urandom(16), "r" * 32, path=path))
    try:
        status, msg = reply(c)
        assert status != 0, msg
        assert "\x1b" not in msg and "\x00" not in msg
    except ConnectionError:
        pass  # closed without a reply: refused all the same
    still_serving(server, tmp_path)
    rc, _, err = server.stop()
    assert rc == 0, err
    assert "\x1b" not in err and "\x00" not in err and "\x07" not in err, repr(err[-2000:])
    assert sorted(p.name for p in served.iterdir()) == ["page.txt", "real-probe"]


def test_receiver_token_and_reply_port_and_features_out_of_bounds(server, served, tmp_path):
    cases = [
        dict(receiver_token=b"t" * 129),  # past kMaxReceiverTokenBytes
        dict(receiver_token=b""),
        dict(reply_port=5),  # a push attaches; it never has the server connect out
        dict(features=w.FEATURE_GET_SESSIONS),  # no bound transfer tokens
        dict(bad_mac=True),
    ]
    for k in cases:
        c, n = hello(server.sport)
        bad_mac = k.pop("bad_mac", False)
        args = dict(receiver_token="r" * 32)
        args.update(k)
        frame = raw_request("wrong" if bad_mac else TOKEN, n, 1, os.urandom(16), **args)
        c.sendall(frame)
        try:
            status, msg = reply(c)
            assert status != 0, (k, msg)
        except ConnectionError:
            pass
        c.close()
    assert stats(server)["pushes_open"] == 0
    still_serving(server, tmp_path)


def test_a_replayed_nonce_is_refused_while_its_push_runs(server, served, tmp_path):
    p = Pusher(server.sport)
    c, n = hello(server.sport)
    c.sendall(w.push_request(TOKEN, n, 1, p.nonce, p.rtok))
    status, msg = reply(c)
    assert status != 0 and "nonce" in msg, msg
    data = os.urandom(5000)
    p.manifest([(0, w.FILE, "one", len(data), "")], len(data))
    d = p.stream(1)
    d.sendall(block(0, 0, data))
    assert p.finish([d], 1, len(data)) == 0
    assert (served / "one").read_bytes() == data


# ------------------------------------------------------------------ attaches ------------------


def test_attaches_past_the_count_and_junk_on_a_push_s_nonce_do_not_break_it(server, served, tmp_path):
    """Junk attached with the push's nonce (it travels in clear in the request; a handshake
    with the wrong token, garbage) must not end the push or take its streams' places: before,
    the serve counted every attach against 1 + 2 x streams, and two junk connections left the
    pusher's own data stream refused. Connections attached past that count go to the push's
    receiver, whose handshake table bounds them, and close with the push."""
    p = Pusher(server.sport)
    junk = []
    # A handshake keyed with the wrong token, on the push's nonce.
    j = p.attach()
    try:
        st = w.sender_hello(j, "not-the-key", 1, 1, 1, p.tid)
        assert st != 0
    except (ConnectionError, AssertionError, struct.error):
        pass
    junk.append(j)
    # Garbage in place of a ClientHello.
    g = p.attach()
    g.sendall(os.urandom(200))
    junk.append(g)
    data = os.urandom(300000)
    p.manifest([(0, w.FILE, "kept", len(data), "")], len(data))
    try:
        d = p.stream(1)
    except (ConnectionError, AssertionError, OSError) as e:
        pytest.fail(f"junk on the push's nonce took its stream's place: {e!r}")
    # Past the request's count: held by the receiver's handshake table, closed with the push.
    extra = [p.attach() for _ in range(3)]
    d.sendall(block(0, 0, data))
    assert p.finish([d], 1, len(data)) == 0
    assert (served / "kept").read_bytes() == data
    for e in extra:
        assert closed_by_server(e)
    assert wait_for(lambda: stats(server)["pushes_open"] == 0, HANG)
    assert leftovers(served) == []


def test_a_handshake_claiming_more_streams_than_the_request_is_refused(server, served, tmp_path):
    """The request asked for 1 stream (what the serve admitted it for); the control connection's
    ClientHello claims 8: refused (bad stream), nothing is written, the push ends by its join
    deadline, and the serve goes on. Before, the attaches were what held a push to its count, and
    counting them let junk on the push's nonce take its streams' places."""
    req, n = hello(server.sport)
    nonce, rtok = os.urandom(16), os.urandom(16).hex()
    req.sendall(w.push_request(TOKEN, n, 1, nonce, rtok))
    status, msg = reply(req)
    assert status == 0, msg
    c, _ = hello(server.sport)
    c.sendall(w.get_attach(nonce))
    assert w.sender_hello(c, w.push_transfer_token(TOKEN, nonce, rtok), 0, 0, 8, os.urandom(16)) == 4  # bad stream
    assert wait_for(lambda: stats(server)["pushes_open"] == 0 and stats(server)["pushes_failed"] == 1, HANG)
    still_serving(server, tmp_path)
    assert sorted(p.name for p in served.iterdir()) == ["page.txt", "real-probe"]


# ------------------------------------------------------------------ transfers cut short --------


@pytest.mark.parametrize("stop", ["mid-block", "before-transfer-end", "mid-manifest"])
def test_a_push_that_stops_leaves_nothing_presented_as_complete(server, served, tmp_path, stop):
    p = Pusher(server.sport)
    data = os.urandom(3 << 20)
    if stop == "mid-manifest":
        frame = w.manifest(0, [(0, w.FILE, "half", len(data), "")])
        p.ctl.sendall(frame[:len(frame) // 2])
    else:
        p.manifest([(0, w.FILE, "half", len(data), "")], len(data))
        d = p.stream(1)
        b = block(0, 0, data)
        d.sendall(b[:len(b) // 2] if stop == "mid-block" else b)
    # Then silence, the connections left open: the push's idle deadline ends it.
    assert wait_for(lambda: stats(server)["pushes_failed"] >= 1 and stats(server)["pushes_open"] == 0, HANG)
    if stop == "before-transfer-end":
        # Every byte arrived and verified: the file is in place, whole (docs/guarantees.md).
        assert (served / "half").read_bytes() == data
    else:
        assert not (served / "half").exists()
    still_serving(server, tmp_path)


# ------------------------------------------------------------------ slowloris -----------------


def test_slowloris_on_every_phase_is_closed_by_a_deadline(server, served, tmp_path):
    """A byte at a time, slower than the server wants the whole: the request frame, the attach
    frame, the handshake on an attached connection. Each ends by a deadline (HANG only bounds a
    hang), and meanwhile the serve takes a real push and answers HTTP."""
    port = server.sport
    slow = []
    c, n = hello(port)
    slow.append((c, w.push_request(TOKEN, n, 1, os.urandom(16), "r" * 32)))
    p = Pusher(server.sport)  # its attach, then its data stream's handshake, trickled
    a, _ = hello(port)
    slow.append((a, w.get_attach(os.urandom(16))))  # an unknown nonce, trickled
    h = p.attach()
    slow.append((h, None))  # the handshake: ServerHello read, then a byte at a time
    h.settimeout(HANG)
    w.recv_exact(h, 32)
    hello_bytes = os.urandom(112)
    start = time.monotonic()
    done = [False] * len(slow)
    i = 0
    while not all(done) and time.monotonic() - start < HANG:
        for k, (s, payload) in enumerate(slow):
            if done[k]:
                continue
            data = payload if payload is not None else hello_bytes
            try:
                s.sendall(data[i % len(data):i % len(data) + 1])
            except OSError:
                done[k] = True
        i += 1
        time.sleep(0.25)
        if i == 4:
            still_serving(server, tmp_path, "during")
    assert all(done), "a trickled phase was held open past every deadline"
    assert wait_for(lambda: stats(server)["pushes_open"] == 0, HANG)
    assert leftovers(served) == []


# ------------------------------------------------------------------ the manifest and blocks ---


def manifest_raw(seq, entries, count=None):
    """MANIFEST with byte paths, and a count of the caller's (entries: (id, kind, path bytes, size))."""
    body = struct.pack("<II", seq, len(entries) if count is None else count)
    for fid, kind, path, size in entries:
        body += struct.pack("<QQqIBBHHH", fid, size, 0, 0o644, kind, 0, len(path), 0, 0) + path
    return w.frame(w.MANIFEST, body)


# Refused by the receiver, naming the rule (the last one's escape sequence must reach the
# serve's log escaped); names with control characters or bytes that are not UTF-8 are names a
# file may have: stored byte for byte, and escaped wherever printed (STORED_NAMES).
REFUSED_NAMES = [b"../up", b"/abs", b"a/../../b", b"a\x00b", b"", b"x" * 4096, b"\x1b]0;title\x07/../x"]
STORED_NAMES = [b"\x1b]0;title\x07x", b"\xff\xfe", b"ok/\x1b[2Jclear"]


def test_hostile_manifests_and_blocks_fail_the_push_alone(server, served, tmp_path):
    """Each push below breaks a rule of the manifest or the blocks; it fails (ABORT naming the
    rule, or closed), nothing of it lands in DIR or outside it, the serve's -v log shows the
    peer's text escaped, and the serve takes a real push after them all."""
    probes = [[manifest_raw(0, [(0, w.FILE, name, 1)])] for name in REFUSED_NAMES]
    probes.append([manifest_raw(0, [(0, w.FILE, b"f", 1)], count=1_000_000)])  # a count its bytes do not hold
    probes.append([manifest_raw(0, [(0, w.FILE, b"f", 1), (0, w.FILE, b"g", 1)])])  # a duplicate id
    probes.append([manifest_raw(0, [(0, 9, b"f", 1)])])  # an unknown kind
    failed = 0
    for frames in probes:
        p = Pusher(server.sport)
        try:
            for f in frames:
                p.ctl.sendall(f)
            p.ctl.settimeout(HANG)
            ftype, payload = w.read_frame(p.ctl)
            assert ftype == w.ABORT, (hex(ftype), payload)
        except ConnectionError:
            pass  # closed without a word: refused all the same
        failed += 1
        p.ctl.close()
        p.req.close()
    # Blocks that break the manifest's promise: past the file's end, for an id never announced.
    for bad in (lambda: block(0, 4000, b"y" * 200), lambda: block(7, 0, b"z" * 10)):
        p = Pusher(server.sport)
        p.manifest([(0, w.FILE, "small", 4096, "")], 4096)
        d = p.stream(1)
        d.sendall(bad())
        try:
            ftype, payload = w.read_frame(p.ctl)
            assert ftype == w.ABORT, (hex(ftype), payload)
        except ConnectionError:
            pass
        failed += 1
    assert wait_for(lambda: stats(server)["pushes_failed"] >= failed and stats(server)["pushes_open"] == 0, HANG)
    still_serving(server, tmp_path)
    rc, _, err = server.stop()
    assert rc == 0, err
    for raw in ("\x1b", "\x07", "\x00"):
        assert raw not in err, repr(err[-3000:])
    assert sorted(p.name for p in served.iterdir()) == ["page.txt", "real-probe"]
    assert not (served.parent / "up").exists() and not (served.parent / "b").exists()


def test_names_with_control_characters_or_not_utf8_are_stored_as_sent(server, served, tmp_path):
    for k, name in enumerate(STORED_NAMES):
        p = Pusher(server.sport)
        data = bytes([65 + k]) * (k + 1)
        p.ctl.sendall(manifest_raw(0, [(0, w.FILE, name, len(data))]))
        ftype, payload = w.read_frame(p.ctl)
        assert ftype == w.MANIFEST_ACK, (hex(ftype), payload)
        p.ctl.sendall(w.frame(w.MANIFEST_END, struct.pack("<IIQQ", 1, 0, 1, len(data))))
        d = p.stream(1)
        d.sendall(block(0, 0, data))
        assert p.finish([d], 1, len(data)) == 0
        assert (bytes(served) + b"/" + name and open(bytes(served) + b"/" + name, "rb").read()) == data
    rc, _, err = server.stop()
    assert rc == 0, err
    for raw in ("\x1b", "\x07"):
        assert raw not in err, repr(err[-3000:])
    assert leftovers(served) == []
