"""A sender may cut a file into any blocks that do not overlap (docs/protocol.md), in any order,
on any stream. A hand-written sender (sluice_wire.py) cuts files at offsets off 4 KiB pages and
sends the pieces in awkward orders over several streams at once; each receive path must write
exactly the bytes sent (the direct path writes the pages a block shares with a neighbour
through the page cache, never over the neighbour's bytes). And a sender that declares a large
file and stops must not leave the file allocated at its declared size."""
import ctypes
import ctypes.util
import os
import random
import struct
import threading
from pathlib import Path

import pytest

import sluice_wire as w
from conftest import leftovers, wait_for

_lib = ctypes.util.find_library("xxhash")
if not _lib:
    pytest.skip("libxxhash (a build dependency of sluice) is needed for XXH3 checksums", allow_module_level=True)
_xxh = ctypes.CDLL(_lib)
_xxh.XXH3_64bits.restype = ctypes.c_uint64
_xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]


def xxh3(data):
    return _xxh.XXH3_64bits(data, len(data))


def block_frame(file_id, offset, data):
    return w.frame(w.BLOCK, struct.pack("<QQQ", file_id, offset, xxh3(data)) + data)


MiB = 1 << 20
PATHS = ["direct", "recv_write"]


def pieces(cuts, size):
    """[0, c1), [c1, c2), ... [cn, size) as (offset, length)."""
    edges = [0] + list(cuts) + [size]
    return [(a, b - a) for a, b in zip(edges, edges[1:])]


def tiny_pieces(size, rng):
    """Blocks of 1 byte to 2 pages at random edges: most pages are shared by two or three."""
    out, off = [], 0
    while off < size:
        n = min(size - off, rng.randint(1, 8192))
        out.append((off, n))
        off += n
    return out


def scenarios():
    """name -> (file sizes, blocks as (stream, file index, offset, length) in send order per stream, streams)."""
    rng = random.Random(14)
    s = {}
    two = 2 * MiB
    s["tail-first-head-last"] = ([two], [(1, 0, 1024, two - 1024), (1, 0, 0, 1024)], 1)
    # The same, each block sent only once the one before is written and journaled, so the
    # head's write certainly lands after the tail's (in flight together, the order is luck).
    s["tail-first-head-last-in-turn"] = ([two], [(1, 0, 1024, two - 1024), (1, 0, 0, 1024)], 1)
    s["head-last-in-turn-split-at-3000"] = ([two], [(1, 0, 3000, two - 3000), (1, 0, 0, 3000)], 1)
    s["split-at-1000"] = ([two], [(1, 0, 0, 1000), (1, 0, 1000, two - 1000)], 1)
    s["split-at-1000-reversed-two-streams"] = ([two], [(1, 0, 1000, two - 1000), (2, 0, 0, 1000)], 2)
    # Size 4097 is under the direct path's O_DIRECT threshold; 2 MiB + 4097 is above it.
    big_odd = two + 4097
    s["size-4097"] = ([4097], [(1, 0, 4000, 97), (2, 0, 0, 4000)], 2)
    s["odd-size-last-block-inside-last-page"] = (
        [big_odd], [(1, 0, two + 4000, 97), (2, 0, 0, two + 4000)], 2)
    s["odd-size-last-block-from-a-page-edge"] = (
        [big_odd], [(2, 0, two + 4096, 1), (1, 0, 1, two + 4095), (2, 0, 0, 1)], 2)
    # Blocks longer than one receive buffer (2 MiB) starting off a page.
    six = 6 * MiB
    cuts = pieces([3000, 4 * MiB + 5, six - 1], six)
    s["multi-buffer-blocks-off-page"] = ([six], [(i % 3 + 1, 0, o, n) for i, (o, n) in enumerate(reversed(cuts))], 3)
    # Many tiny blocks, round-robin over 4 streams sent at once: neighbours on one page arrive
    # on different streams at the same time.
    size = MiB + MiB // 2 + 123
    tiny = tiny_pieces(size, rng)
    s["tiny-blocks-four-streams"] = ([size], [(i % 4 + 1, 0, o, n) for i, (o, n) in enumerate(tiny)], 4)
    # Blocks of exactly one page, each straddling two pages, round-robin over 4 streams: every
    # page is written half by one stream and half by another, at the same time.
    size = MiB + 5000
    cuts = pieces(range(1000, size, 4096), size)
    s["page-blocks-off-by-1000-four-streams"] = ([size], [(i % 4 + 1, 0, o, n) for i, (o, n) in enumerate(cuts)], 4)
    # Two files, interleaved, cut at random edges.
    a, b = 3 * MiB + 17, MiB + 4095
    blocks = [(0, o, n) for o, n in pieces(sorted(rng.sample(range(1, a), 9)), a)]
    blocks += [(1, o, n) for o, n in pieces(sorted(rng.sample(range(1, b), 5)), b)]
    rng.shuffle(blocks)
    s["two-files-shuffled"] = ([a, b], [(i % 3 + 1, f, o, n) for i, (f, o, n) in enumerate(blocks)], 3)
    return s


