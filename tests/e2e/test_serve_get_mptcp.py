"""`sluice get --mptcp` from `sluice serve --port --mptcp` (issue 16) over loopback: every
connection of the get runs MPTCP and says so; a server without --mptcp is a fallback to plain
TCP named per connection with the reason (never silent); --mptcp without --port is refused."""
import json
import sys
from pathlib import Path

import pytest

from conftest import run_sluice, write_random
from serve_client import Server


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "wan"))
from mptcp_bed import mptcp_enabled as mptcp_here  # noqa: E402


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "www"
    r.mkdir()
    write_random(r / "big.bin", 6 << 20, 7)
    return r


def get(server, dest, *args):
    return run_sluice("get", server.sluice_base + f"big.bin?token={server.token}", dest, "--json", "-v", *args)


@pytest.mark.skipif(not mptcp_here(), reason="net.mptcp.enabled is not 1 here")
def test_get_over_mptcp_from_an_mptcp_server(root, tmp_path):
    s = Server(root, "--port", "0", "--mptcp", "-v")
    try:
        dest = tmp_path / "in"
        dest.mkdir()
        r = get(s, dest, "--mptcp", "--streams", "3")
        assert r.returncode == 0, r.stderr
        assert (dest / "big.bin").read_bytes() == (root / "big.bin").read_bytes()
        st = json.loads(r.stdout.strip().splitlines()[-1])
        assert st["mptcp"] == "on", st["mptcp_connections"]
        assert [c["stream"] for c in st["mptcp_connections"]] == [0, 1, 2, 3]
        assert all(c["mptcp"] for c in st["mptcp_connections"])
        assert "mptcp: the request connection: MPTCP" in r.stderr, r.stderr
    finally:
        _, _, err = s.stop()
    assert "the request came over MPTCP" in err, err


def test_get_with_mptcp_from_a_plain_server_falls_back_and_says_why(root, tmp_path):
    s = Server(root, "--port", "0")
    try:
        dest = tmp_path / "in"
        dest.mkdir()
        r = get(s, dest, "--mptcp", "--streams", "2")
        assert r.returncode == 0, r.stderr
        assert (dest / "big.bin").read_bytes() == (root / "big.bin").read_bytes()
        st = json.loads(r.stdout.strip().splitlines()[-1])
        assert st["mptcp"] == "fallback"
        assert len(st["mptcp_connections"]) == 3
        for c in st["mptcp_connections"]:
            assert not c["mptcp"]
            # This side connected out: the server is what answered in TCP (or this kernel says why).
            assert ("answered in plain TCP" if mptcp_here() else "MPTCP") in c["why"], c
        assert "plain TCP" in r.stderr
    finally:
        s.kill()


def test_serve_mptcp_needs_the_sluice_port(root):
    r = run_sluice("serve", str(root), "--mptcp", "--token", "t")
    assert r.returncode == 2 and "--mptcp needs --port" in r.stderr, r.stderr
