"""A hostile pusher's transfer against `sluice serve --port --allow-upload` (the request and
attaches: test_push_hostile.py): a push that stops mid-manifest, mid-block or before
TRANSFER_END, slowloris on the request, attach and handshake, manifests and blocks that break
the receiver's rules, and names a file may have that a terminal must not see raw. For every
probe: the serve stays up and serves others meanwhile (HTTP and a real push), refuses with a
clear message or closes by its deadline, and leaves nothing under the final name of a file it
did not receive whole. No timed assertions: every wait_for is a bound against a hang."""
import os
import struct
import time

import pytest

import sluice_wire as w
from conftest import leftovers, wait_for
from push_client import (HANG, TOKEN, Pusher, hello, manifest_raw, served, server, stats, still_serving)  # noqa: F401

try:
    w.xxh3(b"")
except OSError as e:
    pytest.skip(str(e), allow_module_level=True)
block = w.block_frame


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
