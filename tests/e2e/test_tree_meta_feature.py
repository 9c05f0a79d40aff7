"""Tree metadata is negotiated (hello feature bit 3, docs/protocol.md "Tree metadata"): a
sender facing a receiver that does not offer it (an older sluice, played here by a proxy that
clears the bit in every ServerHello) sends plain files and says what it left out, refuses
--delete before sending anything; a receiver refuses tree metadata from a sender that did not
announce it."""
import json
import os
import struct

import pytest

import sluice_wire as w
from conftest import run_sluice
from corrupting_proxy import CorruptingProxy, shut_down


class HelloRewritingProxy(CorruptingProxy):
    """Forwards every connection to the receiver, clearing `bits` in the features word of the
    ServerHello (its first 32 bytes: magic, version u16, features u16 at offset 10)."""

    def __init__(self, upstream_port, bits):
        self.bits = bits  # before the base class starts accepting
        super().__init__(upstream_port)

    def _pump(self, src, dst, towards_receiver):
        try:
            if not towards_receiver:
                hello = w.recv_exact(src, 32)
                features = struct.unpack_from("<H", hello, 10)[0] & ~self.bits
                dst.sendall(hello[:10] + struct.pack("<H", features) + hello[12:])
            while chunk := src.recv(1 << 16):
                dst.sendall(chunk)
        except (ConnectionError, OSError):
            pass
        shut_down(src, dst)


def via(url, port):
    """The receiver's URL with the proxy's port."""
    head, rest = url.split("://", 1)
    hostport, tail = rest.split("/", 1) if "/" in rest else (rest, "")
    host = hostport.rsplit(":", 1)[0]
    return f"{head}://{host}:{port}/{tail}"


def test_older_receiver_gets_plain_files_and_a_warning(tmp_path, receiver_factory):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(b"hard-linked content")
    os.link(src / "a", src / "b")
    os.setxattr(src / "a", "user.kept", b"only with bit 3")
    os.mkfifo(src / "pipe")
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    proxy = HelloRewritingProxy(rx.port, w.FEATURE_TREE_META)
    try:
        sent = run_sluice("send", src, via(rx.url, proxy.port), "--json")
        rc, out, err = rx.wait()
    finally:
        proxy.close()
    assert sent.returncode == 0, sent.stderr
    assert rc == 0, err
    assert "does not offer hello feature bit 3" in sent.stderr, sent.stderr
    stats = json.loads(sent.stdout.splitlines()[-1])
    assert any("tree metadata" in f for f in stats["fallbacks"]), stats["fallbacks"]
    got = dest / "src"
    # Both names arrive with the content, as two files; no attribute, no fifo.
    assert (got / "a").read_bytes() == (got / "b").read_bytes() == b"hard-linked content"
    assert os.lstat(got / "a").st_ino != os.lstat(got / "b").st_ino
    assert "user.kept" not in os.listxattr(got / "a")
    assert not os.path.lexists(got / "pipe")


def test_older_receiver_refuses_delete_before_anything_is_sent(tmp_path, receiver_factory):
    src = tmp_path / "src"
    src.mkdir()
    (src / "new").write_bytes(b"x")
    dest = tmp_path / "dest"
    (dest / "src").mkdir(parents=True)
    (dest / "src" / "old").write_bytes(b"keep me")
    rx = receiver_factory(dest)
    proxy = HelloRewritingProxy(rx.port, w.FEATURE_TREE_META)
    try:
        sent = run_sluice("send", src, via(rx.url, proxy.port), "--delete")
        rx.wait()
    finally:
        proxy.close()
    assert sent.returncode == 2, sent.stderr  # usage
    assert "cannot delete extraneous files" in sent.stderr and f"127.0.0.1:{proxy.port}" in sent.stderr, sent.stderr
    assert (dest / "src" / "old").read_bytes() == b"keep me"
    assert not (dest / "src" / "new").exists()


@pytest.mark.parametrize("what,entries,message", [
    ("hard link", [(0, w.FILE, "f", 0, "", None), (1, w.HARD_LINK, "l", 0, "f", w.entry_meta(rdev=0))],
     "a hard link or special file entry"),
    ("metadata trailer", [(0, w.FILE, "f", 0, "", w.entry_meta(uid=0, gid=0))], "a metadata trailer"),
])
def test_receiver_refuses_tree_metadata_the_sender_did_not_announce(tmp_path, receiver_factory, what, entries, message):
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    c, status = w.handshake("127.0.0.1", rx.port, "testtoken", 0, 0, 1, os.urandom(16), features=0)
    assert status == 0
    c.sendall(w.manifest_meta(0, entries))
    rc, out, err = rx.wait(timeout=60)
    assert rc != 0
    assert message in err and "without announcing tree metadata" in err, err
    assert os.listdir(dest) == []
