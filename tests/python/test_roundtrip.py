"""A tree sent by sluice.send and received by sluice.Receiver arrives byte for byte, between two
threads and between two processes; the stats dicts carry the CLI's --json fields."""
import json
import os
import subprocess
import sys

import pytest

from conftest import Served, assert_same_tree, local_receiver

import sluice


def test_tree_between_threads(tree, dst):
    rx = local_receiver(dst)
    served = Served(rx)
    sent = sluice.send([tree], rx.url, streams=3, block_size="1M")
    got = served.join()
    assert_same_tree(tree, dst / "src")
    assert sent["role"] == "send" and got["role"] == "recv"
    assert sent["bytes"] == got["bytes"] == sum(
        os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(tree) for f in fs
        if not os.path.islink(os.path.join(d, f)))
    assert sent["files"] == got["files"] == 22
    assert sent["symlinks"] == 1
    assert sent["streams"] == 3 and sent["block_size"] == 1 << 20
    assert sent["fallbacks"] == []


def test_tree_between_processes(tree, dst):
    """The receiver is another Python process: its URL comes over stdout, its stats back as JSON."""
    code = ("import json, sys, sluice\n"
            "rx = sluice.Receiver(sys.argv[1], bind_address='127.0.0.1', advertise_host='127.0.0.1')\n"
            "print(rx.url, flush=True)\n"
            "print(json.dumps(rx.wait()), flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(dst)], stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        sent = sluice.send(str(tree), url)
        got = json.loads(proc.stdout.readline())
        assert proc.wait(60) == 0
    finally:
        proc.kill()
    assert_same_tree(tree, dst / "src")
    assert got["bytes_sent"] == sent["bytes_sent"] > 0


def test_stats_have_the_cli_json_fields(tree, dst, tmp_path):
    """Python's send() dict and the CLI's `send --json` object have the same keys; the CLI
    sends to a Python receiver, whose dict has the keys of `recv --json` (role-specific path
    key and the sender's TCP_INFO aside, both sides share the Stats fields)."""
    rx = local_receiver(dst)
    served = Served(rx)
    cli = subprocess.run([os.environ["SLUICE_BIN"], "send", "--json", str(tree), rx.url],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    cli_sent = json.loads(cli.stdout)
    got = served.join()
    assert_same_tree(tree, dst / "src")

    dst2 = tmp_path / "dst2"
    dst2.mkdir()
    rx2 = local_receiver(dst2)
    served2 = Served(rx2)
    py_sent = sluice.send(tree, rx2.url)
    served2.join()
    assert set(py_sent) == set(cli_sent)
    # TCP_INFO per data stream is the sender's (where retransmits and cwnd live)
    sender_only = {"send_path", "tcp_streams", "bytes_retrans", "streams_used", "streams_choice", "pacing", "pacing_choice", "streams_reopened",
                   "bytes_resent_after_break", "connect_timeout_ms"}
    assert set(got) == set(cli_sent) - sender_only | {"recv_path", "bytes_verified_from_disk", "deleted", "metadata_not_kept", "bytes_written_direct",
                                                            "mark_deadlines", "marks_given_up", "receives_unmarked_for_loss"}


def test_pathlike_and_single_path(tree, dst):
    rx = local_receiver(dst)
    served = Served(rx)
    sluice.send(tree / "big.bin", rx.url)
    served.join()
    assert (dst / "big.bin").read_bytes() == (tree / "big.bin").read_bytes()


def test_cc_is_passed_through_and_reported(tree, dst):
    """cc= reaches TCP_CONGESTION on both sides; the stats say which algorithm ran and carry
    TCP_INFO per data stream."""
    avail = open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
    cc = "reno" if "reno" in avail else avail[0]
    rx = local_receiver(dst, cc=cc)
    served = Served(rx)
    sent = sluice.send([tree], rx.url, streams=2, cc=cc)
    got = served.join()
    assert sent["congestion_control"] == got["congestion_control"] == cc
    assert [t["stream"] for t in sent["tcp_streams"]] == [1, 2]
    with pytest.raises(sluice.UsageError, match="--cc 'nosuchcc'.*available: "):
        sluice.send([tree], rx.url, cc="nosuchcc")
    with pytest.raises(sluice.UsageError, match="cc=5"):
        sluice.send([tree], rx.url, cc=5)


@pytest.mark.parametrize("asked", [{"streams": "auto"}, {}], ids=["asked", "by_default"])
def test_streams_auto_reports_its_choice(tree, dst, asked):
    """streams="auto" (issue 16), the default since h16o: the stats say how many streams took
    work and why; over loopback (a path under 2 ms, h16j) that is 4 without a search."""
    rx = local_receiver(dst)
    served = Served(rx)
    sent = sluice.send([tree], rx.url, **asked)
    served.join()
    assert sent["streams"] == 4 and sent["streams_used"] == 4
    assert sent["streams_choice"].startswith("auto: 4 streams, no search: a path of "), sent["streams_choice"]
    with pytest.raises(sluice.UsageError, match="expected an int from 1 to 128, or 'auto'"):
        sluice.send([tree], rx.url, streams="many")
