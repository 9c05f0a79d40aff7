"""Every wait has a deadline (issue 14 items 4-6): a silent peer ends a transfer with exit 4
(timed out) after --idle-timeout, and the receiver's own work never counts as the sender's
silence. Deadlines here are generous upper bounds against hangs (the test kills sluice after
60 s and asserts it had exited by itself); nothing asserts that it was fast."""
import hashlib
import hmac
import os
import signal
import socket
import struct
import subprocess
import threading

import pytest

from conftest import SLUICE, Receiver, free_port
import sluice_wire as w
from corrupting_proxy import CorruptingProxy, shut_down

TOKEN = "testtoken"
HANG = 60  # seconds: far above any idle timeout used here


def finish(proc, timeout=HANG):
    """Waits for proc to exit by itself; a hang is a failure, not a slow pass."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # The whole group: a shell pipeline's sluice would otherwise keep its pipes open.
        os.killpg(proc.pid, signal.SIGKILL) if proc.pid == os.getpgid(proc.pid) else proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"sluice hung (killed after {timeout} s); stderr: {err}")
    return proc.returncode, out, err


# ---------------- a hand-written receiver (the server side of the handshake) ----------------


class FakeReceiver:
    """Completes every handshake, then behaves as `mode` says:
    silent: never reads or answers anything;
    no_read: acks manifest pages on the control connection but never reads a data stream."""

    def __init__(self, mode):
        self.mode = mode
        self.port = free_port()
        self.lsock = socket.create_server(("127.0.0.1", self.port))
        self.conns = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def handshake(self, c):
        nonce_r = os.urandom(16)
        c.sendall(w.MAGIC + struct.pack("<HHI", w.VERSION, 0, 0) + nonce_r)
        hello = w.recv_exact(c, 80)
        nonce_s = hello[32:48]
        mac = hmac.new(TOKEN.encode(), b"sluice-v1 server auth" + nonce_s + nonce_r, hashlib.sha256).digest()
        c.sendall(bytes(8) + mac)
        return hello[10]  # role: 0 control, 1 data

    def serve(self):
        self.lsock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                c, _ = self.lsock.accept()
            except socket.timeout:
                continue
            c.settimeout(None)
            self.conns.append(c)
            role = self.handshake(c)
            if role == 0 and self.mode == "no_read":
                threading.Thread(target=self.ack_pages, args=(c,), daemon=True).start()

    def ack_pages(self, c):
        try:
            while True:
                ftype, payload = w.read_frame(c)
                if ftype == w.MANIFEST:
                    seq = struct.unpack_from("<I", payload)[0]
                    c.sendall(w.frame(w.MANIFEST_ACK, struct.pack("<II", seq, 0)))
        except (ConnectionError, OSError):
            pass

    def close(self):
        self.stop.set()
        self.thread.join()
        for c in self.conns:
            c.close()
        self.lsock.close()


@pytest.fixture
def fake_receiver():
    made = []

    def make(mode):
        r = FakeReceiver(mode)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def sparse_source(tmp_path, size):
    src = tmp_path / "src"
    src.mkdir()
    with open(src / "big", "wb") as f:
        f.truncate(size)
    return src


# ---------------- item 4: the sender and a silent receiver ----------------


def start_receiver(tmp_path, mode, *extra):
    """`sluice recv` into a discarding sink (file mode) or to stdout (pipe mode); returns it
    once it listens (it prints its URL on stdout, or on stderr with --stdout)."""
    port = free_port()
    (tmp_path / "dst").mkdir(exist_ok=True)
    where = ["--stdout"] if mode == "pipe" else [str(tmp_path / "dst"), "--sink", "null"]
    recv = subprocess.Popen([SLUICE, "recv", *where, "--bind", "127.0.0.1", "--port", str(port), "--token", TOKEN,
                             *extra], stdout=subprocess.PIPE if mode == "file" else subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    line = (recv.stdout if mode == "file" else recv.stderr).readline()
    assert line.startswith("sluice://"), line
    return recv, port


class FrozenAfterHandshake(CorruptingProxy):
    """Forwards each connection's handshake (ServerHello and ServerAuth one way, ClientHello the
    other), then nothing more in either direction while keeping the connection open: the
    receiver as the sender sees it when it is stopped right after the handshake. Unlike a
    SIGSTOP sent once the sender reports it connected, this cannot race a transfer that
    finishes first (a sparse file sends no data; a short pipe ends in milliseconds)."""

    def _pump(self, src, dst, towards_receiver):
        try:
            left = 80 if towards_receiver else 32 + 40  # forwarded as it comes: each side waits for the other's part
            while left:
                chunk = src.recv(left)
                if not chunk:
                    raise ConnectionError("closed during the handshake")
                dst.sendall(chunk)
                left -= len(chunk)
            while src.recv(1 << 16):  # read and drop: nothing more reaches the other side
                pass
        except (ConnectionError, OSError):
            pass
        shut_down(src, dst)


@pytest.mark.parametrize("mode", ["file", "pipe"])
def test_sender_exits_on_a_receiver_stopped_after_the_handshake(tmp_path, mode):
    """The receiver answers every handshake and then nothing (FrozenAfterHandshake)."""
    recv, port = start_receiver(tmp_path, mode)
    proxy = FrozenAfterHandshake(port)
    try:
        args = ["--to", f"127.0.0.1:{proxy.port}", "--token", TOKEN, "-v", "--idle-timeout", "2", "--no-encrypt"]
        if mode == "file":
            src = sparse_source(tmp_path, 4 << 30)
            send = subprocess.Popen([SLUICE, "send", str(src), *args], stderr=subprocess.PIPE, text=True)
        else:
            send = subprocess.Popen(f"head -c 200000 /dev/zero | {SLUICE} send - {' '.join(args)}", shell=True,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
        rc, _, err = finish(send)
        assert "connected to" in err, err  # every stream's handshake was done
        assert rc == 4, err
        assert f"receiver 127.0.0.1:{proxy.port}" in err and "idle timeout" in err, err
    finally:
        proxy.close()
        recv.kill()
        recv.communicate()


def test_sender_exits_on_a_receiver_that_goes_silent_after_the_handshake(tmp_path, fake_receiver):
    r = fake_receiver("silent")
    src = sparse_source(tmp_path, 1 << 20)
    send = subprocess.Popen([SLUICE, "send", str(src), "--to", f"127.0.0.1:{r.port}", "--token", TOKEN,
                             "--idle-timeout", "1"], stderr=subprocess.PIPE, text=True)
    rc, _, err = finish(send)
    assert rc == 4, err
    assert f"receiver 127.0.0.1:{r.port}" in err and "control connection" in err and "idle timeout" in err, err


@pytest.mark.parametrize("path", ["splice", "zc", "sendfile", "read_send"])
def test_sender_exits_on_a_receiver_that_stops_reading_data(tmp_path, fake_receiver, path):
    """Pages are acked, but no data stream is ever read: every send path's sends must time out."""
    r = fake_receiver("no_read")
    src = sparse_source(tmp_path, 512 << 20)
    send = subprocess.Popen([SLUICE, "send", str(src), "--to", f"127.0.0.1:{r.port}", "--token", TOKEN,
                             "--streams", "2", "--send-path", path, "--idle-timeout", "1"],
                            stderr=subprocess.PIPE, text=True)
    rc, _, err = finish(send)
    assert rc == 4, err
    assert f"receiver 127.0.0.1:{r.port}" in err and "data stream" in err and "idle timeout" in err, err


