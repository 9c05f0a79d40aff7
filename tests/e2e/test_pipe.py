"""Pipe mode end to end: `producer | sluice send - URL` into `sluice recv --stdout | consumer`."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import SLUICE, file_sha256 as sha256_file, free_port, write_random


class StreamReceiver:
    """`sluice recv --stdout` writing into `stdout` (a file object or subprocess.PIPE)."""

    def __init__(self, stdout, *args):
        self.port = free_port()
        cmd = [SLUICE, "recv", "--stdout", str(self.port), "--bind", "127.0.0.1", "--token", "pipetoken", "--json", *args]
        self.proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True)
        self.url = self.proc.stderr.readline().strip()
        assert self.url.startswith("sluice://"), self.proc.stderr.read()

    def wait(self, timeout=120):
        err = self.proc.stderr.read()
        self.proc.wait(timeout=timeout)
        return self.proc.returncode, err

    def stats(self, err):
        return json.loads(err.strip().splitlines()[-1])


def send_from(producer_cmd, url, *args, shell=True):
    """Runs `producer | sluice send - URL`; returns (send rc, send stderr, send stdout, producer)."""
    producer = subprocess.Popen(producer_cmd, shell=shell, stdout=subprocess.PIPE)
    sender = subprocess.Popen([SLUICE, "send", "-", url, *args], stdin=producer.stdout, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    producer.stdout.close()  # only the sender holds the read end
    out, err = sender.communicate(timeout=120)
    producer.wait(timeout=60)
    return sender.returncode, err, out, producer


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "source.bin"
    write_random(path, 48 << 20 | 12345, seed=7)  # not a multiple of the piece size
    return path


@pytest.mark.parametrize("streams", [1, 4, 16])
def test_pipe_round_trip_through_pipes(tmp_path, source, streams):
    out_path = tmp_path / "out.bin"
    with open(out_path, "wb") as out:
        consumer = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=out)
        rx = StreamReceiver(consumer.stdin)
        consumer.stdin.close()
        rc, err, sout, _ = send_from(f"cat '{source}'", rx.url, "--streams", str(streams), "--json")
        rrc, rerr = rx.wait()
        consumer.wait(timeout=60)
    assert rc == 0, err
    assert rrc == 0, rerr
    assert sha256_file(out_path) == sha256_file(source)
    sent, got = json.loads(sout.strip().splitlines()[-1]), rx.stats(rerr)
    assert sent["bytes"] == got["bytes"] == source.stat().st_size
    assert sent["send_path"] == "pipe_splice" and got["recv_path"] == "pipe_splice"
    assert got["streams"] == streams
    assert got["fallbacks"] == []  # stdout is a pipe: spliced


def test_pipe_from_a_file_into_a_file(tmp_path, source):
    out_path = tmp_path / "out.bin"
    with open(out_path, "wb") as out:
        rx = StreamReceiver(out)
        with open(source, "rb") as inp:
            sender = subprocess.run([SLUICE, "send", "-", rx.url], stdin=inp, capture_output=True, text=True, timeout=120)
        rrc, rerr = rx.wait()
    assert sender.returncode == 0, sender.stderr
    assert rrc == 0, rerr
    assert sha256_file(out_path) == sha256_file(source)


def test_output_without_splice_is_copied_and_says_so(tmp_path, source):
    out_path = tmp_path / "appended.bin"
    out_path.write_bytes(b"")
    fd = os.open(out_path, os.O_WRONLY | os.O_APPEND)  # splice refuses O_APPEND files
    try:
        rx = StreamReceiver(fd)
    finally:
        os.close(fd)
    rc, err, _, _ = send_from(f"cat '{source}'", rx.url)
    rrc, rerr = rx.wait()
    assert rc == 0 and rrc == 0, err + rerr
    assert sha256_file(out_path) == sha256_file(source)
    assert any("copied through a buffer" in f for f in rx.stats(rerr)["fallbacks"])


def test_slow_producer_small_writes_keep_order(tmp_path):
    out_path = tmp_path / "out.bin"
    producer = (
        "python3 -c \"import sys,time\n"
        "for i in range(400):\n"
        "    sys.stdout.buffer.write(b'%05d-' % i * 7); sys.stdout.flush()\n"
        "    time.sleep(0.002) if i % 50 == 0 else None\""
    )
    with open(out_path, "wb") as out:
        rx = StreamReceiver(out)
        rc, err, _, _ = send_from(producer, rx.url, "--streams", "3")
        rrc, rerr = rx.wait()
    assert rc == 0 and rrc == 0, err + rerr
    assert out_path.read_bytes() == b"".join(b"%05d-" % i * 7 for i in range(400))


def test_empty_pipe(tmp_path):
    out_path = tmp_path / "out.bin"
    with open(out_path, "wb") as out:
        rx = StreamReceiver(out)
        rc, err, _, _ = send_from("true", rx.url)
        rrc, rerr = rx.wait()
    assert rc == 0 and rrc == 0, err + rerr
    assert out_path.read_bytes() == b""
    assert rx.stats(rerr)["bytes"] == 0


@pytest.mark.parametrize("how,expect", [
    ("kill -9 $$", "killed by signal 9 (SIGKILL)"),
    ("exit 3", "exited with status 3"),
])
def test_producer_that_dies_fails_both_sides(tmp_path, how, expect):
    if os.geteuid() != 0:
        pytest.skip("watching the producer needs CAP_NET_ADMIN (root)")
    out_path = tmp_path / "out.bin"
    with open(out_path, "wb") as out:
        rx = StreamReceiver(out)
        rc, err, _, _ = send_from(f"head -c 20000000 /dev/urandom; {how}", rx.url)
        rrc, rerr = rx.wait()
    assert rc == 5, err
    assert expect in err and "truncated" in err, err
    assert rrc == 5, rerr
    assert expect in rerr and "truncated" in rerr, rerr


def test_sender_killed_mid_pipe_fails_receiver(tmp_path):
    out_path = tmp_path / "out.bin"
    with open(out_path, "wb") as out:
        rx = StreamReceiver(out, "--idle-timeout", "20")
        producer = subprocess.Popen("head -c 2000000000 /dev/zero", shell=True, stdout=subprocess.PIPE)
        sender = subprocess.Popen([SLUICE, "send", "-", rx.url, "--rate-limit", "20M"], stdin=producer.stdout,
                                  stderr=subprocess.PIPE)
        producer.stdout.close()
        time.sleep(1.0)
        sender.send_signal(signal.SIGKILL)
        sender.wait()
        producer.kill()
        producer.wait()
        rrc, rerr = rx.wait()
    assert rrc != 0, rerr
    assert "disconnected" in rerr or "closed" in rerr, rerr


def test_consumer_closing_early_stops_the_sender(tmp_path):
    consumer = subprocess.Popen(["head", "-c", "1000"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    rx = StreamReceiver(consumer.stdin)
    consumer.stdin.close()
    rc, err, _, _ = send_from("head -c 300000000 /dev/zero", rx.url)
    rrc, rerr = rx.wait()
    consumer.wait(timeout=30)
    assert rrc == 6, rerr
    assert "closed by its reader" in rerr, rerr
    assert rc != 0, err
    assert "closed by its reader" in err, err


def test_pipe_into_a_directory_receiver_is_refused(tmp_path, receiver_factory):
    dest = tmp_path / "dest"
    dest.mkdir()
    r = receiver_factory(dest)
    rc, err, _, _ = send_from("echo hello", r.url)
    rrc, _, rerr = r.wait()
    assert rc != 0 and rrc != 0
    assert "sluice recv --stdout" in err and "sluice recv --stdout" in rerr, err + rerr
    assert list(dest.iterdir()) == []


def test_files_into_a_pipe_receiver_are_refused(tmp_path, source):
    out_path = tmp_path / "out.bin"
    with open(out_path, "wb") as out:
        rx = StreamReceiver(out)
        sender = subprocess.run([SLUICE, "send", str(source), rx.url], capture_output=True, text=True, timeout=60)
        rrc, rerr = rx.wait()
    assert sender.returncode != 0 and rrc != 0
    assert "sluice recv DIR" in sender.stderr and "sluice recv DIR" in rerr
    assert out_path.read_bytes() == b""


def test_dash_must_be_the_only_path(tmp_path, source):
    r = subprocess.run([SLUICE, "send", "-", str(source), "sluice://127.0.0.1:1/?token=x"], capture_output=True, text=True)
    assert r.returncode == 2 and "only PATH" in r.stderr
