"""Text from a peer never reaches a terminal raw: an ABORT reason or a path from a hostile
manifest holding escape sequences is printed with them escaped (\\x1b, \\u202e), so it cannot
clear the screen, set the window title or overwrite lines."""
import os
import socket
import struct
import subprocess
import threading

import sluice_wire as w
from conftest import SLUICE, free_port

TOKEN = "testtoken"
# Clear the screen, home the cursor, set the window title, return to the line start and
# overwrite it, ring the bell, and a C1 CSI in its UTF-8 form; then a right-to-left override.
HOSTILE = "\x1b[2J\x1b[H\x1b]0;pwned\x07\rFAKE OK\x08\x9b1m\u202etxt.exe"
RAW = [b"\x1b", b"\x07", b"\r", b"\x08", b"\xc2\x9b", "\u202e".encode()]


def assert_no_terminal_bytes(*outputs):
    for out in outputs:
        for raw in RAW:
            assert raw not in out, (raw, out)


class RawReceiver:
    """`sluice recv` with its output kept as bytes, to see exactly what a terminal would get."""

    def __init__(self, dest, *args):
        self.port = free_port()
        self.proc = subprocess.Popen([SLUICE, "recv", str(dest), "--bind", "127.0.0.1", "--port", str(self.port),
                                      "--token", TOKEN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.first_line = self.proc.stdout.readline()
        assert self.first_line.startswith(b"sluice://"), self.proc.stderr.read()

    def wait(self, timeout=60):
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, self.first_line + out, err


def abort_frame(message):
    m = message.encode()
    return w.frame(w.ABORT, struct.pack("<II", 1, len(m)) + m)


def test_a_senders_abort_reason_is_escaped_by_the_receiver(tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = RawReceiver(dest, "-v")
    try:
        c, status = w.handshake("127.0.0.1", rx.port, TOKEN, 0, 0, 1, os.urandom(16))
        assert status == 0
        c.sendall(abort_frame(HOSTILE))
        rc, out, err = rx.wait()
    finally:
        rx.proc.kill()
    assert rc != 0
    assert b"sender aborted the transfer" in err
    assert b"\\x1b[2J\\x1b[H\\x1b]0;pwned\\x07\\x0dFAKE OK\\x08\\u009b1m\\u202etxt.exe" in err, err
    assert_no_terminal_bytes(out, err)


def test_paths_from_a_hostile_manifest_are_escaped_in_every_message(tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    # Refused by the decoder ('..'), then named twice in one manifest (the control side).
    for entries, expect in (([(0, w.FILE, HOSTILE + "/../x", 1, "")], b"refused"),
                            ([(0, w.FILE, HOSTILE, 1, ""), (1, w.FILE, HOSTILE, 1, "")], b"twice")):
        rx = RawReceiver(dest, "-v")
        try:
            c, status = w.handshake("127.0.0.1", rx.port, TOKEN, 0, 0, 1, os.urandom(16))
            assert status == 0
            c.sendall(w.manifest(0, entries))
            ftype, payload = w.read_frame(c)
            rc, out, err = rx.wait()
        finally:
            rx.proc.kill()
        assert rc == 7 and expect in err and b"\\x1b]0;pwned" in err, err
        assert_no_terminal_bytes(out, err)
        assert ftype == w.ABORT
        assert_no_terminal_bytes(payload)  # and the reason sent back does not bounce them either
    assert list(dest.iterdir()) == []


def test_a_file_named_with_escapes_is_named_escaped_in_warnings_and_errors(tmp_path):
    """A file name with escape sequences is a legal name (as on any Linux file system); the
    warnings and the error that name it (a block failing its checksum, four times) escape it."""
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = RawReceiver(dest, "-v")
    try:
        tid = os.urandom(16)
        c, _ = w.handshake("127.0.0.1", rx.port, TOKEN, 0, 0, 1, tid)
        c.sendall(w.manifest(0, [(0, w.FILE, HOSTILE, 100, "")]))
        assert w.read_frame(c)[0] == w.MANIFEST_ACK
        d, status = w.handshake("127.0.0.1", rx.port, TOKEN, 1, 1, 1, tid)
        assert status == 0
        bad_block = w.frame(w.BLOCK, struct.pack("<QQQ", 0, 0, 12345) + b"x" * 100)
        d.sendall(bad_block)
        for _ in range(10):  # a corrupt block is asked for again 3 times, then the receiver aborts
            ftype, payload = w.read_frame(c)
            if ftype != w.RESEND:
                break
            d.sendall(bad_block)
        rc, out, err = rx.wait()
    finally:
        rx.proc.kill()
    assert ftype == w.ABORT
    assert rc == 8 and b"warning: checksum mismatch in '\\x1b[2J" in err and b"after 3 resends" in err, err
    assert_no_terminal_bytes(out, err, payload)


class HostileReceiver:
    """The receiver side of the handshake (docs/protocol.md), then an ABORT with escape
    sequences on the control connection once every data stream has connected."""

    def __init__(self, message, streams):
        self.message = message
        self.streams = streams
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(30)
        self.port = self.listener.getsockname()[1]
        self.conns = []
        self.error = None
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def handshake(self):
        s, _ = w.accept_handshake(self.listener, TOKEN, timeout=30)
        self.conns.append(s)
        return s

    def serve(self):
        try:
            control = self.handshake()
            for _ in range(self.streams):
                self.handshake()
            control.sendall(abort_frame(self.message))
        except Exception as e:  # reported by the test
            self.error = e

    def close(self):
        self.thread.join(timeout=60)
        for s in self.conns:
            s.close()
        self.listener.close()


def test_a_receivers_abort_reason_is_escaped_by_the_sender(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"x" * 1000)
    peer = HostileReceiver(HOSTILE, streams=1)
    try:
        r = subprocess.run([SLUICE, "send", str(f), f"sluice://127.0.0.1:{peer.port}/?token={TOKEN}", "--streams", "1",
                            "-v"], capture_output=True, timeout=120)
    finally:
        peer.close()
    assert peer.error is None, peer.error
    assert r.returncode != 0
    assert b"receiver aborted the transfer" in r.stderr, r.stderr
    assert b"\\x1b[2J\\x1b[H\\x1b]0;pwned\\x07\\x0dFAKE OK" in r.stderr, r.stderr
    assert_no_terminal_bytes(r.stdout, r.stderr)
