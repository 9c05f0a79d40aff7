"""A hostile pusher against `sluice serve --port --allow-upload` (PUSH_REQUEST, docs/protocol.md
"Pushes"), played by hand (sluice_wire.py) against the protocol only, so the probes hold
whichever thread or ring receives a push: truncated and oversized request frames, counts and
lengths at and past every bound, paths that are not relative names (refused, and escaped in the
serve's -v log), attaches beyond the request's count and onto another push's nonce, a handshake
claiming more streams than the request asked (the transfers: test_push_hostile_transfer.py).
For every probe: the serve stays up and serves others meanwhile (HTTP and a real push), refuses
with a clear message or closes by its deadline, and writes nothing. No timed assertions: every
wait_for is a bound against a hang."""
import os
import struct

import pytest

import sluice_wire as w
from conftest import leftovers, wait_for
from push_client import (HANG, TOKEN, Pusher, closed_by_server, hello, raw_request, reply, served, server, stats,  # noqa: F401
                         still_serving)

try:
    w.xxh3(b"")
except OSError as e:
    pytest.skip(str(e), allow_module_level=True)
block = w.block_frame


# ------------------------------------------------------------------ the request ---------------


def test_truncated_oversized_and_garbage_requests(server, served, tmp_path):
    port = server.sport
    # A header that promises more than ever comes: closed by the request deadline, not held.
    c, n = hello(port)
    whole = w.push_request(TOKEN, n, 1, os.urandom(16), "r" * 32)
    c.sendall(whole[:len(whole) // 2])
    # Oversized: a length past the largest first frame is refused at the header, at once.
    big, _ = hello(port)
    big.sendall(struct.pack("<BBHI", w.PUSH_REQUEST, 0, 0, 1 << 30))
    # An unknown frame type as the first frame.
    odd, _ = hello(port)
    odd.sendall(struct.pack("<BBHI", 0x7F, 0, 0, 4) + b"abcd")
    still_serving(server, tmp_path, "during")
    for s in (c, big, odd):
        assert closed_by_server(s)
    st = stats(server)
    assert st["pushes_open"] == 0
    assert leftovers(served) == []


@pytest.mark.parametrize("streams", [0, 129, 65535])
def test_stream_counts_past_the_bound_are_refused(server, served, tmp_path, streams):
    c, n = hello(server.sport)
    c.sendall(raw_request(TOKEN, n, streams, os.urandom(16), "r" * 32))
    # Refused with a message naming the count, or closed: never admitted.
    try:
        status, msg = reply(c)
        assert status != 0 and str(streams) in msg, msg
    except (ConnectionError, AssertionError) as e:
        if isinstance(e, AssertionError) and "streams" not in str(e):
            raise
    assert stats(server)["pushes_open"] == 0
    still_serving(server, tmp_path)


@pytest.mark.parametrize("path", [b"../escape", b"/etc/passwd", b"a\x00b", b"\x1b[31mred\x07", b"\xff\xfe bad utf-8",
                                  b"x" * 4096])
def test_a_push_naming_a_path_is_refused_and_its_text_escaped_in_the_log(server, served, tmp_path, path):
    c, n = hello(server.sport)
    c.sendall(raw_request(TOKEN, n, 1, os.urandom(16), "r" * 32, path=path))
    try:
        status, msg = reply(c)
        assert status != 0, msg
        assert "\x1b" not in msg and "\x00" not in msg
    except ConnectionError:
        pass  # closed without a reply: refused all the same
    still_serving(server, tmp_path)
    rc, _, err = server.stop()
    assert rc == 0, err
    assert "\x1b" not in err and "\x00" not in err and "\x07" not in err, repr(err[-2000:])
    assert sorted(p.name for p in served.iterdir()) == ["page.txt", "real-probe"]


def test_receiver_token_and_reply_port_and_features_out_of_bounds(server, served, tmp_path):
    cases = [
        dict(receiver_token=b"t" * 129),  # past kMaxReceiverTokenBytes
        dict(receiver_token=b""),
        dict(reply_port=5),  # a push attaches; it never has the server connect out
        dict(features=w.FEATURE_GET_SESSIONS),  # no bound transfer tokens
        dict(bad_mac=True),
    ]
    for k in cases:
        c, n = hello(server.sport)
        bad_mac = k.pop("bad_mac", False)
        args = dict(receiver_token="r" * 32)
        args.update(k)
        frame = raw_request("wrong" if bad_mac else TOKEN, n, 1, os.urandom(16), **args)
        c.sendall(frame)
        try:
            status, msg = reply(c)
            assert status != 0, (k, msg)
        except ConnectionError:
            pass
        c.close()
    assert stats(server)["pushes_open"] == 0
    still_serving(server, tmp_path)


def test_a_replayed_nonce_is_refused_while_its_push_runs(server, served, tmp_path):
    p = Pusher(server.sport)
    c, n = hello(server.sport)
    c.sendall(w.push_request(TOKEN, n, 1, p.nonce, p.rtok))
    status, msg = reply(c)
    assert status != 0 and "nonce" in msg, msg
    data = os.urandom(5000)
    p.manifest([(0, w.FILE, "one", len(data), "")], len(data))
    d = p.stream(1)
    d.sendall(block(0, 0, data))
    assert p.finish([d], 1, len(data)) == 0
    assert (served / "one").read_bytes() == data


# ------------------------------------------------------------------ attaches ------------------


def test_attaches_past_the_count_and_junk_on_a_push_s_nonce_do_not_break_it(server, served, tmp_path):
    """Junk attached with the push's nonce (it travels in clear in the request; a handshake
    with the wrong token, garbage) must not end the push or take its streams' places: before,
    the serve counted every attach against 1 + 2 x streams, and two junk connections left the
    pusher's own data stream refused. Connections attached past that count go to the push's
    receiver, whose handshake table bounds them, and close with the push."""
    p = Pusher(server.sport)
    junk = []
    # A handshake keyed with the wrong token, on the push's nonce.
    j = p.attach()
    try:
        st = w.sender_hello(j, "not-the-key", 1, 1, 1, p.tid)
        assert st != 0
    except (ConnectionError, AssertionError, struct.error):
        pass
    junk.append(j)
    # Garbage in place of a ClientHello.
    g = p.attach()
    g.sendall(os.urandom(200))
    junk.append(g)
    data = os.urandom(300000)
    p.manifest([(0, w.FILE, "kept", len(data), "")], len(data))
    try:
        d = p.stream(1)
    except (ConnectionError, AssertionError, OSError) as e:
        pytest.fail(f"junk on the push's nonce took its stream's place: {e!r}")
    # Past the request's count: held by the receiver's handshake table, closed with the push.
    extra = [p.attach() for _ in range(3)]
    d.sendall(block(0, 0, data))
    assert p.finish([d], 1, len(data)) == 0
    assert (served / "kept").read_bytes() == data
    for e in extra:
        assert closed_by_server(e)
    assert wait_for(lambda: stats(server)["pushes_open"] == 0, HANG)
    assert leftovers(served) == []


def test_a_handshake_claiming_more_streams_than_the_request_is_refused(server, served, tmp_path):
    """The request asked for 1 stream (what the serve admitted it for); the control connection's
    ClientHello claims 8: refused (bad stream), nothing is written, the push ends by its join
    deadline, and the serve goes on. Before, the attaches were what held a push to its count, and
    counting them let junk on the push's nonce take its streams' places."""
    req, n = hello(server.sport)
    nonce, rtok = os.urandom(16), os.urandom(16).hex()
    req.sendall(w.push_request(TOKEN, n, 1, nonce, rtok))
    status, msg = reply(req)
    assert status == 0, msg
    c, _ = hello(server.sport)
    c.sendall(w.get_attach(nonce))
    assert w.sender_hello(c, w.push_transfer_token(TOKEN, nonce, rtok), 0, 0, 8, os.urandom(16)) == 4  # bad stream
    assert wait_for(lambda: stats(server)["pushes_open"] == 0 and stats(server)["pushes_failed"] == 1, HANG)
    still_serving(server, tmp_path)
    assert sorted(p.name for p in served.iterdir()) == ["page.txt", "real-probe"]
