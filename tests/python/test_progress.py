"""The progress callable is called on the calling thread, at most once per interval, with
counters that grow to the totals, and once more at the end; log lines reach the log callable."""
import threading
import time

import pytest

from conftest import Served, local_receiver

import sluice


def test_progress_on_calling_thread_at_a_bounded_rate(tree, dst):
    rx = local_receiver(dst)
    served = Served(rx)
    calls = []
    threads = set()

    def progress(p):
        calls.append((time.monotonic(), p))
        threads.add(threading.get_ident())

    start = time.monotonic()
    stats = sluice.send([tree], rx.url, rate_limit="16M", progress=progress, progress_interval=0.1)
    elapsed = time.monotonic() - start
    served.join()
    assert threads == {threading.get_ident()}
    assert 5 <= len(calls) <= elapsed / 0.1 + 2
    done = [p["bytes_done"] for _, p in calls]
    assert done == sorted(done)
    last = calls[-1][1]
    assert last["bytes_done"] == last["bytes_total"] == stats["bytes"]
    assert last["files_total"] == stats["files"]
    assert 0 < last["files_done"] <= last["files_total"]
    assert last["walk_done"] is True
    assert set(last) >= {"bytes_done", "bytes_total", "files_done", "files_total", "walk_done",
                         "elapsed", "streams"}


def test_sender_counts_empty_files_done(tmp_path, dst):
    src = tmp_path / "src"
    src.mkdir()
    (src / "empty").write_bytes(b"")
    (src / "full").write_bytes(b"x" * 1000)
    rx = local_receiver(dst)
    served = Served(rx)
    calls = []
    sluice.send([src], rx.url, progress=calls.append)
    served.join()
    assert calls[-1]["files_done"] == calls[-1]["files_total"] == 2


def test_receiver_progress_and_verbose_log(tree, dst):
    lines = []
    rx = local_receiver(dst, verbose=True, log=lines.append)
    calls = []
    served = Served(rx, progress=calls.append, progress_interval=0.05)
    sluice.send([tree], rx.url, rate_limit="32M")
    got = served.join()
    assert calls and calls[-1]["bytes_done"] == got["bytes"]
    assert any("transfer started" in line for line in lines), lines


def test_sender_log_receives_warnings(tmp_path, dst):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"x" * 1000)
    import os
    os.mkfifo(src / "fifo")
    lines = []
    rx = local_receiver(dst)
    served = Served(rx)
    stats = sluice.send([src], rx.url, log=lines.append)
    served.join()
    # Issue 17: fifos are re-created by default (the Python send() has no specials= option
    # yet to ask for the old skip-with-a-warning), so no warning is owed here.
    assert stats["skipped_entries"] == 0
    import stat as st
    assert st.S_ISFIFO(os.lstat(dst / "src" / "fifo").st_mode)
