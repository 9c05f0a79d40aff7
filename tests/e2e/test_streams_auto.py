"""--streams auto (issue 16): over loopback (a path under 2 ms) the default 4 streams without a
search, said in -v and JSON (h16j: opening 16 and searching made short LAN transfers slower);
pipe mode keeps a fixed count and says so. The search over a long path (16 streams opened,
the count chosen from the measured rate) is in tests/wan/test_wan_pacing_auto.py and its
decision unit-tested (tests/unit/stream_search_test.cpp); here only what the CLI shows and
that the data arrives (no timing)."""
import json
import subprocess

import pytest

from conftest import SLUICE, Receiver, run_sluice, write_random


@pytest.mark.parametrize("asked", [["--streams", "auto"], []], ids=["asked", "by_default"])
def test_auto_over_loopback_keeps_the_default_count_without_a_search_and_says_why(tmp_path, asked):
    """auto is also what `sluice send` does with no --streams (h16o): the same choice, said the same way."""
    src = tmp_path / "f.bin"
    write_random(src, 64 << 20, 61)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = Receiver(dest)
    try:
        r = run_sluice("send", *asked, "-v", "--json", "--block-size", "1M", src, rx.url)
        code, _, err = rx.wait()
    finally:
        rx.kill()
    assert r.returncode == 0 and code == 0, (r.stderr, err)
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["streams"] == 4 and s["streams_used"] == 4
    assert s["streams_choice"].startswith("auto: 4 streams, no search: a path of "), s["streams_choice"]
    assert s["streams_choice"].endswith(" us round trip (under 2 ms, a LAN, where more streams only cost CPU)")
    assert "sluice: streams " + s["streams_choice"] in r.stderr
    assert "streams auto: starting with" not in r.stderr  # no search
    assert (dest / "f.bin").read_bytes() == src.read_bytes()


def test_a_fixed_count_reports_every_stream_used_and_no_choice(tmp_path):
    src = tmp_path / "f"
    src.write_bytes(b"y" * 100_000)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = Receiver(dest)
    try:
        r = run_sluice("send", "--streams", "3", "--json", src, rx.url)
        assert rx.wait()[0] == 0
    finally:
        rx.kill()
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert (s["streams"], s["streams_used"], s["streams_choice"]) == (3, 3, "")


@pytest.mark.parametrize("asked", [["--streams", "auto"], []], ids=["asked", "by_default"])
def test_pipe_mode_sends_over_a_fixed_count_and_says_so(tmp_path, asked):
    rx = subprocess.Popen([SLUICE, "recv", "--stdout", "--bind", "127.0.0.1", "--token", "t"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    try:
        url = rx.stderr.readline().decode().strip()
        assert url.startswith("sluice://"), url
        r = subprocess.run([SLUICE, "send", *asked, "-v", "--json", "-", url], input=b"z" * 300_000,
                           capture_output=True, timeout=60)
        out, _ = rx.communicate(timeout=60)
    finally:
        if rx.poll() is None:
            rx.kill()
    assert r.returncode == 0, r.stderr
    assert out == b"z" * 300_000
    assert b"--streams auto: pipe mode sends over a fixed 4 streams" in r.stderr
    assert json.loads(r.stdout.decode().strip().splitlines()[-1])["streams"] == 4


def test_a_bad_streams_value_is_a_usage_error_naming_it(tmp_path):
    src = tmp_path / "f"
    src.write_bytes(b"x")
    r = run_sluice("send", "--streams", "automatic", src, "sluice://127.0.0.1:9/?token=t")
    assert r.returncode == 2
    assert "--streams" in r.stderr and "automatic" in r.stderr
