"""An independent Python implementation of the sender side of docs/protocol.md, used to
play a hostile or broken peer against the real receiver."""
import hashlib
import hmac
import os
import socket
import struct

MAGIC = b"SLUICE\r\n"
VERSION = 1
MANIFEST, MANIFEST_ACK, MANIFEST_END, BLOCK, STREAM_END, RESEND, ALL_VERIFIED, WORKING, TRANSFER_END, FINAL_STATUS, ABORT = (
    0x01, 0x02, 0x03, 0x10, 0x11, 0x20, 0x21, 0x22, 0x30, 0x31, 0x3F)
FILE, DIR, SYMLINK = 1, 2, 3
FEATURE_ENCRYPTION = 1 << 0  # ServerHello.features / ClientHello.features bit 0 (docs/protocol.md, "Encryption")
AUTH_ENCRYPTION_MISMATCH = 0x40


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def server_features(host, port):
    """The features word of the receiver's ServerHello (then the connection is dropped)."""
    with socket.create_connection((host, port), timeout=10) as s:
        sh = recv_exact(s, 32)
        return struct.unpack_from("<H", sh, 10)[0]


def handshake(host, port, token, role, index, count, transfer_id, features=0):
    s = socket.create_connection((host, port), timeout=10)
    sh = recv_exact(s, 32)
    assert sh[:8] == MAGIC
    server_nonce = sh[16:32]
    client_nonce = os.urandom(16)
    signed = MAGIC + struct.pack("<HBBHH", VERSION, role, features, index, count) + transfer_id + client_nonce
    mac = hmac.new(token.encode(), b"sluice-v1 client hello" + server_nonce + signed, hashlib.sha256).digest()
    s.sendall(signed + mac)
    auth = recv_exact(s, 40)
    return s, auth[0]


def frame(ftype, payload):
    return struct.pack("<BBHI", ftype, 0, 0, len(payload)) + payload


def manifest(seq, entries):
    """entries: (id, kind, path, size, target)"""
    body = struct.pack("<II", seq, len(entries))
    for fid, kind, path, size, target in entries:
        p, t = path.encode(), target.encode()
        body += struct.pack("<QQqIBBHHH", fid, size, 0, 0o644, kind, 0, len(p), len(t), 0) + p + t
    return frame(MANIFEST, body)


def read_frame(s):
    """The next frame, skipping WORKING (the receiver's keepalive while it works for us)."""
    while True:
        ftype, _, _, length = struct.unpack("<BBHI", recv_exact(s, 8))
        payload = recv_exact(s, length)
        if ftype != WORKING:
            return ftype, payload
