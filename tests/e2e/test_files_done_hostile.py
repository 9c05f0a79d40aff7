"""A receiver's FILES_DONE is network input (issue 19, docs/protocol.md "Announce window"): its
`below` lets the sender free the records of files below that id, so one that names entries
never sent or goes back must end the transfer as a protocol error naming the values, never
free a record a stream or page still holds, and never crash the sender. The wire model plays
the receiver: it offers the announce window, reads the whole manifest, then reports."""
import socket
import struct
import subprocess
import threading

import sluice_wire as w
from conftest import SLUICE

TOKEN = "testtoken"
MANIFEST_END = 0x03


class ReportingReceiver:
    """Handshakes (offering bit 7), takes every data stream, reads the manifest to its end and
    then sends `reports` (FILES_DONE frames) on the control connection. Acks no page."""

    def __init__(self, reports, streams=1):
        self.reports = reports
        self.streams = streams
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(60)
        self.port = self.listener.getsockname()[1]
        self.conns = []
        self.error = None
        self.client_features = None
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def handshake(self):
        s, hello = w.accept_handshake(self.listener, TOKEN, w.FEATURE_ANNOUNCE_WINDOW)
        self.conns.append(s)
        return s, hello

    def serve(self):
        try:
            control, hello = self.handshake()
            self.client_features = hello[11]
            for _ in range(self.streams):
                self.handshake()
            while w.read_frame(control)[0] != MANIFEST_END:
                pass
            for r in self.reports:
                control.sendall(r)
        except Exception as e:  # reported by the test
            self.error = e

    def close(self):
        self.thread.join(timeout=120)
        for s in self.conns:
            s.close()
        self.listener.close()


def send_against(tmp_path, reports, files=2000):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(files):
        (src / f"f{i:05d}").write_bytes(b"x" * (1 + i % 50))
    peer = ReportingReceiver(reports)
    try:
        r = subprocess.run([SLUICE, "send", str(src), f"sluice://127.0.0.1:{peer.port}/?token={TOKEN}", "--streams", "1",
                            "--no-owner", "--no-group", "--no-xattrs", "--no-acls", "--idle-timeout", "60"],
                           capture_output=True, text=True, timeout=300)
    finally:
        peer.close()
    assert peer.error is None, peer.error
    assert peer.client_features & w.FEATURE_ANNOUNCE_WINDOW  # the sender kept a window
    return r


def test_files_done_naming_entries_never_sent_is_a_protocol_error(tmp_path):
    # 2,001 entries went out (the directory and 2,000 files): ids 0-2000.
    r = send_against(tmp_path, [w.files_done(0, 2002)])
    assert r.returncode != 0
    assert "FILES_DONE reports every file below id 2002 complete, but only entries below 2001 were sent" in r.stderr, r.stderr


def test_files_done_far_out_of_range_is_a_protocol_error(tmp_path):
    r = send_against(tmp_path, [w.files_done(0, (1 << 64) - 1)])
    assert r.returncode != 0
    assert "FILES_DONE reports every file below id 18446744073709551615 complete" in r.stderr, r.stderr


def test_files_done_going_back_is_a_protocol_error(tmp_path):
    # The first report is in range: the records below 1024 are still held by their unanswered
    # pages, so nothing is freed under them; the second goes back.
    r = send_against(tmp_path, [w.files_done(0, 1024), w.files_done(0, 512)])
    assert r.returncode != 0
    assert "FILES_DONE reports every file below id 512 complete after it reported below 1024" in r.stderr, r.stderr


def test_files_done_naming_held_files_frees_nothing_under_them(tmp_path):
    """Every file reported complete while its page is unanswered (and so its data unsent): the
    sender frees none of them (they are held), so a RESEND naming one still finds its record
    and the transfer ends on the receiver's next lie, not in a crash. Here the count it reports
    passes the files announced: a protocol error, after the in-range `below` was taken. (Entry
    0 is the directory; entry 5 is f00004, 5 bytes.)"""
    r = send_against(tmp_path, [w.files_done(0, 2001), w.frame(w.RESEND, struct.pack("<QQQ", 5, 0, 5)),
                                w.files_done(2001, 2001)])
    assert r.returncode != 0
    assert "FILES_DONE reports 2001 files complete after 0, with 2000 announced" in r.stderr, r.stderr
    assert "resend a block that was never sent" not in r.stderr, r.stderr
