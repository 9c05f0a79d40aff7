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
HARD_LINK, FIFO, CHAR_DEVICE, BLOCK_DEVICE, SOCKET = 5, 6, 7, 8, 9  # tree metadata (issue 17)
HAS_META = 1 << 2  # entry flag: an EntryMeta trailer follows
HAS_OWNER, HAS_GROUP = 1, 2
UPDATE_PARAMS, REUSE, BLOCK_SUMS = 0x04, 0x05, 0x24  # changed-block updates (issue 17)
FEATURE_ENCRYPTION = 1 << 0  # ServerHello.features / ClientHello.features bit 0 (docs/protocol.md, "Encryption")
FEATURE_TREE_META = 1 << 3  # bit 3: entry kinds 5-9, metadata trailers, TREE_OPTIONS (docs/protocol.md, "Tree metadata")
AUTH_ENCRYPTION_MISMATCH = 0x40
# R->S: u64 files complete so far, u64 below: every regular file with a lower id is complete
# (issue 19, docs/protocol.md "Announce window")
FILES_DONE = 0x70
FEATURE_ANNOUNCE_WINDOW = 1 << 7
FEATURE_CERTIFICATE_VERDICT = 1 << 6  # bit 6: CERTIFICATE_ACCEPTED negotiated (docs/protocol.md, "Certificate mode")
FEATURE_EXACT_META = 1 << 8  # ServerHello only: removals mirrored when TREE_OPTIONS says the lists are complete (docs/protocol.md, "Exact attributes")


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


def accept_handshake(listener, token, features=0, timeout=60):
    """The receiver side of one connection's handshake (docs/protocol.md): ServerHello offering
    `features`, the ClientHello read, status 0 with the server's MAC. Returns (socket, hello)."""
    s, _ = listener.accept()
    s.settimeout(timeout)
    nonce_r = os.urandom(16)
    s.sendall(MAGIC + struct.pack("<HHI", VERSION, features, 0) + nonce_r)
    hello = recv_exact(s, 80)
    mac = hmac.new(token.encode(), b"sluice-v1 server auth" + hello[32:48] + nonce_r, hashlib.sha256).digest()
    s.sendall(bytes(8) + mac)
    return s, hello


def frame(ftype, payload):
    return struct.pack("<BBHI", ftype, 0, 0, len(payload)) + payload


def files_done(files, below):
    return frame(FILES_DONE, struct.pack("<QQ", files, below))


def manifest(seq, entries):
    """entries: (id, kind, path, size, target)"""
    body = struct.pack("<II", seq, len(entries))
    for fid, kind, path, size, target in entries:
        p, t = path.encode(), target.encode()
        body += struct.pack("<QQqIBBHHH", fid, size, 0, 0o644, kind, 0, len(p), len(t), 0) + p + t
    return frame(MANIFEST, body)


def entry_meta(uid=0, gid=0, rdev=0, flags=HAS_OWNER | HAS_GROUP, user=b"", group=b"", xattrs=()):
    """The EntryMeta trailer (docs/protocol.md, "Tree metadata"); xattrs: (name bytes, value bytes)."""
    body = struct.pack("<IIQBBBBH", uid, gid, rdev, flags, len(user), len(group), 0, len(xattrs)) + user + group
    for n, v in xattrs:
        body += struct.pack("<HI", len(n), len(v)) + n + v
    return body


def manifest_meta(seq, entries, mode=0o644):
    """entries: (id, kind, path, size, target, meta bytes or None)"""
    body = struct.pack("<II", seq, len(entries))
    for fid, kind, path, size, target, meta in entries:
        p = path if isinstance(path, bytes) else path.encode()
        t = target if isinstance(target, bytes) else target.encode()
        body += struct.pack("<QQqIBBHHH", fid, size, 0, mode, kind, HAS_META if meta is not None else 0,
                            len(p), len(t), 0) + p + t + (meta or b"")
    return frame(MANIFEST, body)


def update_params(block_size, checksum=False):
    return frame(UPDATE_PARAMS, struct.pack("<QII", block_size, 1 if checksum else 0, 0))


def reuse(file_id, ranges):
    return frame(REUSE, struct.pack("<QII", file_id, len(ranges), 0) + b"".join(struct.pack("<QQ", o, n) for o, n in ranges))


def decode_block_sums(payload):
    """(file_id, old_size, [xxh3 of each block])"""
    fid, old_size, n, _ = struct.unpack_from("<QQII", payload)
    return fid, old_size, list(struct.unpack_from(f"<{n}Q", payload, 24))


ENTRY_SPARSE = 0x02  # the entry's flags: data extents follow its path and target (issue 17)


