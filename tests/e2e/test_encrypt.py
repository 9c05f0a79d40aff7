"""Encrypted transfers (issue 18): TLS 1.3 keyed from the token on every connection.

What must hold: the bytes on a real link (a veth pair between two namespaces this test makes)
carry no plaintext of the file; a byte flipped or a record replayed in flight fails the
transfer as an integrity error (exit 8); a wrong token and a side that does not encrypt are
refused with a message naming the side and the option; pipe mode and resume work encrypted;
cold blocks (a sparse file's extents too) are read with O_DIRECT and arrive whole."""
import json
import os
import secrets
import shutil
import socket
import struct
import subprocess
import threading
from pathlib import Path

import pytest

import sluice_wire as w
from conftest import SLUICE, cached_pages, evict, file_hash, run_sluice, write_random
from corrupting_proxy import CorruptingProxy, shut_down

NETNS = Path(__file__).resolve().parents[2] / "bench" / "testbed" / "netns.sh"


def mkd(p):
    p.mkdir(exist_ok=True)
    return p


def stats(out):
    return json.loads(out.strip().splitlines()[-1])


def test_an_encrypted_tree_and_its_stats(tmp_path, receiver_factory):
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    write_random(src / "big.bin", 20 << 20, 3)
    for i in range(50):
        (src / "d" / f"f{i}").write_bytes(os.urandom(1000 * i))
    rx = receiver_factory(mkd(tmp_path / "dst"), "--encrypt", "-v")
    r = run_sluice("send", src, rx.url, "--encrypt", "--json", "-v")
    assert r.returncode == 0, r.stderr
    rc, out, err = rx.wait()
    assert rc == 0, err
    s, t = stats(r.stdout), stats(out)
    assert s["encryption"] in ("tls13-user", "tls13-ktls") and t["encryption"] == s["encryption"]
    assert s["encryption_why"]  # why that record layer, as the kernel answered
    assert "encryption: tls13-" in r.stderr and "encryption: tls13-" in err
    for p in src.rglob("*"):
        if p.is_file():
            assert (tmp_path / "dst" / "src" / p.relative_to(src)).read_bytes() == p.read_bytes()


def test_loopback_is_clear_by_default_and_says_so(tmp_path, receiver_factory):
    (tmp_path / "a").write_bytes(b"x" * 1000)
    rx = receiver_factory(mkd(tmp_path / "dst"))
    r = run_sluice("send", tmp_path / "a", rx.url, "--json")
    assert r.returncode == 0, r.stderr
    rc, out, err = rx.wait()
    assert rc == 0 and stats(r.stdout)["encryption"] == "off" and stats(out)["encryption"] == "off"


