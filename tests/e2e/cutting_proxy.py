"""A TCP proxy that resets one connection, once: the `which`-th it accepts (0 is the first),
after it has carried `at` bytes towards the receiver; both of its sides get a RST (SO_LINGER
0), as a broken path or a middlebox would leave them. Every other connection, and every later
one, is forwarded as it is. For issue 16's stream reconnect tests."""
import socket
import struct
import threading


class CuttingProxy:
    def __init__(self, upstream_port, which=1, at=5_000_000):
        self.upstream = ("127.0.0.1", upstream_port)
        self.which = which
        self.at = at
        self.cut_done = threading.Event()
        self.accepted = 0
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
            cut = self.accepted == self.which
            self.accepted += 1
            threading.Thread(target=self._pump, args=(down, up, cut), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, down, False), daemon=True).start()

    def _pump(self, src, dst, cut):
        seen = 0
        try:
            while chunk := src.recv(1 << 16):
                if cut and seen + len(chunk) > self.at:
                    dst.sendall(chunk[:self.at - seen])
                    for s in (src, dst):
                        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        # Wakes the other direction's thread, blocked in recv on it, so that
                        # the close below is the last reference and sends the RST.
                        s.shutdown(socket.SHUT_RDWR)
                        s.close()
                    self.cut_done.set()
                    return
                seen += len(chunk)
                dst.sendall(chunk)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.listener.close()
