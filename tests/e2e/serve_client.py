"""Helpers for the `sluice serve` tests: the server process and a raw HTTP/1.1 client that
reads responses by Content-Length (pipelining needs exact framing, which curl hides)."""
import os
import signal
import socket
import subprocess

from conftest import SLUICE, kill_process


class Server:
    """`sluice serve DIR` in the background on 127.0.0.1; .base is the URL it printed, and
    .sluice_base the sluice:// URL (get sessions) when --port is among args."""

    def __init__(self, root, *args, token="testtoken", public=False):
        cmd = [SLUICE, "serve", str(root), "--http", "0", "--bind", "127.0.0.1", "--threads", "2"]
        if public:
            cmd.append("--public")
        env = dict(os.environ)
        env.pop("SLUICE_TOKEN", None)
        if token:
            env["SLUICE_TOKEN"] = token
        self.token = token
        self.public = public  # its GET_HELLO asks no token: a client given one refuses it (h18p)
        self.proc = subprocess.Popen(cmd + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline().strip()
        assert line.startswith(("http://127.0.0.1:", "https://127.0.0.1:")), self.proc.stderr.read()
        self.base = line.split("?")[0]
        self.port = int(self.base.rsplit(":", 1)[1].rstrip("/"))
        self.sluice_base = None
        if "--port" in args:
            line = self.proc.stdout.readline().strip()
            assert line.startswith("sluice://127.0.0.1:"), self.proc.stderr.read()
            self.sluice_base = line.split("?")[0]

    def url(self, path, token=True):
        sep = "&" if "?" in path else "?"
        return self.base + path.lstrip("/") + (f"{sep}token={self.token}" if token and self.token else "")

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err

    def kill(self):
        kill_process(self.proc)


def connect(port, timeout=30):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return s


class Reader:
    """Reads responses off one socket, in order."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _fill(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise EOFError("server closed the connection")
        self.buf += chunk

    def response(self, head_only=False):
        """(status, headers dict lower-cased, body)."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        n = 0 if head_only or status == 304 else int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, headers, body

    def closed(self):
        """True once the server has closed (EOF); raises on a timeout (the socket's)."""
        try:
            while True:
                if not self.sock.recv(1 << 16):
                    return True
        except ConnectionResetError:
            return True


def request(path, host="x", extra="", method="GET"):
    return f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n".encode()
