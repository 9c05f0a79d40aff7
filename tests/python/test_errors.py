"""Bad input raises the sluice.Error subclass for its code, with a message naming the value,
path or host and the reason."""
import socket
import threading

import pytest
from conftest import Served, local_receiver

import sluice


def test_bad_url_is_a_usage_error(tree):
    with pytest.raises(sluice.UsageError) as e:
        sluice.send([tree], "sluice://127.0.0.1/?token=x")
    assert e.value.code == "usage"
    assert "sluice://127.0.0.1/?token=..." in str(e.value) and "PORT" in str(e.value)  # the token is left out
    assert isinstance(e.value, sluice.Error) and isinstance(e.value, ValueError)


def test_bad_options_are_usage_errors(tree):
    url = "sluice://127.0.0.1:9/?token=x"
    with pytest.raises(sluice.UsageError, match="streams"):
        sluice.send([tree], url, streams=0)
    with pytest.raises(sluice.UsageError, match="block_size.*12Q"):
        sluice.send([tree], url, block_size="12Q")
    with pytest.raises(sluice.UsageError, match="send-path 'zerocopy'"):
        sluice.send([tree], url, send_path="zerocopy")
    with pytest.raises(sluice.UsageError, match="port=70000"):
        sluice.Receiver("/tmp", port=70000)


def test_missing_path_is_a_source_error(tmp_path, dst):
    missing = tmp_path / "no-such-file"
    rx = local_receiver(dst)
    with pytest.raises(sluice.SourceError) as e:
        sluice.send([missing], rx.url)
    assert e.value.code == "source"
    assert str(missing) in str(e.value) and "No such file" in str(e.value)


def test_wrong_token_is_an_auth_error_and_the_receiver_keeps_waiting(tree, dst):
    rx = local_receiver(dst)
    served = Served(rx)
    with pytest.raises(sluice.AuthError) as e:
        sluice.send([tree], rx.url, token="not-the-token")
    assert e.value.code == "auth"
    assert served.thread.is_alive()  # a refused sender does not end wait()
    rx.cancel()
    with pytest.raises(sluice.Cancelled):
        served.join()


def test_nobody_listening_is_a_network_error_naming_the_host(tree):
    with socket.socket() as s:  # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(sluice.NetworkError) as e:
        sluice.send([tree], f"sluice://127.0.0.1:{port}/?token=abc", connect_timeout=2)
    assert f"127.0.0.1:{port}" in str(e.value) and "refused" in str(e.value)


def test_receiver_on_a_missing_dir_is_a_destination_error(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(sluice.DestinationError) as e:
        sluice.Receiver(missing)
    assert str(missing) in str(e.value)


def _silent_server(close_at_once):
    """A listener that accepts one connection and closes it, or holds it without a word."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    held = []

    def serve():
        conn, _ = srv.accept()
        if close_at_once:
            conn.close()
        else:
            held.append(conn)

    threading.Thread(target=serve, daemon=True).start()
    return srv, held


@pytest.mark.parametrize("close_at_once,cause", [(True, "peer_closed"), (False, "timed_out")])
def test_a_peer_that_hangs_up_or_goes_silent_says_so_in_cause(tree, close_at_once, cause):
    srv, held = _silent_server(close_at_once)
    port = srv.getsockname()[1]
    try:
        with pytest.raises(sluice.NetworkError) as e:
            sluice.send([tree], f"sluice://127.0.0.1:{port}/?token=abc", idle_timeout=0.3)
        assert e.value.cause == cause, str(e.value)
        assert f"127.0.0.1:{port}" in str(e.value)
    finally:
        srv.close()
        for c in held:
            c.close()


def test_most_errors_have_no_cause(tmp_path):
    with pytest.raises(sluice.DestinationError) as e:
        sluice.Receiver(tmp_path / "nope")
    assert e.value.cause == "none"


def test_errors_raised_in_python_have_a_cause_too():
    # A bad argument is refused before the library runs; code that reads .cause must not fail.
    with pytest.raises(sluice.UsageError) as e:
        sluice.send(["x"], "sluice://127.0.0.1:1/?token=t", streams="4")
    assert e.value.cause == "none"
