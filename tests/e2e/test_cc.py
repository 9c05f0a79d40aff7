"""--cc (issue 16): the congestion control is set on the data streams, reported in JSON with
TCP_INFO per stream, and a name the kernel lacks is a usage error naming it and the list."""
import json
from pathlib import Path

import pytest

from conftest import Receiver, run_sluice, write_random

AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
DEFAULT = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()


def not_default():
    """An available algorithm other than the system's default, so the test sees --cc act."""
    others = [a for a in AVAILABLE if a != DEFAULT]
    if not others:
        pytest.skip(f"only {DEFAULT} is available: --cc cannot be told from the default")
    return others[0]


def test_cc_is_set_on_every_data_stream_and_reported(tmp_path):
    cc = not_default()
    src = tmp_path / "src.bin"
    write_random(src, 24 << 20, seed=16)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = Receiver(dest, "--cc", cc)
    try:
        r = run_sluice("send", "--streams", 3, "--cc", cc, "--json", src, rx.url)
        assert r.returncode == 0, r.stderr
        s = json.loads(r.stdout.strip().splitlines()[-1])
        code, out, err = rx.wait()
        assert code == 0, err
    finally:
        rx.kill()
    rs = json.loads(out.strip().splitlines()[-1])
    # Read back with getsockopt(TCP_CONGESTION) on the data sockets and on the listener.
    assert s["congestion_control"] == cc
    assert rs["congestion_control"] == cc
    streams = s["tcp_streams"]
    assert [t["stream"] for t in streams] == [1, 2, 3]
    # TCP counts every payload byte it sent: the three streams together carried the file.
    assert sum(t["bytes_sent"] for t in streams) >= src.stat().st_size
    assert all(t["mss"] > 0 and t["cwnd"] > 0 for t in streams)
    assert s["bytes_retrans"] == sum(t["bytes_retrans"] for t in streams)
    assert isinstance(s["window_limits"], list) and isinstance(rs["window_limits"], list)
    assert (dest / "src.bin").read_bytes() == src.read_bytes()


def test_without_cc_the_system_default_is_used(tmp_path):
    src = tmp_path / "f"
    src.write_bytes(b"x" * 1000)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = Receiver(dest)
    try:
        r = run_sluice("send", "--json", src, rx.url)
        assert r.returncode == 0, r.stderr
        assert rx.wait()[0] == 0
    finally:
        rx.kill()
    assert json.loads(r.stdout.strip().splitlines()[-1])["congestion_control"] == DEFAULT


@pytest.mark.parametrize("name", ["nosuchcc", "x" * 40])
def test_unknown_cc_is_a_usage_error_naming_it_and_the_list(tmp_path, name):
    src = tmp_path / "f"
    src.write_bytes(b"x")
    r = run_sluice("send", "--cc", name, src, "sluice://127.0.0.1:9/?token=t")
    assert r.returncode == 2
    assert f"--cc '{name}'" in r.stderr
    assert "available: " + " ".join(AVAILABLE) in r.stderr
    assert "connect" not in r.stderr  # refused before any connection was tried
    r = run_sluice("recv", "--cc", name, "--port", 0, tmp_path)
    assert r.returncode == 2
    assert f"--cc '{name}'" in r.stderr and "available: " in r.stderr
    assert "sluice://" not in r.stdout  # refused before listening


def test_pacing_default_follows_the_congestion_control_and_is_reported(tmp_path):
    """Issue 16 (h16i): pacing the streams together is on by default with bbr at a fixed stream
    count, off with cubic and with --streams auto; --json says which and why, -v too."""
    if "bbr" not in AVAILABLE or "cubic" not in AVAILABLE:
        pytest.skip("needs both bbr and cubic")
    src = tmp_path / "src.bin"
    write_random(src, 4 << 20, seed=17)
    seen = {}
    # Encrypted (the default off loopback), the control connection is a relay's socket pair by
    # the time the choice is made: the choice was once "off (default with no data stream)" there.
    for case, args in {"bbr": ["--cc", "bbr"], "cubic": ["--cc", "cubic"], "auto": ["--cc", "bbr", "--streams", "auto"],
                       "asked off": ["--cc", "bbr", "--no-pace"], "asked on": ["--cc", "cubic", "--pace"],
                       "bbr encrypted": ["--cc", "bbr", "--encrypt"], "cubic encrypted": ["--cc", "cubic", "--encrypt"]}.items():
        dest = tmp_path / case.replace(" ", "-")
        dest.mkdir()
        rx = Receiver(dest, *(["--encrypt"] if "--encrypt" in args else []))
        try:
            r = run_sluice("send", *args, "--json", "-v", src, rx.url)
            assert r.returncode == 0, r.stderr
            code, _, err = rx.wait()
            assert code == 0, err
        finally:
            rx.kill()
        choice = json.loads(r.stdout.strip().splitlines()[-1])["pacing_choice"]
        assert f"pacing: {choice}" in r.stderr  # -v says the same
        seen[case] = choice
    assert seen["bbr"].startswith("on (default with bbr")
    assert seen["bbr encrypted"] == seen["bbr"]
    assert seen["cubic encrypted"] == seen["cubic"]
    assert seen["cubic"].startswith("off (default with cubic")
    assert seen["auto"].startswith("off (default with --streams auto")
    assert seen["asked off"] == "off (asked: --no-pace)"
    assert seen["asked on"] == "on (asked: --pace)"


def test_pace_and_no_pace_together_are_refused(tmp_path):
    src = tmp_path / "src.bin"
    write_random(src, 1000, seed=18)
    r = run_sluice("send", "--pace", "--no-pace", "--to", "127.0.0.1:9", "--token", "x", src)
    assert r.returncode == 2
    assert "--pace and --no-pace" in r.stderr
