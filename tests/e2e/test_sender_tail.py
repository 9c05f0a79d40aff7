"""A sender's data stream with nothing left to carry ends instead of sitting silent
(docs/guarantees.md, "Deadlines"; send/plan/work_queue.hpp, "the tail"). Once the manifest has
ended and every page's work is queued, a stream waiting for work would only wait for
ALL_VERIFIED, which comes once the last stream's data has arrived: on a slow link that is
longer than the idle timeout, and a receiver from before session 18 failed any data stream
silent that long ("no data from the sender on stream 4 for 2 s"). The real sender plays against
a hand-written receiver with that old rule (sluice_wire.py): it offers no hello feature, and
reads the data slowly, as a slow link delivers it. One small file is one work item (the
planner's batch), so three of four streams have nothing to carry by the protocol, not by the
scheduler's choice: they end (STREAM_END 0, 0) before ALL_VERIFIED, the stream that carried
stays, takes a RESEND if one comes, and the transfer completes. Before the change every idle
stream waited for ALL_VERIFIED and the old rule failed the transfer after one idle timeout."""
import os
import socket
import struct
import subprocess
import threading
import time

import sluice_wire as w
from conftest import SLUICE

TOKEN = "testtoken"
STREAMS = 4
OLD_IDLE = 4.0  # seconds: the old receiver's --idle-timeout
HELD = 2.5 * OLD_IDLE  # how long the data takes to arrive through the "slow link"
SIZE = 64 * 1024  # one small file: one batch, one stream
PIECE = 4096
HANG = 120  # a bound against a hang, never a timing assertion


class OldRuleReceiver:
    """A receiver from before session 18, as far as its data streams' deadline goes: a stream
    that has heard nothing for OLD_IDLE fails the transfer (ABORT) unless a manifest page was
    answered within OLD_IDLE (its AnswerClock). It answers every page at once, reads each BLOCK's
    data in pieces spread over HELD seconds, sends ALL_VERIFIED once every byte of MANIFEST_END's
    total has arrived (after asking for the first block again when `resend`), and FINAL_STATUS
    after TRANSFER_END."""

    def __init__(self, resend=False):
        self.resend = resend
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(HANG)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.conns = []
        self.failure = None  # what the old rule (or anything else) failed with
        self.answered = time.monotonic()
        self.bytes = 0
        self.blocks = []  # (stream, file_id, offset, length, arrived at)
        self.ends = {}  # stream -> (blocks, bytes, arrived at)
        self.all_verified_at = None
        self.transfer_end = None
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def fail(self, why):
        with self.lock:
            if self.failure is None:
                self.failure = why
        for s in self.conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def recv_watched(self, index, s, n, slow=False):
        """n bytes from data stream `index`, under the old rule; slow: as a slow link gives them."""
        out = b""
        last = time.monotonic()
        while len(out) < n:
            try:
                chunk = s.recv(min(n - len(out), PIECE if slow else 1 << 16))
            except socket.timeout:
                now = time.monotonic()
                if now - last > OLD_IDLE and now - self.answered > OLD_IDLE:
                    self.fail(f"no data from the sender on stream {index} for {OLD_IDLE:g} s")
                    raise ConnectionError(self.failure)
                continue
            if not chunk:
                raise ConnectionError(f"data stream {index} closed")
            out += chunk
            last = time.monotonic()
            if slow:
                time.sleep(HELD * len(chunk) / SIZE)
        return out

    def read_stream(self, index, s):
        s.settimeout(0.1)
        try:
            while True:
                ftype, _, _, length = struct.unpack("<BBHI", self.recv_watched(index, s, 8))
                if ftype == w.STREAM_END:
                    blocks, nbytes = struct.unpack("<QQ", self.recv_watched(index, s, length))
                    with self.lock:
                        self.ends[index] = (blocks, nbytes, time.monotonic())
                    return
                assert ftype == w.BLOCK, hex(ftype)
                file_id, offset, _ = struct.unpack("<QQQ", self.recv_watched(index, s, 24))
                self.recv_watched(index, s, length - 24, slow=not self.blocks)  # a resend arrives at once
                with self.lock:
                    self.blocks.append((index, file_id, offset, length - 24, time.monotonic()))
                    self.bytes += length - 24
        except Exception as e:  # reported by the test
            self.fail(self.failure or f"data stream {index}: {e!r}")

    def await_bytes(self, n):
        deadline = time.monotonic() + HANG
        while self.bytes < n and self.failure is None:
            assert time.monotonic() < deadline, f"{self.bytes} of {n} bytes after {HANG} s"
            time.sleep(0.05)

    def serve(self):
        try:
            control, _ = w.accept_handshake(self.listener, TOKEN, 0, timeout=HANG)
            self.conns.append(control)
            self.answered = time.monotonic()
            readers = []
            for _ in range(STREAMS):
                s, hello = w.accept_handshake(self.listener, TOKEN, 0, timeout=HANG)
                self.conns.append(s)
                index = struct.unpack_from("<H", hello, 12)[0]
                readers.append(threading.Thread(target=self.read_stream, args=(index, s), daemon=True))
                readers[-1].start()
            while True:
                ftype, payload = w.read_frame(control)
                if ftype == w.MANIFEST:
                    control.sendall(w.manifest_ack(struct.unpack_from("<I", payload)[0]))
                    self.answered = time.monotonic()
                elif ftype == w.MANIFEST_END:
                    total = struct.unpack_from("<IIQQ", payload)[3]
                    break
            self.await_bytes(total)
            if self.resend and self.failure is None:
                _, file_id, offset, length, _ = self.blocks[0]
                control.sendall(w.frame(w.RESEND, struct.pack("<QQQ", file_id, offset, length)))
                self.await_bytes(total + length)
            if self.failure is not None:
                control.sendall(w.frame(w.ABORT, struct.pack("<II", 1, len(self.failure)) + self.failure.encode()))
                return
            self.all_verified_at = time.monotonic()
            control.sendall(w.frame(w.ALL_VERIFIED, b""))
            ftype, payload = w.read_frame(control)
            assert ftype == w.TRANSFER_END, hex(ftype)
            self.transfer_end = struct.unpack("<IIQQ", payload)
            for r in readers:
                r.join(timeout=HANG)
            control.sendall(w.final_status(0, 1, self.bytes))
        except Exception as e:  # reported by the test
            self.fail(self.failure or repr(e))

    def close(self):
        self.thread.join(timeout=HANG)
        for s in self.conns:
            s.close()
        self.listener.close()


