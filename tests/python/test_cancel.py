"""Cancelling from another thread: CancelFlag for send(), Receiver.cancel() for wait(); an
exception raised by a progress callable cancels the transfer and is re-raised as itself."""
import threading
import time

import pytest
from conftest import Served, local_receiver

import sluice

SLOW = dict(rate_limit="8M", streams=2, block_size="1M")  # the 24 MiB tree takes ~3 s


def test_cancel_flag_stops_send_from_another_thread(tree, dst):
    rx = local_receiver(dst)
    served = Served(rx)
    flag = sluice.CancelFlag()
    seen = []
    timer = threading.Timer(0.7, flag.set)
    timer.start()
    start = time.monotonic()
    with pytest.raises(sluice.Cancelled) as e:
        sluice.send([tree], rx.url, cancel=flag, progress=seen.append, progress_interval=0.05, **SLOW)
    elapsed = time.monotonic() - start
    assert e.value.code == "cancelled"
    assert flag.is_set()
    assert 0 < seen[-1]["bytes_done"] < seen[-1]["bytes_total"]  # stopped part way
    assert elapsed < 2.5
    with pytest.raises(sluice.Error):  # the receiver is told (ABORT) and fails, not hangs
        served.join(30)
    assert not (dst / "src" / "big.bin").exists()  # nothing incomplete under a final name


def test_receiver_cancel_from_another_thread(tree, dst):
    rx = local_receiver(dst)
    served = Served(rx)
    result = {}

    def sender():
        try:
            sluice.send([tree], rx.url, **SLOW)
        except sluice.Error as e:
            result["error"] = e

    t = threading.Thread(target=sender)
    t.start()
    time.sleep(0.7)
    rx.cancel()
    with pytest.raises(sluice.Cancelled):
        served.join(30)
    t.join(30)
    assert not t.is_alive()
    assert isinstance(result.get("error"), sluice.Error)
    assert not (dst / "src" / "big.bin").exists()


def test_cancel_an_idle_receiver():
    rx = sluice.Receiver("/tmp", bind_address="127.0.0.1")
    served = Served(rx)
    time.sleep(0.2)
    rx.cancel()
    with pytest.raises(sluice.Cancelled):
        served.join(10)


class Stop(Exception):
    pass


def test_exception_in_progress_callable_cancels_and_is_reraised(tree, dst):
    rx = local_receiver(dst)
    served = Served(rx)

    def progress(p):
        if p["bytes_done"] > 0:
            raise Stop("enough")

    start = time.monotonic()
    with pytest.raises(Stop):
        sluice.send([tree], rx.url, progress=progress, progress_interval=0.05, **SLOW)
    assert time.monotonic() - start < 2.5
    with pytest.raises(sluice.Error):
        served.join(30)
