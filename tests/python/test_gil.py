"""send() and Receiver.wait() release the GIL while bytes move: a pure-Python thread keeps
counting during a transfer. (Were the GIL held for the call, the counter would stand still
from the call's start to its end.)"""
import threading
import time

from conftest import Served, local_receiver

import sluice


def test_python_thread_runs_during_a_transfer(tree, dst):
    rx = local_receiver(dst)
    served = Served(rx)
    count = 0
    stop = False

    def counter():
        nonlocal count
        while not stop:
            count += 1

    t = threading.Thread(target=counter)
    t.start()
    time.sleep(0.1)
    before = count
    start = time.monotonic()
    stats = sluice.send([tree], rx.url, rate_limit="16M", streams=2)  # ~1.5 s, no callbacks
    elapsed = time.monotonic() - start
    during = count - before
    stop = True
    t.join()
    served.join()
    assert elapsed > 1.0, "the transfer was too short to tell"
    assert stats["bytes_sent"] > 0
    # A Python loop counts millions per second even on a loaded machine at nice 19; a held
    # GIL would leave only the few counts of the switch before send() took it.
    assert during > 50_000, f"counter advanced only {during} times in {elapsed:.2f} s"