def sparse_manifest(seq, entries):
    """entries: (id, path, size, [(offset, length), ...] data extents), regular files with the
    sparse flag: the extent count u32 and the extents follow the path."""
    body = struct.pack("<II", seq, len(entries))
    for fid, path, size, extents in entries:
        p = path.encode()
        body += struct.pack("<QQqIBBHHH", fid, size, 0, 0o644, FILE, ENTRY_SPARSE, len(p), 0, 0) + p
        body += struct.pack("<I", len(extents)) + b"".join(struct.pack("<QQ", o, n) for o, n in extents)
    return frame(MANIFEST, body)


def read_frame(s):
    """The next frame, skipping WORKING (the receiver's keepalive while it works for us)."""
    while True:
        ftype, _, _, length = struct.unpack("<BBHI", recv_exact(s, 8))
        payload = recv_exact(s, length)
        if ftype != WORKING:
            return ftype, payload


# Get sessions (issue 15, docs/protocol.md "Get sessions"): the server's side of the four
# frames, to play a hostile `sluice serve --port` against the real `sluice get`.
GET_HELLO, GET_REQUEST, GET_REPLY, GET_DONE, GET_ATTACH = 0x60, 0x61, 0x62, 0x63, 0x64
FEATURE_GET_SESSIONS = 1 << 5


def get_hello_public():
    """GET_HELLO of a --public server (no token, so no MACs)."""
    return frame(GET_HELLO, MAGIC + struct.pack("<HHB", VERSION, FEATURE_GET_SESSIONS, 0) + os.urandom(16))


def read_get_request(s):
    """(streams, reply_port, receiver_token, path) of the client's GET_REQUEST."""
    ftype, _, _, length = struct.unpack("<BBHI", recv_exact(s, 8))
    assert ftype == GET_REQUEST, hex(ftype)
    p = recv_exact(s, length)
    _, _, streams, port = struct.unpack_from("<HBHH", p, 0)
    at = 7 + 16
    (tlen,) = struct.unpack_from("<H", p, at)
    token = p[at + 2:at + 2 + tlen].decode()
    at += 2 + tlen
    (plen,) = struct.unpack_from("<H", p, at)
    path = p[at + 2:at + 2 + plen].decode()
    return streams, port, token, path


def get_reply_ok(files, nbytes, msg=b""):
    return frame(GET_REPLY, struct.pack("<B", 0) + bytes(32) + struct.pack("<QQI", files, nbytes, len(msg)) + msg)


def get_done(status, msg=b""):
    return frame(GET_DONE, struct.pack("<II", status, len(msg)) + msg)


# --dry-run (issue 17, docs/protocol.md "Dry run"): TREE_OPTIONS flag bit 1 and the receiver's
# two answers, to play a hostile receiver against the real sender.
TREE_OPTIONS, TREE_DELETE, TREE_DRY_RUN, TREE_OWNER_MAPS = 0x08, 1, 2, 4
DRY_RUN_ITEMS, DRY_RUN_DELETED = 0x29, 0x2A
DRY_NEW, DRY_CONTENT, DRY_SIZE, DRY_TIME, DRY_PERMS, DRY_OWNER, DRY_GROUP = 1, 2, 4, 8, 16, 32, 64
DRY_ACL, DRY_XATTRS = 128, 256


def manifest_ack(seq, ranges=()):
    """ranges: (file_id, offset, length) already verified."""
    return frame(MANIFEST_ACK, struct.pack("<II", seq, len(ranges)) + b"".join(struct.pack("<QQQ", *r) for r in ranges))


def final_status(status=0, files_ok=0, nbytes=0, msg=b"complete"):
    return frame(FINAL_STATUS, struct.pack("<IIQQQI", status, 0, files_ok, 0, nbytes, len(msg)) + msg)


def dry_run_items(items, count=None):
    """items: (file_id, changes); count: what the frame claims (default: the true count)."""
    body = b"".join(struct.pack("<QHH", i, c, 0) for i, c in items)
    return frame(DRY_RUN_ITEMS, struct.pack("<I", len(items) if count is None else count) + body)


def dry_run_deleted(paths, count=None):
    """paths: (bytes path, is_dir); count: what the frame claims (default: the true count)."""
    body = b"".join(struct.pack("<BH", 1 if d else 0, len(p)) + p for p, d in paths)
    return frame(DRY_RUN_DELETED, struct.pack("<I", len(paths) if count is None else count) + body)


# OWNER_NAMES (issue 17, docs/protocol.md "Owner names"): the sender's names of the user and
# group ids its entries carry, once per id, before the first page that uses them.
OWNER_NAMES, OWNER_USER, OWNER_GROUP = 0x25, 0, 1


def owner_names(names, count=None):
    """names: (kind, id, name bytes); count: what the frame claims (default: the true count)."""
    body = b"".join(struct.pack("<BBHI", k, len(n) & 0xFF, 0, i) + n for k, i, n in names)
    return frame(OWNER_NAMES, struct.pack("<I", len(names) if count is None else count) + body)