# ---------------- item 5: the receiver and a silent sender ----------------


def connect_fake_sender(port, streams):
    tid = os.urandom(16)
    ctl, st = w.handshake("127.0.0.1", port, TOKEN, 0, 0, streams, tid)
    assert st == 0
    data = []
    for i in range(1, streams + 1):
        d, st = w.handshake("127.0.0.1", port, TOKEN, 1, i, streams, tid)
        assert st == 0
        data.append(d)
    return ctl, data


def stream_end(blocks=0, nbytes=0):
    return w.frame(w.STREAM_END, struct.pack("<QQ", blocks, nbytes))


def test_receiver_exits_when_the_sender_ends_its_streams_and_goes_silent(tmp_path, receiver_factory):
    dst = tmp_path / "dst"
    dst.mkdir()
    r = receiver_factory(dst, "--idle-timeout", "1", token=TOKEN)
    ctl, data = connect_fake_sender(r.port, 2)
    try:
        ctl.sendall(w.manifest(0, [(0, w.FILE, "empty", 0, "")]))
        ctl.sendall(w.frame(w.MANIFEST_END, struct.pack("<IIQQ", 1, 0, 1, 0)))
        ftype, _ = w.read_frame(ctl)
        assert ftype == w.MANIFEST_ACK
        for d in data:
            d.sendall(stream_end())
        # ... and no TRANSFER_END: the control connection stays open and silent.
        rc, _, err = finish(r.proc)
        assert rc == 4, err
        assert "sender went silent" in err and "control connection" in err and "TRANSFER_END" in err and "idle timeout" in err, err
    finally:
        ctl.close()
        for d in data:
            d.close()