def test_pipe_mode_encrypted(tmp_path):
    data = os.urandom(5 << 20)
    port = w_free_port()
    rx = subprocess.Popen([SLUICE, "recv", "--stdout", "--bind", "127.0.0.1", "--port", str(port), "--token", "t",
                           "--encrypt", "--url-file", str(tmp_path / "url")], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url = wait_for_url(tmp_path / "url", rx)
        tx = subprocess.Popen([SLUICE, "send", "-", url, "--encrypt", "--streams", "3"], stdin=subprocess.PIPE,
                              stderr=subprocess.PIPE)
        # The sender's input is fed from a thread while the receiver's output is drained here.
        feeder = threading.Thread(target=lambda: (tx.stdin.write(data), tx.stdin.close()), daemon=True)
        feeder.start()
        out, err = rx.communicate(timeout=120)
        feeder.join(timeout=60)
        assert tx.wait(timeout=60) == 0, tx.stderr.read()
        assert rx.returncode == 0, err
        assert out == data
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.communicate()


@pytest.mark.parametrize("recv_flag,send_flag,refuser", [("--encrypt", None, "does not encrypt"),
                                                          (None, "--encrypt", "encrypts and this receiver does not"),
                                                          ("--encrypt", "--no-encrypt", "does not encrypt")])
def test_a_downgrade_is_refused_naming_the_side_and_the_option(tmp_path, receiver_factory, recv_flag, send_flag, refuser):
    (tmp_path / "a").write_bytes(b"secret" * 100)
    rx = receiver_factory(mkd(tmp_path / "dst"), *([recv_flag] if recv_flag else []))
    r = run_sluice("send", tmp_path / "a", rx.url, *([send_flag] if send_flag else []))
    assert r.returncode == 3, r.stderr  # auth
    assert "receiver" in r.stderr and "--no-encrypt" in r.stderr and "--encrypt" in r.stderr
    rx.proc.terminate()
    _, _, err = rx.wait()
    assert refuser in err and "--no-encrypt" in err
    assert not (tmp_path / "dst" / "a").exists()


def test_a_hostile_sender_without_the_encryption_bit_is_refused(tmp_path, receiver_factory):
    """The receiver's own check, not the sender's courtesy: a hello with a good MAC but
    without bit 0 gets status 0x40 from a receiver that encrypts."""
    rx = receiver_factory(mkd(tmp_path / "dst"), "--encrypt", token="tok")
    assert w.server_features("127.0.0.1", rx.port) & w.FEATURE_ENCRYPTION
    s, status = w.handshake("127.0.0.1", rx.port, "tok", 0, 0, 1, os.urandom(16), features=0)
    s.close()
    assert status == w.AUTH_ENCRYPTION_MISMATCH
    # ... while one that sets it is admitted (and then must speak TLS).
    s, status = w.handshake("127.0.0.1", rx.port, "tok", 0, 0, 1, os.urandom(16), features=w.FEATURE_ENCRYPTION)
    s.close()
    assert status == 0


def test_a_wrong_token_is_refused_encrypted(tmp_path, receiver_factory):
    (tmp_path / "a").write_bytes(b"x" * 100)
    rx = receiver_factory(mkd(tmp_path / "dst"), "--encrypt", token="right")
    r = run_sluice("send", tmp_path / "a", rx.url.replace("right", "wrong"), "--encrypt", "--token", "wrong")
    assert r.returncode == 3, r.stderr
    assert "authentication failed" in r.stderr or "does not match" in r.stderr


def test_a_byte_flipped_in_flight_fails_the_record_and_the_transfer(tmp_path, receiver_factory):
    write_random(tmp_path / "a", 8 << 20, 5)
    rx = receiver_factory(mkd(tmp_path / "dst"), "--encrypt", token="tok")
    proxy = CorruptingProxy(rx.port, at=2_000_000)
    r = run_sluice("send", tmp_path / "a", "--to", f"127.0.0.1:{proxy.port}", "--token", "tok", "--encrypt", "--streams", "1")
    rc, out, err = rx.wait()
    assert proxy.flipped
    assert rc == 8, err  # integrity
    assert "failed authentication" in err
    assert r.returncode != 0
    assert not (tmp_path / "dst" / "a").exists()


class ReplayingProxy(CorruptingProxy):
    """CorruptingProxy's plumbing, but towards the receiver it forwards whole TLS records and
    sends one application data record of the first data stream twice (after `at` bytes): a
    replay at a record boundary."""

    def __init__(self, upstream_port, at=1_000_000):
        self.replayed = False
        self.connections = 0
        super().__init__(upstream_port, at=at)

    def _pump(self, src, dst, towards_receiver):
        if not towards_receiver:
            return super()._pump(src, dst, False)
        with self.lock:
            self.connections += 1
            data_stream = self.connections > 1  # the control connection comes first
        try:
            dst.sendall(w.recv_exact(src, 80))  # the ClientHello
            seen = 0
            while True:
                head = w.recv_exact(src, 5)
                rec = head + w.recv_exact(src, struct.unpack(">H", head[3:5])[0])
                dst.sendall(rec)
                seen += len(rec)
                if data_stream and not self.replayed and head[0] == 23 and seen > self.at:
                    self.replayed = True
                    dst.sendall(rec)
        except (OSError, ConnectionError):
            pass
        finally:
            shut_down(src, dst)


def test_a_replayed_record_is_refused(tmp_path, receiver_factory):
    write_random(tmp_path / "a", 8 << 20, 6)
    rx = receiver_factory(mkd(tmp_path / "dst"), "--encrypt", token="tok")
    proxy = ReplayingProxy(rx.port)
    run_sluice("send", tmp_path / "a", "--to", f"127.0.0.1:{proxy.port}", "--token", "tok", "--encrypt", "--streams", "1")
    rc, out, err = rx.wait()
    assert proxy.replayed
    assert rc == 8, err
    assert "failed authentication" in err
    assert not (tmp_path / "dst" / "a").exists()


def test_resume_encrypted(tmp_path, receiver_factory):
    """A transfer cut in the middle resumes encrypted and skips what was verified."""
    write_random(tmp_path / "a", 48 << 20, 7)
    rx = receiver_factory(mkd(tmp_path / "dst"), "--encrypt", token="tok")
    proxy = CorruptingProxy(rx.port, at=30_000_000, cut=True)
    run_sluice("send", tmp_path / "a", "--to", f"127.0.0.1:{proxy.port}", "--token", "tok", "--encrypt", "--streams", "1",
               "--block-size", "1M")
    rx.wait()
    rx2 = receiver_factory(mkd(tmp_path / "dst"), "--encrypt", token="tok")
    r = run_sluice("send", tmp_path / "a", rx2.url, "--token", "tok", "--encrypt", "--json", "--block-size", "1M")
    assert r.returncode == 0, r.stderr
    rc, out, err = rx2.wait()
    assert rc == 0, err
    assert stats(r.stdout)["bytes_skipped"] > 0
    assert stats(out)["encryption"].startswith("tls13")
    assert (tmp_path / "dst" / "a").read_bytes() == (tmp_path / "a").read_bytes()


def w_free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_url(path, proc, tries=1000):
    import time
    for _ in range(tries):
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.01)
    raise AssertionError("no url")