def send_to_old_receiver(tmp_path, resend=False):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(os.urandom(SIZE))
    peer = OldRuleReceiver(resend)
    try:
        r = subprocess.run([SLUICE, "send", str(src), "--to", f"127.0.0.1:{peer.port}", "--token", TOKEN, "--streams",
                            str(STREAMS), "--no-owner", "--no-group", "--no-xattrs", "--no-acls", "-v"],
                           capture_output=True, text=True, timeout=HANG)
    finally:
        peer.close()
    return r, peer


def check_tail(r, peer, blocks):
    assert peer.failure is None, f"{peer.failure}\n{r.stderr}"
    assert r.returncode == 0, r.stderr
    carriers = {b[0] for b in peer.blocks}
    assert len(peer.blocks) == blocks and len(carriers) == 1, peer.blocks
    assert sorted(peer.ends) == list(range(1, STREAMS + 1)), peer.ends
    # Each stream with nothing to carry said so before ALL_VERIFIED, not after it.
    idle = [i for i in peer.ends if i not in carriers]
    assert len(idle) == STREAMS - 1
    for i in idle:
        assert peer.ends[i][:2] == (0, 0), peer.ends
        assert peer.ends[i][2] < peer.all_verified_at, (i, peer.ends, peer.all_verified_at)
    # The stream that carried stayed to the end, for what might still come.
    (carrier,) = carriers
    assert peer.ends[carrier][2] > peer.all_verified_at
    assert peer.transfer_end == (STREAMS, 0, blocks, blocks * SIZE), peer.transfer_end
    assert f"{STREAMS - 1} of {STREAMS} data streams ended before ALL_VERIFIED" in r.stderr, r.stderr


def test_streams_with_nothing_left_end_before_an_old_receivers_idle_timeout(tmp_path):
    r, peer = send_to_old_receiver(tmp_path)
    check_tail(r, peer, 1)
    # The data took longer than the old receiver's idle timeout to arrive: the idle streams
    # would have been silent past it.
    assert peer.all_verified_at - peer.answered > OLD_IDLE


def test_the_stream_that_stays_carries_a_resend(tmp_path):
    """After the idle streams ended, the receiver asks for the block again: the stream that
    stayed carries it (two BLOCK frames, both on it) and the transfer completes."""
    r, peer = send_to_old_receiver(tmp_path, resend=True)
    check_tail(r, peer, 2)
    assert "checksum mismatch" in r.stderr, r.stderr
    assert peer.blocks[1][4] > max(peer.ends[i][2] for i in peer.ends if i != peer.blocks[0][0])