SCENARIOS = scenarios()


def transfer(rx, files, blocks, streams, in_turn_dest=None, connect=None):
    """Plays a whole transfer: manifest, the blocks (each stream in its own thread, all at
    once), STREAM_END, TRANSFER_END. Returns the FINAL_STATUS status. in_turn_dest: one
    stream, one file: each block but the last is sent once the ones before are journaled.
    connect(role, index, count, transfer_id) -> (socket, ServerAuth status): how each
    connection is opened and through its hello (default: to rx.port, as w.handshake)."""
    if connect is None:
        def connect(role, index, count, tid):
            return w.handshake("127.0.0.1", rx.port, "testtoken", role, index, count, tid)
    tid = os.urandom(16)
    c, status = connect(0, 0, streams, tid)
    assert status == 0
    c.settimeout(120)
    entries = [(i, w.FILE, f"f{i}", len(data), "") for i, data in enumerate(files)]
    c.sendall(w.manifest(0, entries))
    assert w.read_frame(c)[0] == w.MANIFEST_ACK
    total = sum(len(d) for d in files)
    c.sendall(w.frame(w.MANIFEST_END, struct.pack("<IIQQ", 1, 0, len(files), total)))
    socks = []
    for i in range(1, streams + 1):
        d, status = connect(1, i, streams, tid)
        assert status == 0
        socks.append(d)
    per_stream = {i: [b for b in blocks if b[0] == i] for i in range(1, streams + 1)}
    go = threading.Barrier(streams)
    errors = []

    def send(i):
        try:
            frames = b"".join(block_frame(f, o, files[f][o:o + n]) for _, f, o, n in per_stream[i])
            go.wait(timeout=60)  # all streams start together
            if not in_turn_dest:
                socks[i - 1].sendall(frames)
                return
            for k, (_, f, o, n) in enumerate(per_stream[i]):
                socks[i - 1].sendall(block_frame(f, o, files[f][o:o + n]))
                if k + 1 < len(per_stream[i]):
                    assert wait_for(lambda: journal_records(in_turn_dest) == k + 1, 60)
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(1, streams + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    ftype, payload = w.read_frame(c)
    assert ftype == w.ALL_VERIFIED, (ftype, payload)
    for i, d in enumerate(socks, 1):
        mine = per_stream[i]
        d.sendall(w.frame(w.STREAM_END, struct.pack("<QQ", len(mine), sum(b[3] for b in mine))))
        d.close()
    c.sendall(w.frame(w.TRANSFER_END, struct.pack("<IIQQ", streams, 0, len(blocks), sum(b[3] for b in blocks))))
    ftype, payload = w.read_frame(c)
    c.close()
    assert ftype == w.FINAL_STATUS
    return struct.unpack("<I", payload[:4])[0]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_blocks_off_page_edges_are_written_exactly(tmp_path, receiver_factory, path, name):
    check_scenario(tmp_path, receiver_factory, name, "--recv-path", path)


@pytest.mark.parametrize("name", ["page-blocks-off-by-1000-four-streams", "tiny-blocks-four-streams"])
def test_blocks_off_page_edges_with_verify_and_sync(tmp_path, receiver_factory, name):
    """--verify reads every block back with O_DIRECT (the kernel writes the pages written
    through the page cache back first); --sync fsyncs them with the rest."""
    check_scenario(tmp_path, receiver_factory, name, "--verify", "--sync")


def check_scenario(tmp_path, receiver_factory, name, *args):
    path = " ".join(args)
    sizes, blocks, streams = SCENARIOS[name]
    # The layout is a partition of each file: every byte sent exactly once.
    for f, size in enumerate(sizes):
        assert sorted((o, n) for _, g, o, n in blocks if g == f) == pieces(
            sorted(o for _, g, o, n in blocks if g == f and o), size)
    rng = random.Random(name)
    files = [rng.randbytes(size) for size in sizes]
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest, *args)
    assert transfer(rx, files, blocks, streams, dest if "in-turn" in name else None) == 0
    rc, out, err = rx.wait()
    assert rc == 0, err
    assert_written(dest, files, f"{name}, {path}")


