"""A sustained flood of unauthenticated connections must not evict a sender whose handshake
is in progress (issue 14, item 7), neither its control connection nor its data streams."""
import collections
import os
import resource
import socket
import struct
import threading
import time

import pytest

import sluice_wire as w

FLOOD_SOURCES = [f"127.0.0.{i}" for i in range(2, 34)]  # 32 addresses: more than 256 / 16
FLOOD_MAX_SECONDS = 60  # upper bound against a hang, not a measure
FLOOD_MAX_CONNECTIONS = 100_000
STEP = 500  # flood connections the receiver accepts between two pieces of the slow hello


class Flood:
    """Connects from many 127.0.0.x addresses, back to back, for as long as it runs. A
    connection counts once the receiver has accepted it (its ServerHello arrived); then it
    stays open silent, sends a valid-looking prefix of a hello, or sends garbage."""

    def __init__(self, port, max_open, sources=FLOOD_SOURCES):
        self.port = port
        self.sources = sources
        self.max_open = max_open
        self.accepted = 0
        self.failed = 0
        self.cond = threading.Condition()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        held = collections.deque()
        deadline = time.monotonic() + FLOOD_MAX_SECONDS
        i = 0
        try:
            while not self.stop.is_set() and time.monotonic() < deadline and i < FLOOD_MAX_CONNECTIONS:
                s = socket.socket()
                try:
                    s.settimeout(5)
                    s.bind((self.sources[i % len(self.sources)], 0))
                    s.connect(("127.0.0.1", self.port))
                    w.recv_exact(s, 32)
                    if i % 3 == 1:
                        s.sendall(w.MAGIC[:6])  # a hello that has started and stalls
                    elif i % 3 == 2:
                        s.sendall(b"\x00garbage")
                except OSError:
                    s.close()
                    self.failed += 1
                    continue
                finally:
                    i += 1
                held.append(s)
                if len(held) > self.max_open:
                    held.popleft().close()
                with self.cond:
                    self.accepted += 1
                    self.cond.notify_all()
        finally:
            for s in held:
                s.close()
            with self.cond:
                self.stop.set()
                self.cond.notify_all()

    def wait_accepted(self, n, timeout=60):
        """Waits until the receiver has accepted n more flood connections."""
        with self.cond:
            target = self.accepted + n
            ok = self.cond.wait_for(lambda: self.accepted >= target or self.stop.is_set(), timeout)
            assert ok and self.accepted >= target, f"the flood stopped early ({self.accepted} accepted, {self.failed} failed)"


def slow_handshake(flood, port, token, role, index, count, tid):
    """A sender whose 80-byte hello trickles in, in 8 pieces, while the flood goes on: 8 x STEP
    flood connections are accepted while this handshake is pending (the table holds 256)."""
    s = socket.socket()
    s.settimeout(30)
    s.bind(("127.0.0.1", 0))
    s.connect(("127.0.0.1", port))
    nonce_r = w.recv_exact(s, 32)[16:32]
    import hashlib
    import hmac

    signed = w.MAGIC + struct.pack("<HBBHH", w.VERSION, role, 0, index, count) + tid + os.urandom(16)
    hello = signed + hmac.new(token.encode(), b"sluice-v1 client hello" + nonce_r + signed, hashlib.sha256).digest()
    try:
        for k in range(0, 80, 10):
            s.sendall(hello[k:k + 10])
            flood.wait_accepted(STEP)
        auth = w.recv_exact(s, 40)
    except (ConnectionError, OSError) as e:
        pytest.fail(f"the receiver dropped a handshake in progress (role {role}) during the flood: {e!r}")
    assert auth[0] == 0, f"handshake refused with status {auth[0]}"
    return s


