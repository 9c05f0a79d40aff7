"""mptcp= in the Python API (issue 16): send/Receiver and get/Server run every connection over
Multipath TCP where this kernel has it on, and report it in the stats dicts; a peer without it
is a fallback named per connection (never silent); bad values and mptcp without a get port are
refused. Loopback only; the "on" cases need net.mptcp.enabled=1."""
import sys
from pathlib import Path

import pytest

from conftest import Served, local_receiver, make_tree, tree_listing

import sluice


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "wan"))
from mptcp_bed import mptcp_enabled as mptcp_here  # noqa: E402


needs_mptcp = pytest.mark.skipif(not mptcp_here(), reason="net.mptcp.enabled is not 1 here")


@needs_mptcp
def test_send_and_receiver_with_mptcp(tree, dst):
    rx = local_receiver(dst, mptcp=True)
    served = Served(rx)
    sent = sluice.send([tree], rx.url, streams=2, mptcp=True)
    got = served.join()
    assert tree_listing(dst / "src") == tree_listing(tree)
    for stats in (sent, got):
        assert stats["mptcp"] == "on", stats["mptcp_connections"]
        assert [c["stream"] for c in stats["mptcp_connections"]] == [0, 1, 2]
    # Figures of MPTCP connections come from their subflows, and say how many.
    assert all(t["subflows"] >= 1 for t in sent["tcp_streams"]), sent["tcp_streams"]
    assert "MPTCP" in sent["window_limits_unjudged"]


def test_send_with_mptcp_to_a_plain_receiver_falls_back_and_says_why(tree, dst):
    rx = local_receiver(dst)
    served = Served(rx)
    sent = sluice.send([tree], rx.url, streams=2, mptcp=True)
    served.join()
    assert sent["mptcp"] == "fallback"
    assert all(not c["mptcp"] and c["why"] for c in sent["mptcp_connections"]), sent["mptcp_connections"]
    assert all(t["subflows"] == 0 for t in sent["tcp_streams"])
    assert sent["window_limits_unjudged"] == ""


@needs_mptcp
def test_get_and_server_with_mptcp(tmp_path):
    src = make_tree(tmp_path / "www", big=6 << 20)
    with sluice.serve(src, http_port=0, port=0, token="pytok", bind_address="127.0.0.1", threads=1,
                      mptcp=True) as srv:
        dest = tmp_path / "in"
        dest.mkdir()
        stats = sluice.get(f"sluice://127.0.0.1:{srv.get_port}/a?token=pytok", dest, streams=2, mptcp=True)
    assert stats["mptcp"] == "on", stats["mptcp_connections"]
    assert len(stats["mptcp_connections"]) == 3
    assert tree_listing(dest / "a") == tree_listing(src / "a")


def test_get_with_mptcp_from_a_plain_server_falls_back(tmp_path):
    src = make_tree(tmp_path / "www", big=2 << 20)
    with sluice.serve(src, http_port=0, port=0, token="pytok", bind_address="127.0.0.1", threads=1) as srv:
        dest = tmp_path / "in"
        dest.mkdir()
        stats = sluice.get(f"sluice://127.0.0.1:{srv.get_port}/a?token=pytok", dest, streams=2, mptcp=True)
    assert stats["mptcp"] == "fallback"
    assert all(not c["mptcp"] and c["why"] for c in stats["mptcp_connections"]), stats["mptcp_connections"]


def test_bad_mptcp_values_are_refused(tmp_path, dst):
    with pytest.raises(sluice.UsageError, match="mptcp"):
        sluice.send([tmp_path], "sluice://127.0.0.1:1/?token=t", mptcp="yes")
    with pytest.raises(sluice.UsageError, match="mptcp"):
        local_receiver(dst, mptcp=1)
    with pytest.raises(sluice.UsageError, match="mptcp"):
        sluice.get("sluice://127.0.0.1:1/x?token=t", dst, mptcp="on")
    with pytest.raises(sluice.UsageError, match="needs port"):
        sluice.Server(tmp_path, http_port=0, token="t", mptcp=True)