def assert_written(dest, files, label):
    """Each of files is dest/f0, f1, ... byte for byte, and nothing temporary is left."""
    for i, data in enumerate(files):
        got = (dest / f"f{i}").read_bytes()
        assert len(got) == len(data)
        if got != data:
            first = next(k for k in range(len(data)) if got[k] != data[k])
            pytest.fail(f"f{i}: first wrong byte at offset {first} ({label})")
    assert leftovers(dest) == []


def journal_records(dest):
    js = [p for p in Path(dest).rglob(".sluice-part.*.j")]
    if len(js) != 1:
        return 0
    return max(0, (js[0].stat().st_size - 24) // 32)


def test_an_abandoned_large_file_is_not_allocated_to_its_declared_size(tmp_path, receiver_factory):
    """A sender declares 8 GiB, sends 1 MiB at the start and a few scraps far into the file,
    and disappears: the temporary file kept for a resume holds about what was sent."""
    declared = 8 << 30
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)  # the default receive path
    tid = os.urandom(16)
    c, _ = w.handshake("127.0.0.1", rx.port, "testtoken", 0, 0, 1, tid)
    c.sendall(w.manifest(0, [(0, w.FILE, "huge", declared, "")]))
    assert w.read_frame(c)[0] == w.MANIFEST_ACK
    c.sendall(w.frame(w.MANIFEST_END, struct.pack("<IIQQ", 1, 0, 1, declared)))
    d, status = w.handshake("127.0.0.1", rx.port, "testtoken", 1, 1, 1, tid)
    assert status == 0
    rng = random.Random(3)
    sent = [(0, rng.randbytes(MiB))]
    sent += [(k * (512 * MiB) + 4096, rng.randbytes(4096)) for k in range(1, 9)]
    for off, data in sent:
        d.sendall(block_frame(0, off, data))
    # Every block verified (and journaled for a resume), then the sender vanishes.
    assert wait_for(lambda: journal_records(dest) == len(sent), 60)
    temp = [p for p in leftovers(dest) if not p.endswith(".j")]
    assert len(temp) == 1
    d.close()
    c.close()
    rc, out, err = rx.wait()
    assert rc != 0
    st = os.stat(temp[0])  # kept, with its journal, for a resume
    on_disk = st.st_blocks * 512
    sent_bytes = sum(len(x) for _, x in sent)
    # At most twice what was sent plus the receive path's bounded step ahead, not 8 GiB.
    assert on_disk <= 2 * sent_bytes + 64 * MiB, f"{on_disk} bytes allocated after {sent_bytes} sent"
    with open(temp[0], "rb") as f:
        for off, data in sent:
            f.seek(off)
            assert f.read(len(data)) == data


