"""`sluice get` of trees with empty directories and symlinks (issue 15): directories arrive
even when empty, a symlink arrives as a link (never followed) when its target stays inside
what lands in DEST, one that would lead out is left out by the server and refused by the
client when a hostile server sends it anyway."""
import os
import socket
import subprocess
import threading

import pytest

import sluice_wire as sw
from conftest import SLUICE, leftovers, run_sluice
from test_serve_get import get, server  # noqa: F401 (server: the same fixture, over this file's root)


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "www"
    d = r / "data"
    (d / "sub" / "deeper").mkdir(parents=True)
    (d / "empty").mkdir()
    (d / "sub" / "emptier").mkdir()
    os.chmod(d / "empty", 0o750)
    (d / "small.txt").write_text("small\n")
    (d / "sub" / "deeper" / "f.txt").write_text("f\n")
    os.symlink("small.txt", d / "rel")                  # stays inside: a link
    os.symlink("../small.txt", d / "sub" / "up")        # climbs, still inside: a link
    os.symlink("sub/deeper", d / "dirlink")             # a directory link inside: a link, not a copy
    os.symlink("../../../outside", d / "sub" / "out")   # climbs above DEST: left out
    os.symlink(str(tmp_path / "outside"), d / "abs")    # absolute: left out
    os.symlink("dirlink/../../x", d / "tricky")         # '..' after a name: left out
    (tmp_path / "outside").write_text("not served\n")
    return r




def test_empty_directories_and_links_arrive_confined(server, root, tmp_path):
    dest = tmp_path / "in"
    dest.mkdir()
    r = get(server, "/data", dest, "--streams", "2")
    assert r.returncode == 0, r.stderr
    got = dest / "data"
    assert (got / "empty").is_dir() and not any((got / "empty").iterdir())
    assert (got / "empty").stat().st_mode & 0o777 == 0o750
    assert (got / "sub" / "emptier").is_dir()
    assert (got / "sub" / "deeper" / "f.txt").read_text() == "f\n"
    for link, target in (("rel", "small.txt"), ("sub/up", "../small.txt"), ("dirlink", "sub/deeper")):
        assert (got / link).is_symlink(), link
        assert os.readlink(got / link) == target
    assert (got / "rel").read_text() == "small\n"  # resolves inside DEST
    for out in ("sub/out", "abs", "tricky"):
        assert not os.path.lexists(got / out), out
    assert "3 entries not sent (3 symlinks leading out of the tree" in r.stderr
    assert leftovers(dest) == []

    # All of DIR lands directly in DEST: the same entries one level up.
    top = tmp_path / "all"
    top.mkdir()
    r = get(server, "/", top)
    assert r.returncode == 0, r.stderr
    assert (top / "data" / "empty").is_dir() and os.readlink(top / "data" / "rel") == "small.txt"


def test_a_single_empty_directory(server, root, tmp_path):
    dest = tmp_path / "in"
    dest.mkdir()
    r = get(server, "/data/empty", dest)
    assert r.returncode == 0, r.stderr
    assert (dest / "empty").is_dir() and list((dest / "empty").iterdir()) == []


class HostileGetServer:
    """Answers one get request, then sends SRC with the real `sluice send` (which carries
    symlinks as they are, absolute ones too) to the client's receiver: a server that does not
    apply get's rules. It connects back (the client runs with --connect-back): the check is the
    receiver's, the same whichever side opened the connections."""

    def __init__(self, src):
        self.src = src
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.send_result = None
        self.thread = threading.Thread(target=self.serve_one, daemon=True)
        self.thread.start()

    def serve_one(self):
        self.sock.settimeout(60)
        conn, _ = self.sock.accept()
        with conn:
            conn.settimeout(60)
            conn.sendall(sw.get_hello_public())
            streams, port, token, _ = sw.read_get_request(conn)
            conn.sendall(sw.get_reply_ok(1, 0))
            self.send_result = subprocess.run(
                [SLUICE, "send", str(self.src), f"sluice://127.0.0.1:{port}/?token={token}", "--streams", str(streams)],
                capture_output=True, text=True, timeout=120)
            conn.sendall(sw.get_done(0 if self.send_result.returncode == 0 else 7, b"sender failed"))

    def close(self):
        self.thread.join(timeout=150)
        self.sock.close()


