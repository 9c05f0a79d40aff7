"""The token can be kept out of argv (which every local user reads in ps, /proc/PID/cmdline):
--token-file and SLUICE_TOKEN on both sides, a URL without a token, and recv --url-file, a
0600 file that never replaces or follows what is already at its path."""
import os
import socket
import stat
import subprocess

import pytest

from conftest import SLUICE, free_port, run_sluice, tree_digest, wait_for

SECRET = "t0k3n-kept-out-of-argv"


def token_file(tmp_path, value=SECRET, mode=0o600, name="token"):
    p = tmp_path / name
    p.write_text(value + "\n")
    p.chmod(mode)
    return p


def env_with(**kw):
    env = {k: v for k, v in os.environ.items() if k != "SLUICE_TOKEN"}
    env.update(kw)
    return env


def cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read()


def start_receiver(args, env=None, stdout=subprocess.PIPE):
    return subprocess.Popen([SLUICE, "recv", *map(str, args)], stdout=stdout, stderr=subprocess.PIPE,
                            env=env or env_with())


def small_tree(root):
    root.mkdir()
    (root / "a.txt").write_text("hello\n")
    (root / "sub").mkdir()
    (root / "sub" / "b.bin").write_bytes(os.urandom(70000))
    return root


@pytest.mark.parametrize("recv_way,send_way", [("file", "file"), ("env", "env"), ("file", "env"), ("env", "file")])
def test_a_transfer_with_the_token_from_a_file_or_the_environment(tmp_path, recv_way, send_way):
    src = small_tree(tmp_path / "src")
    dest = tmp_path / "dest"
    dest.mkdir()
    tf = token_file(tmp_path)
    port = free_port()
    rargs = ["--bind", "127.0.0.1", "--port", port, dest]
    renv = env_with()
    if recv_way == "file":
        rargs += ["--token-file", tf]
    else:
        renv = env_with(SLUICE_TOKEN=SECRET)
    rx = start_receiver(rargs, env=renv)
    try:
        line = rx.stdout.readline().decode().strip()
        assert line.startswith("sluice://") and line.endswith("/") and SECRET not in line, line  # no token printed
        assert SECRET.encode() not in cmdline(rx.pid)
        url = f"sluice://127.0.0.1:{port}/"  # no token in the URL
        sargs, senv = [], env_with()
        if send_way == "file":
            sargs = ["--token-file", tf]
        else:
            senv = env_with(SLUICE_TOKEN=SECRET)
        sent = subprocess.run([SLUICE, "send", src, url, *map(str, sargs)], capture_output=True, text=True, env=senv,
                              timeout=120)
        assert sent.returncode == 0, sent.stderr
        out, err = rx.communicate(timeout=120)
        assert rx.returncode == 0, err
    finally:
        rx.kill()
        rx.wait()
    assert tree_digest(dest / "src") == tree_digest(src)


def test_no_token_in_argv_of_the_running_receiver_and_sender(tmp_path):
    """ps shows every process's argv to every user: read it while both sides run."""
    tf = token_file(tmp_path)
    port = free_port()
    rx = start_receiver(["--stdout", port, "--bind", "127.0.0.1", "--token-file", tf])
    try:
        line = rx.stderr.readline().decode().strip()  # in pipe mode the line goes to stderr
        assert line.startswith("sluice://") and SECRET not in line, line
        tx = subprocess.Popen([SLUICE, "send", "-", f"sluice://127.0.0.1:{port}/"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_with(SLUICE_TOKEN=SECRET))
        try:
            # The sender blocks on its standard input until it is closed: both are running now.
            # (Popen returns when exec closes its pipe, a moment before the kernel sets the new
            # argv: wait for it to show.)
            for pid in (rx.pid, tx.pid):
                assert wait_for(lambda: cmdline(pid) != b"", timeout=30)
                argv = cmdline(pid)
                assert argv.startswith(SLUICE.encode()), argv
                assert SECRET.encode() not in argv, argv
            _, terr = tx.communicate(input=b"payload through the pipe\n", timeout=120)
            assert tx.returncode == 0, terr
        finally:
            tx.kill()
            tx.wait()
        out, err = rx.communicate(timeout=120)
        assert rx.returncode == 0, err
        assert out == b"payload through the pipe\n"
    finally:
        rx.kill()
        rx.wait()


def test_the_url_file_is_0600_complete_and_the_printed_line_has_no_token(tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    src = small_tree(tmp_path / "src")
    url_file = tmp_path / "url"
    old_umask = os.umask(0)  # the file must be 0600 whatever the umask
    try:
        rx = start_receiver(["--bind", "127.0.0.1", "--host", "127.0.0.1", "--url-file", url_file, dest])
    finally:
        os.umask(old_umask)
    try:
        line = rx.stdout.readline().decode().strip()
        assert "token" not in line, line  # a random token: it goes to the file only
        st = os.lstat(url_file)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
        assert st.st_uid == os.geteuid()
        url = url_file.read_text()
        assert url.endswith("\n") and url.strip().startswith(line + "?token="), (url, line)
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith("url")] == ["url"]  # no temporary left
        sent = run_sluice("send", src, url.strip())
        assert sent.returncode == 0, sent.stderr
        _, err = rx.communicate(timeout=120)
        assert rx.returncode == 0, err
    finally:
        rx.kill()
        rx.wait()


@pytest.mark.parametrize("planted", ["symlink", "dangling symlink", "file"])
def test_the_url_file_never_follows_or_replaces_what_is_planted_there(tmp_path, planted):
    dest = tmp_path / "dest"
    dest.mkdir()
    victim = tmp_path / "victim"
    url_file = tmp_path / "url"
    if planted == "symlink":
        victim.write_text("root-only content\n")
        os.symlink(victim, url_file)
    elif planted == "dangling symlink":
        os.symlink(victim, url_file)  # would create victim if followed
    else:
        url_file.write_text("planted\n")
    r = run_sluice("recv", dest, "--bind", "127.0.0.1", "--url-file", url_file, timeout=60)
    assert r.returncode == 2 and "--url-file" in r.stderr and "already exists" in r.stderr, r.stderr
    assert "token=" not in r.stdout
    if planted == "symlink":
        assert victim.read_text() == "root-only content\n"
    elif planted == "dangling symlink":
        assert not victim.exists()
    else:
        assert url_file.read_text() == "planted\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("url")] == ["url"]


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620])
def test_a_token_file_others_can_read_or_change_is_refused(tmp_path, mode):
    tf = token_file(tmp_path, mode=mode)
    for cmd in (["recv", tmp_path], ["send", tmp_path / "token", "sluice://127.0.0.1:1/"]):
        r = run_sluice(*cmd, "--token-file", tf, timeout=60)
        assert r.returncode == 2, r.stderr
        assert "--token-file" in r.stderr and f"{mode:04o}" in r.stderr and "chmod 600" in r.stderr, r.stderr
        assert SECRET not in r.stderr + r.stdout


