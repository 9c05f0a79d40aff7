"""A TCP proxy that flips one byte, once, in the first connection that carries more than
`at` bytes towards the receiver (or, with cut=True, closes that connection there instead,
and with reset=True as well, resets both of its sides: SO_LINGER 0): a faulty network stage
for integrity and failure tests."""
import socket
import struct
import threading


def shut_down(*socks):
    """Shuts both directions of each socket, ignoring ones already gone."""
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class CorruptingProxy:
    def __init__(self, upstream_port, at=500_000, cut=False, reset=False, from_upstream=False):
        """from_upstream: the bytes the upstream sends are the ones changed (a `sluice serve`
        whose get's client connects through the proxy: the data flows back down)."""
        self.upstream = ("127.0.0.1", upstream_port)
        self.from_upstream = from_upstream
        self.at = at
        self.cut = cut or reset
        self.reset = reset
        self.flipped = False
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(self.upstream)
            except OSError:  # the receiver is gone: so is this connection
                down.close()
                continue
            threading.Thread(target=self._pump, args=(down, up, not self.from_upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, down, self.from_upstream), daemon=True).start()

    def _pump(self, src, dst, towards_receiver):
        seen = 0
        try:
            while chunk := src.recv(1 << 16):
                if towards_receiver and seen <= self.at < seen + len(chunk):
                    with self.lock:
                        if not self.flipped:
                            self.flipped = True
                            i = self.at - seen
                            if self.cut:
                                dst.sendall(chunk[:i])
                                if self.reset:
                                    for s in (src, dst):
                                        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                                break
                            chunk = chunk[:i] + bytes([chunk[i] ^ 0xFF]) + chunk[i + 1:]
                seen += len(chunk)
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            # Also wakes the other direction's thread blocked in recv, so that with reset the
            # close is the last reference and sends the RST.
            shut_down(src, dst)
            if self.reset:
                src.close()
                dst.close()

    def close(self):
        self.listener.close()