def fd_budget():
    """Raises this process's fd limit for the flood's sockets; returns it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 8192)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    if want < 1024:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} is too low for a flood")
    return want


def test_flood_of_connections_does_not_evict_a_handshake_in_progress(tmp_path, receiver_factory):
    want = fd_budget()
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    flood = Flood(rx.port, max_open=min(1500, want - 256))
    flood.thread.start()
    try:
        flood.wait_accepted(STEP)  # the flood is on before the sender arrives
        tid = os.urandom(16)
        c = slow_handshake(flood, rx.port, "testtoken", 0, 0, 1, tid)
        c.sendall(w.manifest(0, [(0, w.FILE, "empty", 0, ""), (1, w.SYMLINK, "link", 0, "empty")]))
        assert w.read_frame(c)[0] == w.MANIFEST_ACK
        c.sendall(w.frame(w.MANIFEST_END, struct.pack("<IIQQ", 1, 0, 2, 0)))
        assert w.read_frame(c)[0] == w.ALL_VERIFIED
        # The data stream connects through the same acceptor while the flood goes on.
        d = slow_handshake(flood, rx.port, "testtoken", 1, 1, 1, tid)
        d.sendall(w.frame(w.STREAM_END, struct.pack("<QQ", 0, 0)))
        c.sendall(w.frame(w.TRANSFER_END, struct.pack("<IIQQ", 1, 0, 0, 0)))
        ftype, payload = w.read_frame(c)
        assert ftype == w.FINAL_STATUS and struct.unpack_from("<I", payload)[0] == 0, (ftype, payload)
    finally:
        flood.stop.set()
        flood.thread.join(timeout=60)
    rc, out, err = rx.wait(timeout=60)
    assert rc == 0, err
    assert (dest / "empty").stat().st_size == 0 and os.readlink(dest / "link") == "empty"
    assert flood.accepted >= 8 * STEP * 2, flood.accepted


def test_flood_from_many_addresses_does_not_evict_the_transfers_data_stream(tmp_path, receiver_factory):
    """512 flood addresses, each holding about one pending connection like a sender does: the
    table is full of ties, so only the transfer's own address being protected keeps its data
    stream's handshake (a random one of 256 is dropped per new connection otherwise)."""
    want = fd_budget()
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    tid = os.urandom(16)
    c, status = w.handshake("127.0.0.1", rx.port, "testtoken", 0, 0, 1, tid)  # before the flood
    assert status == 0
    c.sendall(w.manifest(0, [(0, w.FILE, "empty", 0, "")]))
    assert w.read_frame(c)[0] == w.MANIFEST_ACK
    c.sendall(w.frame(w.MANIFEST_END, struct.pack("<IIQQ", 1, 0, 1, 0)))
    assert w.read_frame(c)[0] == w.ALL_VERIFIED
    many = [f"127.0.{1 + i // 256}.{i % 256}" for i in range(512)]
    flood = Flood(rx.port, max_open=min(1500, want - 256), sources=many)
    flood.thread.start()
    try:
        flood.wait_accepted(STEP)
        d = slow_handshake(flood, rx.port, "testtoken", 1, 1, 1, tid)
        d.sendall(w.frame(w.STREAM_END, struct.pack("<QQ", 0, 0)))
        c.sendall(w.frame(w.TRANSFER_END, struct.pack("<IIQQ", 1, 0, 0, 0)))
        ftype, payload = w.read_frame(c)
        assert ftype == w.FINAL_STATUS and struct.unpack_from("<I", payload)[0] == 0, (ftype, payload)
    finally:
        flood.stop.set()
        flood.thread.join(timeout=60)
    rc, out, err = rx.wait(timeout=60)
    assert rc == 0, err
    assert (dest / "empty").stat().st_size == 0


def test_a_flood_of_wrong_tokens_does_not_flood_stderr(tmp_path, receiver_factory):
    """Each wrong-token hello used to print a warning line, so a guesser filled the receiver's
    stderr (and its logs) at the rate it could connect. Now the first is named and the rest are
    summed up at most once per 10 s: 200 wrong tokens print a handful of lines, however fast or
    slow the machine is (at most one line per 10 s beyond the first, plus the summary)."""
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    tries = 200
    t0 = time.monotonic()
    for i in range(tries):
        s, status = w.handshake("127.0.0.1", rx.port, "not-the-token", 0, 0, 1, os.urandom(16))
        s.close()
        assert status != 0, "a wrong token was accepted"
    elapsed = time.monotonic() - t0
    # The real sender still gets in and ends the receiver.
    tid = os.urandom(16)
    c, status = w.handshake("127.0.0.1", rx.port, "testtoken", 0, 0, 1, tid)
    assert status == 0
    c.sendall(w.frame(w.MANIFEST_END, struct.pack("<IIQQ", 0, 0, 0, 0)))
    assert w.read_frame(c)[0] == w.ALL_VERIFIED
    d, status = w.handshake("127.0.0.1", rx.port, "testtoken", 1, 1, 1, tid)
    d.sendall(w.frame(w.STREAM_END, struct.pack("<QQ", 0, 0)))
    c.sendall(w.frame(w.TRANSFER_END, struct.pack("<IIQQ", 1, 0, 0, 0)))
    assert w.read_frame(c)[0] == w.FINAL_STATUS
    rc, out, err = rx.wait(timeout=60)
    assert rc == 0, err
    lines = [l for l in err.splitlines() if "wrong token" in l]
    assert lines, err
    assert len(lines) <= 2 + int(elapsed // 10), f"{len(lines)} warning lines for {tries} wrong tokens"
    assert "refused a connection from 127.0.0.1" in lines[0]
