"""A data stream with nothing to carry is not a silent sender (docs/guarantees.md, "Deadlines").
The sender's streams take batches as they come: one may carry nothing for longer than the
idle timeout while the others carry every batch, or while the manifest is still being
exchanged. A hand-written sender (sluice_wire.py) holds one stream back on purpose, so which
stream idles is the test's choice, not the scheduler's: the transfer completes on every
receive path. And a sender that goes fully silent still ends the transfer, naming the stream,
within a generous bound (nothing asserts that it was fast)."""
import os
import random
import struct
import subprocess
import threading
import time

import pytest

import sluice_wire as w
from conftest import SLUICE, free_port, kill_process

TOKEN = "testtoken"
IDLE = 2  # seconds: --idle-timeout of every receiver here
HELD = 3.5 * IDLE  # how long the held-back stream stays silent while the others move
HANG = 120  # seconds: far above any deadline here; reaching it is a hang, not a slow pass
PIECE = 4096

try:
    import ctypes
    import ctypes.util

    _xxh = ctypes.CDLL(ctypes.util.find_library("xxhash"))
    _xxh.XXH3_64bits.restype = ctypes.c_uint64
    _xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
except (OSError, TypeError):
    pytest.skip("libxxhash (a build dependency of sluice) is needed for XXH3 checksums", allow_module_level=True)


def block(file_id, offset, data, pipe=False):
    checksum = 0 if pipe else _xxh.XXH3_64bits(data, len(data))  # pipe pieces carry none (docs/protocol.md)
    return w.frame(w.BLOCK, struct.pack("<QQQ", file_id, offset, checksum) + data)


