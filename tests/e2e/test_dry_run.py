"""--dry-run (issue 17, docs/protocol.md "Dry run"): the receiver compares and changes nothing,
the sender lists what a transfer would do, one rsync --itemize-changes line per path (and the
same in JSON "changes"), exit 0 on both sides. The list is exact for new, changed, meta-only,
deleted, symlink and hard-link entries; a hostile receiver's answers are bounded and escaped."""
import hashlib
import json
import os
import socket
import stat
import struct
import subprocess
import threading

import sluice_wire as w
from conftest import SLUICE, run_sluice

T0 = 1_600_000_000_123_456_789  # a fixed mtime (ns) for everything that is not meant to differ
T1 = 1_700_000_000_000_000_000


def snapshot(root):
    """Everything a dry run must not change: per path its kind, mode, owner, size, mtime,
    inode, link count, symlink target and content hash; and the set of paths."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rec = (st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, st.st_ino, st.st_nlink)
            if stat.S_ISLNK(st.st_mode):
                rec += (os.readlink(p),)
            elif stat.S_ISREG(st.st_mode):
                rec += (hashlib.sha256(open(p, "rb").read()).hexdigest(),)
            out[os.path.relpath(p, root)] = rec
    st = os.lstat(root)
    out["."] = (st.st_mode, st.st_mtime_ns, st.st_ino)
    return out


def settle(src):
    """Every entry's mtime to T0, bottom-up (so a directory's is not moved by its children)."""
    for dirpath, dirs, files in os.walk(src, topdown=False):
        for name in files + dirs:
            os.utime(os.path.join(dirpath, name), ns=(T0, T0), follow_symlinks=False)
    os.utime(src, ns=(T0, T0))


def build_pair(tmp_path, receiver_factory):
    """A tree sent once for real, then changed in every way the list must tell apart."""
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "olddir").mkdir()
    (src / "olddir" / "y").write_bytes(b"y")
    (src / "same").write_bytes(b"same")
    (src / "grow").write_bytes(b"1234")
    (src / "touch").write_bytes(b"abcd")
    (src / "mode").write_bytes(b"m")
    os.chmod(src / "mode", 0o644)
    (src / "gone").write_bytes(b"gone")
    (src / "k1").write_bytes(b"linked")
    os.link(src / "k1", src / "k2")
    os.symlink("same", src / "ln_same")
    os.symlink("same", src / "ln_moved")
    settle(src)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    sent = run_sluice("send", src, rx.url)
    assert sent.returncode == 0, sent.stderr
    assert rx.wait()[0] == 0
    # The changes.
    (src / "grow").write_bytes(b"12345678")
    os.chmod(src / "mode", 0o600)
    (src / "gone").unlink()
    (src / "olddir" / "y").unlink()
    (src / "olddir").rmdir()
    (src / "sub" / "new").write_bytes(b"n" * 1000)
    (src / "newdir").mkdir()
    (src / "newdir" / "x").write_bytes(b"xx")
    (src / "ln_moved").unlink()
    os.symlink("grow", src / "ln_moved")
    os.symlink("x", src / "ln_new")
    (src / "h1").write_bytes(b"h" * 10)
    os.link(src / "h1", src / "h2")
    os.mkfifo(src / "fifo")
    settle(src)
    os.utime(src / "grow", ns=(T1, T1))
    os.utime(src / "touch", ns=(T1, T1))
    return src, dest


# In manifest order (the walk's: sorted, depth-first), then the deletions (contents first).
EXPECTED_ENTRIES = [
    "cS+++++++++ src/fifo",
    ">f.st...... src/grow",
    ">f+++++++++ src/h1",
    "hf+++++++++ src/h2 => src/h1",
    "cLc........ src/ln_moved -> grow",
    "cL+++++++++ src/ln_new -> x",
    ".f...p..... src/mode",
    "cd+++++++++ src/newdir",
    ">f+++++++++ src/newdir/x",
    ">f+++++++++ src/sub/new",
    ">f..t...... src/touch",
]
EXPECTED_DELETIONS = ["*deleting   src/gone", "*deleting   src/olddir/y", "*deleting   src/olddir/"]


def test_dry_run_lists_every_kind_of_change_and_changes_nothing(tmp_path, receiver_factory):
    src, dest = build_pair(tmp_path, receiver_factory)
    before = snapshot(dest)
    rx = receiver_factory(dest, "-v")
    r = run_sluice("send", "--dry-run", "--delete", src, rx.url)
    assert r.returncode == 0, r.stderr
    rc, out, err = rx.wait()
    assert rc == 0, err
    assert snapshot(dest) == before
    lines = r.stdout.splitlines()
    assert sorted(lines[:len(EXPECTED_ENTRIES)]) == sorted(EXPECTED_ENTRIES), r.stdout
    assert lines[len(EXPECTED_ENTRIES):] == EXPECTED_DELETIONS, r.stdout
    assert "dry run: 5 of " in r.stderr and "3 paths deleted; nothing was changed" in r.stderr, r.stderr
    assert json.loads(out.splitlines()[-1])["deleted"] == []  # the receiver removed nothing
    assert "would delete 'src/olddir/'" in err and "nothing in " in err, err
    assert not any(n.startswith(".sluice") for n in os.listdir(dest / "src"))


def test_dry_run_json_lists_the_same_with_byte_counts(tmp_path, receiver_factory):
    src, dest = build_pair(tmp_path, receiver_factory)
    before = snapshot(dest)
    rx = receiver_factory(dest)
    r = run_sluice("send", "-n", "--json", src, rx.url)  # no --delete: no deletions listed
    assert r.returncode == 0, r.stderr
    assert rx.wait()[0] == 0
    assert snapshot(dest) == before
    got = json.loads(r.stdout)
    assert got["dry_run"] is True and got["bytes_sent"] == 0
    changes = {c["path"]: c for c in got["changes"]}
    assert set(changes) == {line[12:].split(" ")[0] for line in EXPECTED_ENTRIES}
    assert changes["src/sub/new"] == {"item": ">f+++++++++", "path": "src/sub/new", "target": "", "bytes": 1000}
    assert changes["src/grow"]["bytes"] == 8 and changes["src/mode"]["bytes"] == 0
    assert changes["src/h2"]["target"] == "src/h1" and changes["src/ln_new"]["target"] == "x"


def test_dry_run_of_an_unchanged_tree_lists_nothing(tmp_path, receiver_factory):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(b"a")
    settle(src)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    assert run_sluice("send", src, rx.url).returncode == 0
    assert rx.wait()[0] == 0
    rx = receiver_factory(dest)
    r = run_sluice("send", "--dry-run", "--delete", src, rx.url)
    assert r.returncode == 0 and r.stdout == "", (r.stdout, r.stderr)
    assert rx.wait()[0] == 0


def test_dry_run_with_checksum_is_refused_before_connecting(tmp_path):
    (tmp_path / "a").write_bytes(b"a")
    r = run_sluice("send", "--dry-run", "--checksum", tmp_path / "a", "sluice://127.0.0.1:9/?token=x")
    assert r.returncode == 2 and "--dry-run with --checksum" in r.stderr, r.stderr


class DryRunPeer:
    """A hostile receiver: offers tree metadata, reads TREE_OPTIONS (which must ask for a dry
    run), answers each manifest page with `before_ack` frames then an ack with no ranges, sends
    ALL_VERIFIED at MANIFEST_END and, at TRANSFER_END, `at_end` frames then FINAL_STATUS 0. Every
    frame the sender sent is kept in `frames` (type, payload), in order."""

    def __init__(self, before_ack=(), at_end=()):
        self.before_ack, self.at_end = list(before_ack), list(at_end)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(60)
        self.port = self.listener.getsockname()[1]
        self.conns, self.error, self.tree_flags, self.frames = [], None, None, []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        try:
            control, _ = w.accept_handshake(self.listener, "testtoken", w.FEATURE_TREE_META)
            self.conns.append(control)
            self.conns.append(w.accept_handshake(self.listener, "testtoken", w.FEATURE_TREE_META)[0])
            while True:
                ftype, payload = w.read_frame(control)
                self.frames.append((ftype, payload))
                if ftype == w.TREE_OPTIONS:
                    self.tree_flags = struct.unpack_from("<I", payload)[0]
                elif ftype == w.MANIFEST:
                    for f in self.before_ack:
                        control.sendall(f)
                    self.before_ack = []
                    control.sendall(w.manifest_ack(struct.unpack_from("<I", payload)[0]))
                elif ftype == w.MANIFEST_END:
                    control.sendall(w.frame(w.ALL_VERIFIED, b""))
                elif ftype == w.TRANSFER_END:
                    for f in self.at_end:
                        control.sendall(f)
                    control.sendall(w.final_status())
                    return
        except Exception as e:  # reported by the test; a sender that fails closes on us
            self.error = e

    def close(self):
        self.thread.join(timeout=120)
        for s in self.conns:
            s.close()
        self.listener.close()


def send_to_peer(tmp_path, peer, *extra, content=b""):
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "e").write_bytes(content)  # entry 0 is the directory, entry 1 this file
    try:
        return subprocess.run([SLUICE, "send", "--dry-run", "--streams", "1", "--no-owner", "--no-group", "--no-xattrs",
                               "--no-acls", "--idle-timeout", "60", *extra, str(src),
                               f"sluice://127.0.0.1:{peer.port}/?token=testtoken"],
                              capture_output=True, text=True, timeout=300)
    finally:
        peer.close()


def test_receiver_text_is_escaped_before_the_terminal(tmp_path):
    evil = b"src/\x1b]0;owned\x07\x1b[2J\xff\r\nfake line"
    peer = DryRunPeer(before_ack=[w.dry_run_items([(1, w.DRY_NEW)])], at_end=[w.dry_run_deleted([(evil, True)])])
    r = send_to_peer(tmp_path, peer, "--delete")
    assert r.returncode == 0, r.stderr
    assert peer.tree_flags == w.TREE_DELETE | w.TREE_DRY_RUN
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "\r" not in r.stdout, repr(r.stdout)
    lines = r.stdout.splitlines()
    assert lines[0] == ">f+++++++++ src/e", lines
    assert len(lines) == 2 and lines[1].startswith("*deleting   src/") and "fake line" in lines[1], lines


def test_items_naming_entries_never_sent_are_a_protocol_error(tmp_path):
    r = send_to_peer(tmp_path, DryRunPeer(before_ack=[w.dry_run_items([(7, w.DRY_NEW)])]))
    assert r.returncode != 0
    assert "DRY_RUN_ITEMS names file id 7, an entry that was not sent" in r.stderr, r.stderr


def test_items_out_of_order_or_with_unknown_bits_are_refused(tmp_path):
    r = send_to_peer(tmp_path, DryRunPeer(before_ack=[w.dry_run_items([(1, w.DRY_NEW), (0, w.DRY_TIME)])]))
    assert r.returncode != 0 and "DRY_RUN_ITEMS: file id 0 is not after 1" in r.stderr, r.stderr
    r = send_to_peer(tmp_path, DryRunPeer(before_ack=[w.dry_run_items([(1, 0x200)])]))
    assert r.returncode != 0 and "has change bits 512" in r.stderr, r.stderr


def test_deletion_counts_and_lengths_are_bounded(tmp_path):
    # A count the frame cannot hold is refused before anything is reserved.
    r = send_to_peer(tmp_path, DryRunPeer(at_end=[w.dry_run_deleted([(b"src/a", False)], count=0xFFFFFFFF)]), "--delete")
    assert r.returncode != 0 and "DRY_RUN_DELETED: 4294967295 paths announced" in r.stderr, r.stderr
    r = send_to_peer(tmp_path, DryRunPeer(at_end=[w.dry_run_deleted([(b"a" * 4096, False)])]), "--delete")
    assert r.returncode != 0 and "DRY_RUN_DELETED: a path of 4096 bytes" in r.stderr, r.stderr


def test_deletions_without_delete_are_refused(tmp_path):
    r = send_to_peer(tmp_path, DryRunPeer(at_end=[w.dry_run_deleted([(b"src/a", False)])]))
    assert r.returncode != 0 and "unexpected DRY_RUN_DELETED" in r.stderr, r.stderr


def test_a_receiver_asking_for_data_in_a_dry_run_fails_the_transfer(tmp_path):
    # The peer acks the page without the file's range: the sender must send nothing.
    r = send_to_peer(tmp_path, DryRunPeer(), content=b"12345")
    assert r.returncode != 0 and "receiver asked for data in a dry run" in r.stderr, r.stderr


def test_dry_run_compares_a_symlinks_own_attributes(tmp_path, receiver_factory):
    """'x' for a symlink whose own attribute differs (lgetxattr: never its target's)."""
    from test_tree_meta import linked_tree

    src = linked_tree(tmp_path, b"one")
    # The target has the same attribute on both sides: read through the link, the link's own
    # would look unchanged. (One the source lacks would be listed: the real run removes it.)
    os.setxattr(src / "target", "trusted.l", b"one")
    settle(src)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    assert run_sluice("send", src, rx.url).returncode == 0 and rx.wait()[0] == 0
    rx = receiver_factory(dest)
    r = run_sluice("send", "--dry-run", src, rx.url)
    assert rx.wait()[0] == 0 and r.returncode == 0 and r.stdout == "", r.stdout
    os.setxattr(dest / "src" / "link", "trusted.l", b"two", follow_symlinks=False)
    rx = receiver_factory(dest)
    r = run_sluice("send", "--dry-run", src, rx.url)
    assert rx.wait()[0] == 0 and r.returncode == 0
    assert r.stdout.splitlines() == [".L........x src/link -> target"], r.stdout
    assert os.getxattr(dest / "src" / "link", "trusted.l", follow_symlinks=False) == b"two"