def test_bad_token_files_and_disagreeing_tokens_are_named(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    empty = token_file(tmp_path, "", name="empty")
    two = token_file(tmp_path, "a\nb", name="two")
    tf = token_file(tmp_path)
    cases = [
        (["send", f, "sluice://127.0.0.1:1/", "--token-file", tmp_path / "missing"], "No such file"),
        (["send", f, "sluice://127.0.0.1:1/", "--token-file", empty], "is empty"),
        (["send", f, "sluice://127.0.0.1:1/", "--token-file", two], "more than one line"),
        (["send", f, "sluice://127.0.0.1:1/?token=other", "--token-file", tf], "differs from the one in the URL"),
        (["send", f, "sluice://127.0.0.1:1/?token=other", "--token", "third"], "differs from the one in the URL"),
        (["send", f, "sluice://127.0.0.1:1/", "--token", "x", "--token-file", tf], "not both"),
        (["recv", tmp_path, "--token", "x", "--token-file", tf], "not both"),
        (["recv", "--stdout", "sluice://127.0.0.1:9/?token=other", "--token-file", tf], "differs from the one in the URL"),
        (["send", f, "sluice://127.0.0.1:1/"], "no token"),
    ]
    for args, expect in cases:
        r = run_sluice(*args, timeout=60, env=env_with())
        assert r.returncode == 2 and expect in r.stderr, (args, r.stderr)
        assert SECRET not in r.stderr


def test_the_command_line_wins_over_sluice_token(tmp_path, receiver_factory):
    """SLUICE_TOKEN is only a default: a URL that carries a token is used as given."""
    f = tmp_path / "f"
    f.write_text("payload")
    dest = tmp_path / "dest"
    dest.mkdir()
    rx = receiver_factory(dest)
    sent = run_sluice("send", f, rx.url, env=env_with(SLUICE_TOKEN="stale"))
    assert sent.returncode == 0, sent.stderr
    assert rx.wait()[0] == 0


@pytest.mark.parametrize("url,part", [
    ("sluice://user@127.0.0.1:{port}/?token=t", "user info"),
    ("sluice://127.0.0.1:{port}/?token=t#frag", "#fragment"),
    ("sluice://127.0.0.1:{port}/?token=t&streams=2", "unknown parameter 'streams'"),
    ("sluice://::1:{port}/?token=t", "in brackets"),
])
def test_urls_sluice_does_not_understand_are_refused_naming_the_part(tmp_path, url, part):
    f = tmp_path / "f"
    f.write_text("x")
    r = run_sluice("send", f, url.format(port=free_port()), timeout=60)
    assert r.returncode == 2 and part in r.stderr, r.stderr


def test_an_ipv6_literal_in_brackets_still_works(tmp_path):
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback")
    f = tmp_path / "f"
    f.write_text("over IPv6")
    dest = tmp_path / "dest"
    dest.mkdir()
    tf = token_file(tmp_path)
    rx = start_receiver(["--bind", "::1", "--host", "::1", "--token-file", tf, dest])
    try:
        line = rx.stdout.readline().decode().strip()
        assert line.startswith("sluice://[::1]:") and line.endswith("/"), line
        sent = run_sluice("send", f, line + f"?token={SECRET}")
        assert sent.returncode == 0, sent.stderr
        _, err = rx.communicate(timeout=120)
        assert rx.returncode == 0, err
    finally:
        rx.kill()
        rx.wait()
    assert (dest / "f").read_text() == "over IPv6"
