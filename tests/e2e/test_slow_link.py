"""A transfer over a link slower than a block per idle timeout completes with both sides at
`--idle-timeout 2` (docs/guarantees.md, "Every wait has a deadline"; session 19, hs3). The link
is a relay that carries each connection's bytes towards the receiver at a fixed rate, a small
piece at a time, with a small receive buffer, so that the sender's TCP sees its bytes
acknowledged at the link's rate as over a real slow path. Two waits used to fail it: the
receiver dated a stream's data per 2 MiB chunk or block (a stream with nothing to carry then saw
the transfer stand still), and the sender, whose last bytes sat in the socket buffers for longer
than the idle timeout while ALL_VERIFIED waited for them, judged the receiver silent ("receiver
... went silent for 2 s on the control connection while the sender waited for the receiver to
verify the transfer (ALL_VERIFIED)"). No timed assertions: HANG only bounds a hang."""
import os
import socket
import subprocess
import threading
import time

import pytest

from conftest import SLUICE, kill_process

TOKEN = "testtoken"
HANG = 120
RATE = 128 << 10  # bytes per second per connection, towards the receiver
PIECE = 4096


class SlowLink:
    """Relays every connection to 127.0.0.1:upstream; towards the receiver at RATE."""

    def __init__(self, upstream):
        self.upstream = ("127.0.0.1", upstream)
        self.listener = socket.socket()
        # Accepted sockets inherit it: what the relay has not read stays unacknowledged.
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.socks = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                down, _ = self.listener.accept()
                up = socket.create_connection(self.upstream)
            except OSError:
                return
            self.socks += [down, up]
            threading.Thread(target=self.pump, args=(down, up, True), daemon=True).start()
            threading.Thread(target=self.pump, args=(up, down, False), daemon=True).start()

    def pump(self, src, dst, slow):
        try:
            while chunk := src.recv(PIECE if slow else 1 << 16):
                dst.sendall(chunk)
                if slow:
                    time.sleep(len(chunk) / RATE)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self):
        self.listener.close()
        for s in self.socks:
            s.close()


@pytest.mark.parametrize("path,size,streams", [("direct", 1 << 20, 2), ("splice", 1 << 20, 2), ("recv_write", 3 << 20, 3)])
def test_a_link_slower_than_a_block_per_idle_timeout(tmp_path, path, size, streams):
    src = tmp_path / "f"
    src.write_bytes(os.urandom(size))
    dst = tmp_path / "dst"
    dst.mkdir()
    rx = subprocess.Popen([SLUICE, "recv", str(dst), "--bind", "127.0.0.1", "--port", "0", "--token", TOKEN,
                           "--idle-timeout", "2", "--recv-path", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    link = None
    tx = None
    try:
        url = rx.stdout.readline().strip()
        assert url.startswith("sluice://"), rx.stderr.read()
        port = int(url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
        link = SlowLink(port)
        tx = subprocess.Popen([SLUICE, "send", str(src), "--to", f"127.0.0.1:{link.port}", "--token", TOKEN,
                               "--idle-timeout", "2", "--streams", str(streams)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        _, terr = tx.communicate(timeout=HANG)
        _, rerr = rx.communicate(timeout=HANG)
        assert tx.returncode == 0, terr
        assert rx.returncode == 0, rerr
        assert (dst / "f").read_bytes() == src.read_bytes()
    finally:
        for p in (tx, rx):
            if p:
                kill_process(p)
        if link:
            link.close()