def test_pipe_receiver_exits_on_a_gap_the_sender_never_fills(tmp_path):
    """Piece at offset 100 on stream 2, stream 1 ends without the bytes before it, then silence."""
    recv, port = start_receiver(tmp_path, "pipe", "--idle-timeout", "1")
    ctl, data = connect_fake_sender(port, 2)
    try:
        ctl.sendall(w.manifest(0, [(0, 4, "stdin", 0, "")]))
        ctl.sendall(w.frame(w.MANIFEST_END, struct.pack("<IIQQ", 1, 0, 1, 0)))
        ftype, _ = w.read_frame(ctl)
        assert ftype == w.MANIFEST_ACK
        data[1].sendall(w.frame(w.BLOCK, struct.pack("<QQQ", 0, 100, 0) + b"x" * 10))
        data[0].sendall(stream_end())
        rc, _, err = finish(recv)
        assert rc == 4, err
        assert "idle timeout" in err, err
    finally:
        recv.kill()
        recv.communicate()
        ctl.close()
        for d in data:
            d.close()


# ---------------- item 6: the receiver's own work is not the sender's silence ----------------


def test_many_empty_files_with_sync_and_a_short_idle_timeout(tmp_path, receiver_factory):
    """The receiver's control thread creates and fsyncs thousands of empty files before it
    acks their pages; its data streams wait meanwhile, and that wait is not the sender's
    silence. (12,000 in 600 directories three deep, each created and fsynced too: the
    control thread's work outlasts 3 s by far on this VM's disk even when it is idle; 2,000
    alone did not always.)"""
    src = tmp_path / "src"
    for i in range(12000):
        d = src / f"a{i % 6}" / f"b{i % 60:02d}" / f"c{i % 600:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"e{i:05d}").write_bytes(b"")
    dst = tmp_path / "dst"
    dst.mkdir()
    r = receiver_factory(dst, "--sync", "--idle-timeout", "3", token=TOKEN)
    send = subprocess.Popen([SLUICE, "send", str(src), "--to", f"127.0.0.1:{r.port}", "--token", TOKEN],
                            stderr=subprocess.PIPE, text=True)
    rc, _, err = finish(send, timeout=600)
    rrc, _, rerr = finish(r.proc, timeout=600)
    assert rrc == 0, rerr
    assert rc == 0, err
    assert sum(len(f) for _, _, f in os.walk(dst)) == 12000


