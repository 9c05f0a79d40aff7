"""Pipe mode and caller-supplied destinations from Python: send_pipe from a pipe into a
Receiver(fd=...) (a file, and a pipe read by a consumer thread), into a Receiver(sink=...);
a tree into a sink; ranges of open files with send_fds; a sink's exception re-raised."""
import hashlib
import os
import random
import threading

import pytest
from conftest import Served, local_receiver

import sluice


def producer(data, piece=1 << 16):
    """A pipe fed by a thread; returns the read end (the caller closes it)."""
    r, w = os.pipe()

    def feed():
        with os.fdopen(w, "wb", buffering=0) as f:
            for i in range(0, len(data), piece):
                f.write(data[i:i + piece])

    threading.Thread(target=feed, daemon=True).start()
    return r


def payload(n=20 << 20, seed=3):
    return random.Random(seed).randbytes(n)


def test_pipe_from_a_pipe_into_a_file(tmp_path):
    data = payload()
    out = tmp_path / "out.bin"
    with open(out, "wb") as f:
        rx = local_receiver(None, fd=f)
        served = Served(rx)
        r = producer(data)
        try:
            sent = sluice.send_pipe(r, rx.url, streams=3, block_size="1M")
        finally:
            os.close(r)
        got = served.join()
    assert out.read_bytes() == data
    assert sent["bytes_sent"] == got["bytes_sent"] == len(data)


def test_send_stream_is_a_deprecated_alias_of_send_pipe(tmp_path):
    data = payload(1 << 20, seed=5)
    out = tmp_path / "out.bin"
    with open(out, "wb") as f:
        rx = local_receiver(None, fd=f)
        served = Served(rx)
        r = producer(data)
        try:
            with pytest.warns(DeprecationWarning, match="send_pipe"):
                sent = sluice.send_stream(r, rx.url, streams=2)
        finally:
            os.close(r)
        served.join()
    assert out.read_bytes() == data
    assert sent["bytes_sent"] == len(data)


def test_pipe_into_a_pipe_read_by_a_consumer(tmp_path):
    data = payload(seed=4)
    cr, cw = os.pipe()
    digest = hashlib.sha256()
    total = 0

    def consume():
        nonlocal total
        with os.fdopen(cr, "rb", buffering=0) as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
                total += len(chunk)

    consumer = threading.Thread(target=consume)
    consumer.start()
    rx = local_receiver(None, fd=cw)
    served = Served(rx)
    r = producer(data)
    try:
        sluice.send_pipe(r, rx.url)
    finally:
        os.close(r)
    served.join()
    os.close(cw)
    consumer.join(30)
    assert total == len(data)
    assert digest.digest() == hashlib.sha256(data).digest()


class CollectingSink:
    def __init__(self):
        self.files = {}
        self.done = []
        self.lock = threading.Lock()

    def write(self, entry, offset, data):
        with self.lock:
            buf = self.files.setdefault(entry["path"], bytearray())
            if len(buf) < offset + len(data):
                buf.extend(b"\0" * (offset + len(data) - len(buf)))
            buf[offset:offset + len(data)] = data

    def entry_done(self, entry):
        with self.lock:
            self.done.append(entry)


def test_pipe_into_a_sink_arrives_in_order():
    data = payload(seed=5)
    offsets = []

    class Ordered(CollectingSink):
        def write(self, entry, offset, data):
            assert entry["is_pipe"]
            offsets.append((offset, len(data)))
            super().write(entry, offset, data)

    sink = Ordered()
    rx = local_receiver(None, sink=sink)
    served = Served(rx)
    r = producer(data)
    try:
        sluice.send_pipe(r, rx.url, streams=4, block_size="1M")
    finally:
        os.close(r)
    served.join()
    (path, got), = sink.files.items()
    assert bytes(got) == data
    pos = 0
    for off, n in offsets:  # one call at a time, each where the previous ended
        assert off == pos
        pos += n
    assert pos == len(data)


def test_tree_into_a_sink(tree):
    sink = CollectingSink()
    rx = local_receiver(None, sink=sink)
    served = Served(rx)
    sluice.send([tree], rx.url)
    served.join()
    for dirpath, _, files in os.walk(tree):
        for name in files:
            p = os.path.join(dirpath, name)
            if os.path.islink(p) or os.path.getsize(p) == 0:
                continue
            rel = os.path.relpath(p, tree.parent)
            with open(p, "rb") as f:
                assert bytes(sink.files[rel]) == f.read(), rel
    assert len({e["path"] for e in sink.done}) >= 21  # every regular file, empty ones too


class Boom(Exception):
    pass


def test_sink_exception_fails_the_transfer_and_is_reraised(tree):
    class Failing:
        def write(self, entry, offset, data):
            raise Boom(f"no room for {entry['path']}")

    rx = local_receiver(None, sink=Failing())
    served = Served(rx)
    with pytest.raises(sluice.Error):
        sluice.send([tree], rx.url)
    with pytest.raises(Boom, match="no room"):
        served.join()


def test_sink_keeping_a_view_fails_the_transfer(tree):
    kept = []

    class Keeper:
        def write(self, entry, offset, data):
            kept.append(data[:10])  # a view past the call: refused

    rx = local_receiver(None, sink=Keeper())
    served = Served(rx)
    with pytest.raises(sluice.Error):
        sluice.send([tree], rx.url)
    with pytest.raises(BufferError, match="copy it"):
        served.join()


def test_send_fds_sends_ranges_of_open_files(tmp_path, dst):
    data = payload(3 << 20, seed=6)
    src = tmp_path / "whole.bin"
    src.write_bytes(data)
    rx = local_receiver(dst)
    served = Served(rx)
    with open(src, "rb") as f:
        sluice.send_fds([sluice.FdSource(f, "parts/middle.bin", offset=1000, length=1 << 20),
                         sluice.FdSource(f.fileno(), "parts/tail.bin", offset=2 << 20)], rx.url)
    served.join()
    assert (dst / "parts/middle.bin").read_bytes() == data[1000:1000 + (1 << 20)]
    assert (dst / "parts/tail.bin").read_bytes() == data[2 << 20:]


def test_receiver_needs_exactly_one_destination(tmp_path):
    with pytest.raises(sluice.UsageError, match="exactly one"):
        sluice.Receiver()
    with pytest.raises(sluice.UsageError, match="exactly one"):
        sluice.Receiver(tmp_path, fd=1)
    with pytest.raises(sluice.UsageError, match="write"):
        sluice.Receiver(sink=object())