@pytest.mark.parametrize("target", ["/etc/passwd", "../../../escape", "a/../../escape"])
def test_a_hostile_servers_escaping_link_is_refused(tmp_path, target):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").mkdir()
    (src / "ok.txt").write_text("ok\n")
    os.symlink(target, src / "a" / "link")
    hostile = HostileGetServer(src)
    dest = tmp_path / "in"
    dest.mkdir()
    try:
        r = run_sluice("get", f"sluice://127.0.0.1:{hostile.port}/anything", dest, "--connect-back")
    finally:
        hostile.close()
    assert r.returncode != 0
    assert "leads out of the destination" in r.stderr and target in r.stderr, r.stderr
    assert not os.path.lexists(dest / "src" / "a" / "link")
    assert leftovers(dest) == []


class SourceNat:
    """A TCP forwarder in front of the server's sluice port that connects to the server from
    127.0.0.2, as a NAT would: the server sees an address where nothing of the client's
    listens. Counts the connections it forwarded."""

    def __init__(self, server_port):
        self.server_port = server_port
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.count = 0
        self.stop = False
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            up = socket.socket()
            up.bind(("127.0.0.2", 0))
            up.connect(("127.0.0.1", self.server_port))
            self.count += 1
            for a, b in ((c, up), (up, c)):
                threading.Thread(target=self.pump, args=(a, b), daemon=True).start()

    @staticmethod
    def pump(a, b):
        try:
            while chunk := a.recv(1 << 16):
                b.sendall(chunk)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.stop = True
        self.thread.join(timeout=30)
        self.sock.close()


def test_get_behind_a_nat_connects_out_and_connect_back_cannot(server, root, tmp_path):
    sluice_port = int(server.sluice_base.rsplit(":", 1)[1].rstrip("/"))
    nat = SourceNat(sluice_port)
    try:
        url = f"sluice://127.0.0.1:{nat.port}/data?token=testtoken"
        dest = tmp_path / "in"
        dest.mkdir()
        r = run_sluice("get", url, dest, "--streams", "3")
        assert r.returncode == 0, r.stderr
        assert (dest / "data" / "sub" / "deeper" / "f.txt").read_text() == "f\n"
        assert nat.count == 1 + 1 + 3  # the request, the control connection and 3 streams: all outward
        # The server connecting back reaches 127.0.0.2, where this receiver does not listen.
        back = tmp_path / "back"
        back.mkdir()
        r = run_sluice("get", url, back, "--connect-back", "--bind", "127.0.0.1", "--connect-timeout", "3",
                       "--idle-timeout", "5", timeout=120)
        assert r.returncode != 0
        assert leftovers(back) == []
    finally:
        nat.close()


def test_an_attach_for_no_waiting_get_is_closed(server, tmp_path):
    sluice_port = int(server.sluice_base.rsplit(":", 1)[1].rstrip("/"))
    with socket.create_connection(("127.0.0.1", sluice_port), timeout=30) as c:
        hello = sw.recv_exact(c, 8 + 29)
        assert hello[0] == sw.GET_HELLO
        c.sendall(sw.frame(sw.GET_ATTACH, os.urandom(16)))
        assert c.recv(100) == b""  # closed, nothing said
    # and the server still serves
    r = run_sluice("get", server.sluice_base + "data/small.txt?token=testtoken", tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "small.txt").read_text() == "small\n"


def test_connect_back_still_works(server, root, tmp_path):
    r = get(server, "/data", tmp_path, "--connect-back", "--streams", "2")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "data" / "sub" / "deeper" / "f.txt").read_text() == "f\n"
    assert os.readlink(tmp_path / "data" / "rel") == "small.txt" and (tmp_path / "data" / "empty").is_dir()
    r = get(server, "/data", tmp_path / "x", "--bind", "127.0.0.1")
    assert r.returncode == 2 and "--bind needs --connect-back" in r.stderr


def test_more_streams_than_a_source_may_have_pending(server, root, tmp_path):
    # 1 + 40 connections from this side, all adopted by the receiver at once: more than the 16
    # handshakes one source address may have pending, which a flood's connections are held to.
    r = get(server, "/data", tmp_path, "--streams", "40")
    assert r.returncode == 0, r.stderr
    assert "dropped" not in r.stderr
    assert (tmp_path / "data" / "sub" / "deeper" / "f.txt").read_text() == "f\n"
