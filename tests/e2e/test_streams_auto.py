"""--streams auto (issue 16): 16 streams opened, the count used chosen from the measured rate
and reported with its reasons in -v and JSON; pipe mode keeps a fixed count and says so. The
decision itself is unit-tested (tests/unit/stream_search_test.cpp); here only what the CLI
shows and that the data arrives, whatever count was chosen (no timing)."""
import json
import subprocess

from conftest import SLUICE, Receiver, run_sluice, write_random


def test_auto_opens_16_streams_and_reports_the_count_it_used_and_why(tmp_path):
    src = tmp_path / "f.bin"
    write_random(src, 64 << 20, 61)
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = Receiver(dest)
    try:
        r = run_sluice("send", "--streams", "auto", "-v", "--json", "--block-size", "1M", src, rx.url)
        code, _, err = rx.wait()
    finally:
        rx.kill()
    assert r.returncode == 0 and code == 0, (r.stderr, err)
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["streams"] == 16
    assert 1 <= s["streams_used"] <= 16
    assert s["streams_choice"].startswith(f"auto: {s['streams_used']} of 16 streams (")
    assert "streams auto: starting with 4 of 16 open streams" in r.stderr
    assert "sluice: streams auto: " + s["streams_choice"][len("auto: "):] in r.stderr
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


def test_pipe_mode_sends_over_a_fixed_count_and_says_so(tmp_path):
    rx = subprocess.Popen([SLUICE, "recv", "--stdout", "--bind", "127.0.0.1", "--token", "t"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    try:
        url = rx.stderr.readline().decode().strip()
        assert url.startswith("sluice://"), url
        r = subprocess.run([SLUICE, "send", "--streams", "auto", "-v", "--json", "-", url], input=b"z" * 300_000,
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