@pytest.mark.parametrize("mode", ["file-1-stream", "file-2-streams", "pipe"])
def test_a_rate_limit_far_below_a_block_per_idle_timeout_completes(tmp_path, receiver_factory, mode):
    """--rate-limit 64K against a receiver's 2 s idle timeout: one 256 KiB block (a pipe's
    piece) would wait 4 s in the rate limiter before a byte of it went out
    (send/session/rate_limiter.hpp), so every stream was silent past the receiver's idle timeout
    and it failed the transfer ("no data from the sender on stream 1"). Blocks and pieces planned
    small enough for the rate (block_cap) keep each stream's wait a fraction of the idle timeout.
    The sender's own idle timeout is long: only the receiver's rule is under test. Nothing here
    is timed but the deadlines."""
    data = os.urandom(256 << 10)
    streams = "1" if mode == "file-1-stream" else "2"
    args = ["--rate-limit", "64K", "--streams", streams, "--idle-timeout", "60", "-v"]
    if mode == "pipe":
        port = free_port()
        out = tmp_path / "out"
        with open(out, "wb") as f:
            rx = subprocess.Popen([SLUICE, "recv", "--stdout", "--bind", "127.0.0.1", "--port", str(port), "--token", TOKEN,
                                   "--idle-timeout", "2"], stdout=f, stderr=subprocess.PIPE, text=True)
        assert rx.stderr.readline().startswith("sluice://")
        (tmp_path / "in").write_bytes(data)
        with open(tmp_path / "in", "rb") as f:
            send = subprocess.Popen([SLUICE, "send", "-", "--to", f"127.0.0.1:{port}", "--token", TOKEN, *args], stdin=f,
                                    stderr=subprocess.PIPE, text=True)
        rc, _, err = finish(send)
        rrc, _, rerr = finish(rx)
        got = out.read_bytes()
    else:
        src = tmp_path / "f"
        src.write_bytes(data)
        dst = tmp_path / "dst"
        dst.mkdir()
        r = receiver_factory(dst, "--idle-timeout", "2", token=TOKEN)
        send = subprocess.Popen([SLUICE, "send", str(src), "--to", f"127.0.0.1:{r.port}", "--token", TOKEN, *args],
                                stderr=subprocess.PIPE, text=True)
        rc, _, err = finish(send)
        rrc, _, rerr = finish(r.proc)
        got = (dst / "f").read_bytes() if rrc == 0 else b""
    assert rrc == 0, rerr
    assert rc == 0, err
    if mode != "pipe":
        assert "rate limit: " in err and "blocks of at most " in err, err
    assert got == data


SLOW_FSYNC_SHIM = os.environ.get(
    "SLUICE_SLOW_FSYNC_SHIM",
    os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(SLUICE))), "tests", "shim",
                 "libsluice-test-slow-fsync-shim.so"))


@pytest.mark.parametrize("work", ["page", "end"])
def test_the_sender_waits_while_the_receiver_works_for_it(tmp_path, work):
    """The receiver's own work that the sender waits for is not the receiver's silence: with
    every fsync made 5 ms slower (a test-only LD_PRELOAD shim, so the work has a known minimum
    length on any disk), registering a page of 1,000 empty files with --sync ("page", the
    sender waits for MANIFEST_ACK) or fsyncing 1,000 directories after TRANSFER_END ("end",
    the sender waits for FINAL_STATUS) takes at least 5 s, far past the sender's 1 s idle
    timeout. The receiver says WORKING while it works, so the sender waits and both exit 0;
    before WORKING the sender gave up with exit 4."""
    src = tmp_path / "src"
    for i in range(1000):
        if work == "page":
            d = src / f"d{i % 10}"
            d.mkdir(parents=True, exist_ok=True)
            (d / f"e{i:04d}").write_bytes(b"")
        else:
            (src / f"d{i:04d}").mkdir(parents=True)
    (src / "data").write_bytes(os.urandom(4096))
    dst = tmp_path / "dst"
    dst.mkdir()
    port = free_port()
    env = dict(os.environ, LD_PRELOAD=SLOW_FSYNC_SHIM, SLUICE_TEST_FSYNC_DELAY_MS="5")
    rx = subprocess.Popen([SLUICE, "recv", str(dst), "--bind", "127.0.0.1", "--port", str(port), "--token", TOKEN,
                           "--sync"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert rx.stdout.readline().startswith("sluice://"), rx.stderr.read()
        send = subprocess.Popen([SLUICE, "send", str(src), "--to", f"127.0.0.1:{port}", "--token", TOKEN,
                                 "--idle-timeout", "1"], stderr=subprocess.PIPE, text=True)
        rc, _, err = finish(send, timeout=HANG)
        rrc, _, rerr = finish(rx, timeout=HANG)
    finally:
        if rx.poll() is None:
            rx.kill()
    assert rc == 0, err
    assert rrc == 0, rerr
    assert (dst / "src" / "data").read_bytes() == (src / "data").read_bytes()