CAPTURE = r"""
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE: a capture that drops proves less
s.bind((sys.argv[1], 0))
s.settimeout(0.5)
out = open(sys.argv[2], "wb")
deadline = time.monotonic() + float(sys.argv[3])
print("ready", flush=True)
while time.monotonic() < deadline:
    try:
        out.write(s.recv(65536))
    except socket.timeout:
        if open(sys.argv[4]).read(): break
out.close()
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"), reason="needs root and iproute2 for namespaces")
@pytest.mark.parametrize("mode", ["default", "clear"])
def test_no_plaintext_of_the_file_on_the_veth(tmp_path, mode):
    """Not loopback, so encrypted by default; the clear run is the control that proves the
    capture sees the payload at all."""
    tag = f"{os.getpid() % 10000}{mode[0]}"
    env = dict(os.environ, SB_NS_SND=f"sl18s{tag}", SB_NS_RCV=f"sl18r{tag}", SB_IP_SND="10.218.9.1", SB_IP_RCV="10.218.9.2")
    marker = ("SLUICE-MARKER-" + secrets.token_hex(8)).encode()
    (tmp_path / "m").write_bytes(marker * ((4 << 20) // len(marker)))
    clear = ["--no-encrypt"] if mode == "clear" else []
    subprocess.run([str(NETNS), "up"], env=env, check=True, capture_output=True)
    cap, done = tmp_path / "cap", tmp_path / "done"
    done.write_text("")
    try:
        capper = subprocess.Popen([str(NETNS), "exec", "rcv", "python3", "-c", CAPTURE, "sbveth-rcv", str(cap), "60", str(done)],
                                  env=env, stdout=subprocess.PIPE, text=True)
        assert capper.stdout.readline().strip() == "ready"
        rx = subprocess.Popen([str(NETNS), "exec", "rcv", SLUICE, "recv", str(mkd(tmp_path / "dst")), "--bind", "10.218.9.2",
                               "--token", "tok", "--json", *clear], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        url = rx.stdout.readline().strip()
        assert url.startswith("sluice://"), rx.stderr.read()
        r = subprocess.run([str(NETNS), "exec", "snd", SLUICE, "send", str(tmp_path / "m"), url, "--json", *clear],
                           env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        out, err = rx.communicate(timeout=60)
        assert rx.returncode == 0, err
        done.write_text("x")
        capper.wait(timeout=60)
        assert (tmp_path / "dst" / "m").read_bytes() == (tmp_path / "m").read_bytes()
        seen = cap.read_bytes()
        assert len(seen) > 1 << 20  # the capture saw (much of) the transfer
        if mode == "clear":
            assert stats(r.stdout)["encryption"] == "off"
            assert marker in seen
        else:
            assert stats(r.stdout)["encryption"].startswith("tls13")
            assert marker not in seen and marker[:12] not in seen
    finally:
        subprocess.run([str(NETNS), "down"], env=env, capture_output=True)


@pytest.mark.parametrize("block_size", [None, "64K"])
def test_cached_files_above_the_inline_size_go_straight_into_records(tmp_path, receiver_factory, block_size):
    """Cached files of 64 KiB to 512 KiB are read into the record slots themselves (no copy
    through the batch's scratch buffer), interleaved with small files copied in; a writer
    smaller than the file (--block-size 64K) takes the copy instead. Both arrive whole."""
    src = tmp_path / "src"
    src.mkdir()
    sizes = [70_000, 1_000, 511 * 1024, 3, 65 * 1024, 200_000, 12_345, 512 * 1024, 64 * 1024 + 1]
    for i, n in enumerate(sizes * 3):
        (src / f"f{i:02d}").write_bytes(os.urandom(n))
    rx = receiver_factory(mkd(tmp_path / "dst"), "--encrypt")
    extra = ["--block-size", block_size] if block_size else []
    r = run_sluice("send", src, rx.url, "--encrypt", "--streams", "2", "--json", *extra)
    assert r.returncode == 0, r.stderr
    assert rx.wait()[0] == 0
    s = stats(r.stdout)
    assert s["encryption"] != "tls13-user" or s["send_path"] == "tls_records"
    for p in src.iterdir():
        assert (tmp_path / "dst" / "src" / p.name).read_bytes() == p.read_bytes(), p.name


def test_cold_blocks_are_read_with_o_direct_and_sealed_encrypted(tmp_path, receiver_factory):
    """An encrypted stream reads blocks not in the page cache with O_DIRECT, the next one ahead,
    and seals them from that buffer (issue 18, h18q): every byte of a cold set counted in
    bytes_read_direct and said in -v, nothing left cached, no fallback, the copies equal.
    Sizes not a multiple of 4 KiB; one file of several blocks (1 MiB sealed blocks)."""
    src = tmp_path / "src"
    src.mkdir()
    sizes = [(5 << 20) + 77, (2 << 20) + 4095, 600 << 10, (3 << 20) + 1]
    files = [src / f"g{i}.bin" for i in range(len(sizes))]
    for p, size in zip(files, sizes):
        write_random(p, size, seed=size)
    evict(files)
    before = sum(cached_pages(p) for p in files)
    assert before <= 4 * len(files), f"could not evict the source ({before} pages cached)"
    rx = receiver_factory(mkd(tmp_path / "dst"), "--encrypt")
    r = run_sluice("send", src, rx.url, "--encrypt", "--streams", "2", "--json", "-v", timeout=300)
    assert r.returncode == 0, r.stderr
    assert rx.wait()[0] == 0
    s = stats(r.stdout)
    assert s["send_path"] == "tls_records", s  # no kTLS on the test machines: sealed in user space
    assert s["bytes_read_direct"] == sum(sizes), s
    assert s["fallbacks"] == [], s
    assert "read with O_DIRECT (not in the page cache): 14 blocks" in r.stderr, r.stderr
    assert sum(cached_pages(p) for p in files) <= before
    for p in files:
        assert (tmp_path / "dst" / "src" / p.name).read_bytes() == p.read_bytes(), p.name


def test_a_cold_sparse_file_is_read_with_o_direct_per_data_extent_encrypted(tmp_path, receiver_factory):
    """Encrypted, the data extents of cold sparse files are read with O_DIRECT too (one at the
    end not a multiple of 4 KiB), the holes never: the copies equal and sparse."""
    from test_sparse import allocated, sparse_tree
    src = tmp_path / "src"
    data = sparse_tree(src)
    evict(list(src.iterdir()))
    rx = receiver_factory(mkd(tmp_path / "dst"), "--encrypt")
    r = run_sluice("send", src, rx.url, "--encrypt", "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    assert rx.wait()[0] == 0
    s = stats(r.stdout)
    assert s["send_path"] == "tls_records", s
    assert s["bytes_sent"] == data and s["bytes_read_direct"] == data, s
    for p in src.iterdir():
        assert file_hash(tmp_path / "dst" / "src" / p.name) == file_hash(p), p.name
    assert allocated(tmp_path / "dst" / "src" / "image.bin") <= 8 << 20