def parse_owner_names(payload):
    """The (kind, id, name bytes) an OWNER_NAMES payload lists."""
    (n,), at, out = struct.unpack_from("<I", payload), 4, []
    for _ in range(n):
        k, ln, _, i = struct.unpack_from("<BBHI", payload, at)
        out.append((k, i, payload[at + 8:at + 8 + ln]))
        at += 8 + ln
    assert at == len(payload)
    return out


# The client's side of a get session on the sluice port (issue 15, h15g): a request, the
# attached connections, and the receiver's handshake on them, to play a stalling, leaving or
# hostile `sluice get` against the real server.
def get_request(streams, path, nonce, receiver_token, reply_port=0):
    """GET_REQUEST to a --public server (its MAC is zeros)."""
    tok, p = receiver_token.encode(), path.encode()
    body = (struct.pack("<HBHH", VERSION, FEATURE_GET_SESSIONS, streams, reply_port) + nonce + struct.pack("<H", len(tok)) + tok
            + struct.pack("<H", len(p)) + p + bytes(32))
    return frame(GET_REQUEST, body)


def get_attach(nonce):
    return frame(GET_ATTACH, nonce)


def read_get_frame(s, expected):
    ftype, _, _, length = struct.unpack("<BBHI", recv_exact(s, 8))
    assert ftype == expected, (hex(ftype), hex(expected))
    return recv_exact(s, length)


def receiver_hello(s, token, features=0):
    """The receiver's side of the handshake on a connection the client opened (GET_ATTACH):
    ServerHello, the sender's ClientHello read, ServerAuth ok with the MAC. Returns the hello."""
    nonce_r = os.urandom(16)
    s.sendall(MAGIC + struct.pack("<HHI", VERSION, features, 0) + nonce_r)
    hello = recv_exact(s, 80)
    mac = hmac.new(token.encode(), b"sluice-v1 server auth" + hello[32:48] + nonce_r, hashlib.sha256).digest()
    s.sendall(bytes(8) + mac)
    return hello


# Pushes (h15s, docs/protocol.md "Pushes"): `sluice send` into `sluice serve --allow-upload`.
# The sender's side, to play a stalling or hostile pusher against the real server.
PUSH_REQUEST = 0x65
FEATURE_GET_PUSH = 1 << 8
GET_BOUND_TRANSFER, GET_CLEAR = 1 << 7, 1 << 1


def push_request(token, hello_nonce, streams, nonce, receiver_token):
    """PUSH_REQUEST MACed with the server's token over its GET_HELLO nonce (clear transfer)."""
    tok = receiver_token.encode()
    body = (struct.pack("<HBHH", VERSION, FEATURE_GET_SESSIONS | GET_BOUND_TRANSFER | GET_CLEAR, streams, 0) + nonce
            + struct.pack("<H", len(tok)) + tok + struct.pack("<H", 0))
    unsigned = frame(PUSH_REQUEST, body + bytes(32))[:-32]
    mac = hmac.new(token.encode(), b"sluice-v1 client hello" + hello_nonce + unsigned, hashlib.sha256).digest()
    return unsigned + mac


def push_transfer_token(token, nonce, receiver_token):
    """The token both sides key the push's transfer with (never sent)."""
    return hmac.new(token.encode(), b"sluice-v1 get transfer" + nonce + receiver_token.encode(), hashlib.sha256).hexdigest()


def sender_hello(s, token, role, index, count, transfer_id, features=0):
    """The sender's side of the handshake on a connection already open (an attached one):
    ServerHello read, ClientHello sent with its MAC; returns the ServerAuth status."""
    sh = recv_exact(s, 32)
    assert sh[:8] == MAGIC, sh[:8]
    signed = MAGIC + struct.pack("<HBBHH", VERSION, role, features, index, count) + transfer_id + os.urandom(16)
    mac = hmac.new(token.encode(), b"sluice-v1 client hello" + sh[16:32] + signed, hashlib.sha256).digest()
    s.sendall(signed + mac)
    return recv_exact(s, 40)[0]


_xxh = None


def xxh3(data):
    """XXH3-64 of data (a block's checksum) through libxxhash, a build dependency of sluice;
    raises OSError where it cannot be loaded (a test module skips on it)."""
    global _xxh
    if _xxh is None:
        import ctypes
        import ctypes.util

        name = ctypes.util.find_library("xxhash")
        if not name:
            raise OSError("libxxhash (a build dependency of sluice) is needed for XXH3 checksums")
        lib = ctypes.CDLL(name)
        lib.XXH3_64bits.restype = ctypes.c_uint64
        lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        _xxh = lib
    return _xxh.XXH3_64bits(data, len(data))


def block_frame(file_id, offset, data):
    """A BLOCK frame carrying data at offset of file_id, with its checksum."""
    return frame(BLOCK, struct.pack("<QQQ", file_id, offset, xxh3(data)) + data)