def test_an_abandoned_file_without_a_verified_block_is_removed(tmp_path, receiver_factory):
    declared = 8 << 30
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    tid = os.urandom(16)
    c, _ = w.handshake("127.0.0.1", rx.port, "testtoken", 0, 0, 1, tid)
    c.sendall(w.manifest(0, [(0, w.FILE, "huge", declared, "")]))
    assert w.read_frame(c)[0] == w.MANIFEST_ACK
    d, _ = w.handshake("127.0.0.1", rx.port, "testtoken", 1, 1, 1, tid)
    frame = block_frame(0, 0, os.urandom(4 * MiB))
    d.sendall(frame[: 3 * MiB])  # three quarters of a block, then the sender vanishes
    assert wait_for(lambda: leftovers(dest) != [], 30)
    d.close()
    c.close()
    rc, out, err = rx.wait()
    assert rc != 0
    assert leftovers(dest) == []


def start_streams(rx, sizes, streams):
    """Control connection and manifest (no MANIFEST_END: the receiver waits for more), then
    the data streams. Returns (control, data sockets)."""
    tid = os.urandom(16)
    c, status = w.handshake("127.0.0.1", rx.port, "testtoken", 0, 0, streams, tid)
    assert status == 0
    c.settimeout(120)
    c.sendall(w.manifest(0, [(i, w.FILE, f"f{i}", n, "") for i, n in enumerate(sizes)]))
    assert w.read_frame(c)[0] == w.MANIFEST_ACK
    socks = []
    for i in range(1, streams + 1):
        d, status = w.handshake("127.0.0.1", rx.port, "testtoken", 1, i, streams, tid)
        assert status == 0
        socks.append(d)
    return c, socks


def refused_as_sent_twice(rx, dest, data):
    """The receiver fails with a protocol error naming f0, and leaves nothing but f0 (whole)."""
    rc, out, err = rx.wait()
    assert rc != 0
    assert "'f0'" in err and "a block sent twice" in err, err
    names = sorted(p.name for p in Path(dest).iterdir())
    assert names in ([], ["f0"]), names
    if names:
        assert (Path(dest) / "f0").read_bytes() == data


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("size", [4097, 3 * MiB])
def test_a_block_of_a_complete_file_sent_again_is_refused(tmp_path, receiver_factory, path, size):
    """An honest sender never sends a block twice (after a reconnect it sends again only what the
    receiver's STREAM_RESUME says did not arrive). A file is complete (its verified ranges are
    freed then) when its block comes again on another stream: refused as a protocol error before
    the stream touches the entry's names, not counted a second time (it once passed the overlap
    check against the freed ranges and journaled the file as '.j' at the top of DIR)."""
    data = random.Random(size).randbytes(size)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest, "--recv-path", path)
    c, socks = start_streams(rx, [size], 2)
    socks[0].sendall(block_frame(0, 0, data))
    assert wait_for(lambda: (dest / "f0").exists(), 60)
    socks[1].sendall(block_frame(0, 0, data))
    refused_as_sent_twice(rx, dest, data)
    for s in socks + [c]:
        s.close()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("size", [4097, 3 * MiB])
def test_one_block_on_two_streams_at_once_is_refused(tmp_path, receiver_factory, path, size):
    """The same whole-file block on two streams at the same moment: whichever comes second is
    refused (while the first is in flight, or once it completed the file), and the two streams
    never share the entry (under scripts/test-tsan: no report)."""
    data = random.Random(size).randbytes(size)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest, "--recv-path", path)
    c, socks = start_streams(rx, [size], 2)
    frame = block_frame(0, 0, data)
    go = threading.Barrier(2)

    def send(s):
        go.wait(timeout=60)
        try:
            s.sendall(frame)
        except OSError:
            pass  # the receiver may have failed already and closed this stream

    threads = [threading.Thread(target=send, args=(s,)) for s in socks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    refused_as_sent_twice(rx, dest, data)
    for s in socks + [c]:
        s.close()