def start_receiver(tmp_path, mode):
    """`sluice recv` on one receive path: a directory path, a sink, or pipe mode to a file."""
    port = free_port()
    dest = tmp_path / "dest"
    dest.mkdir()
    common = ["--bind", "127.0.0.1", "--port", str(port), "--token", TOKEN, "--idle-timeout", str(IDLE)]
    if mode == "pipe":
        out = open(tmp_path / "out", "wb")
        proc = subprocess.Popen([SLUICE, "recv", "--stdout", *common], stdout=out, stderr=subprocess.PIPE, text=True)
        out.close()
        line = proc.stderr.readline()
    else:
        where = ["--sink", "null"] if mode == "sink" else ["--recv-path", mode]
        proc = subprocess.Popen([SLUICE, "recv", str(dest), *where, *common], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        line = proc.stdout.readline()
    assert line.startswith("sluice://"), line + proc.stderr.read()
    return proc, port


def finish(proc):
    try:
        _, err = proc.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        kill_process(proc)
        pytest.fail(f"the receiver hung (killed after {HANG} s)")
    return proc.returncode, err


def connect(port, streams):
    tid = os.urandom(16)
    ctl, st = w.handshake("127.0.0.1", port, TOKEN, 0, 0, streams, tid)
    assert st == 0
    ctl.settimeout(HANG)
    return ctl, tid


def open_streams(port, streams, tid):
    socks = []
    for i in range(1, streams + 1):
        d, st = w.handshake("127.0.0.1", port, TOKEN, 1, i, streams, tid)
        assert st == 0
        socks.append(d)
    return socks


def end_transfer(ctl, socks, blocks, nbytes):
    """STREAM_END on every stream (the held one sent nothing), TRANSFER_END; the verdict."""
    for i, d in enumerate(socks):
        d.sendall(w.frame(w.STREAM_END, struct.pack("<QQ", blocks if i == 0 else 0, nbytes if i == 0 else 0)))
        d.close()
    ctl.sendall(w.frame(w.TRANSFER_END, struct.pack("<IIQQ", len(socks), 0, blocks, nbytes)))
    while True:
        ftype, payload = w.read_frame(ctl)
        if ftype == w.FINAL_STATUS:
            return struct.unpack_from("<I", payload)[0]
        assert ftype in (w.ALL_VERIFIED, w.MANIFEST_ACK), ftype


def send_slowly_then_end(proc, ctl, socks, pieces, blocks, data, tmp_path, mode):
    """Sends pieces on stream 1, one every tenth of a second, for over HELD seconds while stream
    2 stays silent; then ends the transfer and checks that it completed byte-exact."""
    start = time.monotonic()
    try:
        for piece in pieces:
            socks[0].sendall(piece)
            time.sleep(0.1)
    except OSError as e:  # the receiver gave up on the held stream and closed the others
        rc, err = finish(proc)
        pytest.fail(f"the receiver ended the transfer (exit {rc}) after {time.monotonic() - start:.1f} s: {err} ({e})")
    assert time.monotonic() - start > HELD  # stream 2 was silent this long, well past the idle timeout
    assert proc.poll() is None, proc.stderr.read()
    status = end_transfer(ctl, socks, blocks, len(data))
    rc, err = finish(proc)
    assert status == 0 and rc == 0, err
    if mode == "pipe":
        assert (tmp_path / "out").read_bytes() == data
    elif mode != "sink":
        assert (tmp_path / "dest" / "f").read_bytes() == data


@pytest.mark.parametrize("mode", ["direct", "recv_write", "splice", "sink", "pipe"])
def test_a_stream_held_back_while_another_carries_everything(tmp_path, mode):
    """Stream 2 carries nothing for 3.5 idle timeouts while stream 1 sends a block every tenth
    of a second; then both end. Before the transfer's progress counted, stream 2's timer
    failed the transfer after one idle timeout ("no data from the sender on stream 2")."""
    pipe = mode == "pipe"
    proc, port = start_receiver(tmp_path, mode)
    try:
        ctl, tid = connect(port, 2)
        pieces = int(HELD / 0.1)
        data = random.Random(mode).randbytes(pieces * PIECE)
        entry = (0, 4, "stdin", 0, "") if pipe else (0, w.FILE, "f", len(data), "")
        ctl.sendall(w.manifest(0, [entry]))
        assert w.read_frame(ctl)[0] == w.MANIFEST_ACK
        ctl.sendall(w.frame(w.MANIFEST_END, struct.pack("<IIQQ", 1, 0, 1, 0 if pipe else len(data))))
        socks = open_streams(port, 2, tid)
        frames = [block(0, k * PIECE, data[k * PIECE:(k + 1) * PIECE], pipe) for k in range(pieces)]
        send_slowly_then_end(proc, ctl, socks, frames, pieces, data, tmp_path, mode)
    finally:
        kill_process(proc)


@pytest.mark.parametrize("mode", ["direct", "recv_write", "splice", "sink", "pipe"])
def test_a_stream_held_back_while_another_trickles_one_large_block(tmp_path, mode):
    """As above, but stream 1's data is one large block (2 MiB; a pipe's 1 MiB piece, its
    largest) trickled over 3.5 idle timeouts, a piece every tenth of a second, as a slow link
    delivers it: the transfer moves with every receive, not once the block is whole. Before
    the receive paths credited each receive (TransferPulse::arrived), the direct, splice, sink
    and pipe paths dated the data only per 2 MiB chunk or per block, and stream 2's timer
    failed the transfer after one idle timeout ("no data from the sender on stream 2")."""
    pipe = mode == "pipe"
    proc, port = start_receiver(tmp_path, mode)
    try:
        ctl, tid = connect(port, 2)
        data = random.Random(mode).randbytes((1 if pipe else 2) << 20)
        entry = (0, 4, "stdin", 0, "") if pipe else (0, w.FILE, "f", len(data), "")
        ctl.sendall(w.manifest(0, [entry]))
        assert w.read_frame(ctl)[0] == w.MANIFEST_ACK
        ctl.sendall(w.frame(w.MANIFEST_END, struct.pack("<IIQQ", 1, 0, 1, 0 if pipe else len(data))))
        socks = open_streams(port, 2, tid)
        frame = block(0, 0, data, pipe)
        step = -(-len(frame) // int(HELD / 0.1))
        send_slowly_then_end(proc, ctl, socks, [frame[k:k + step] for k in range(0, len(frame), step)], 1, data, tmp_path,
                             mode)
    finally:
        kill_process(proc)


def test_streams_wait_while_the_manifest_is_exchanged_slowly(tmp_path):
    """No data at all for 3.5 idle timeouts: the control connection moves (a page every tenth
    of a second, each acked), every data stream waits, and the transfer completes."""
    proc, port = start_receiver(tmp_path, "direct")
    try:
        ctl, tid = connect(port, 2)
        socks = open_streams(port, 2, tid)
        pages = int(HELD / 0.1)
        start = time.monotonic()
        for k in range(pages):
            ctl.sendall(w.manifest(k, [(k, w.FILE, f"f{k}", 1, "")]))
            assert w.read_frame(ctl)[0] == w.MANIFEST_ACK
            time.sleep(0.1)
        assert time.monotonic() - start > HELD
        ctl.sendall(w.frame(w.MANIFEST_END, struct.pack("<IIQQ", pages, 0, pages, pages)))
        for k in range(pages):
            socks[0].sendall(block(k, 0, b"%c" % (65 + k % 26)))
        status = end_transfer(ctl, socks, pages, pages)
        rc, err = finish(proc)
        assert status == 0 and rc == 0, err
        assert (tmp_path / "dest" / "f1").read_bytes() == b"B"
    finally:
        kill_process(proc)


@pytest.mark.parametrize("mode", ["direct", "splice", "pipe"])
def test_a_sender_gone_fully_silent_still_ends_the_transfer(tmp_path, mode):
    """One block on stream 1, then nothing anywhere (the connections stay open): the receiver
    fails with exit 4 naming a data stream, the sender's address and the idle timeout, by its deadline (at most two
    idle timeouts after the last movement; HANG is only the bound against a hang)."""
    pipe = mode == "pipe"
    proc, port = start_receiver(tmp_path, mode)
    try:
        ctl, tid = connect(port, 2)
        entry = (0, 4, "stdin", 0, "") if pipe else (0, w.FILE, "f", 2 * PIECE, "")
        ctl.sendall(w.manifest(0, [entry]))
        assert w.read_frame(ctl)[0] == w.MANIFEST_ACK
        ctl.sendall(w.frame(w.MANIFEST_END, struct.pack("<IIQQ", 1, 0, 1, 0 if pipe else 2 * PIECE)))
        socks = open_streams(port, 2, tid)
        socks[0].sendall(block(0, 0, os.urandom(PIECE), pipe))
        rc, err = finish(proc)
        assert rc == 4, err
        assert "no data from the sender on stream " in err and "(sender 127.0.0.1:" in err and "idle timeout" in err, err
        ctl.close()
        for d in socks:
            d.close()
    finally:
        kill_process(proc)
