"""encrypt= from Python (issue 18): a tree sent with encrypt=True on loopback arrives byte for
byte under TLS 1.3 with the data streams sealing their own records; pipe mode goes through
relays; one side without encryption is refused with AuthError; a bad value is a UsageError."""
import os

import pytest

from conftest import Served, assert_same_tree, local_receiver

import sluice


# The direct path opens records into its O_DIRECT buffers (tls_direct); any other path asked
# opens them where recv_write parses them (tls_records).
@pytest.mark.parametrize("recv_path,opened_by", [("direct", "tls_direct"), ("recv_write", "tls_records")])
def test_tree_encrypted_on_request(tree, dst, recv_path, opened_by):
    rx = local_receiver(dst, encrypt=True, recv_path=recv_path)
    served = Served(rx)
    sent = sluice.send([tree], rx.url, streams=2, block_size="1M", encrypt=True)
    got = served.join()
    assert_same_tree(tree, dst / "src")
    for s in (sent, got):
        assert s["encryption"] in ("tls13-user", "tls13-ktls")
        assert s["encryption_streams"] in ("records", "ktls")
    if sent["encryption"] == "tls13-user":
        assert sent["send_path"] == "tls_records" and got["recv_path"] == opened_by


def test_loopback_is_clear_by_default(tree, dst):
    rx = local_receiver(dst)
    served = Served(rx)
    sent = sluice.send([tree], rx.url)
    served.join()
    assert sent["encryption"] == "off" and sent["encryption_streams"] == ""


def test_pipe_mode_encrypted_through_relays(tmp_path):
    data = os.urandom(3 << 20)
    src = tmp_path / "in"
    src.write_bytes(data)
    with open(tmp_path / "out", "wb") as f:
        rx = local_receiver(None, fd=f, encrypt=True)
        served = Served(rx)
        with open(src, "rb") as r:
            sent = sluice.send_pipe(r, rx.url, streams=2, block_size="1M", encrypt=True)
        served.join()
    assert (tmp_path / "out").read_bytes() == data
    assert sent["encryption_streams"] in ("relay", "ktls")


def test_one_side_without_encryption_is_refused(tree, dst):
    rx = local_receiver(dst, encrypt=False)
    served = Served(rx)
    with pytest.raises(sluice.AuthError, match="encrypt"):
        sluice.send([tree], rx.url, encrypt=True, connect_timeout=5, idle_timeout=5)
    rx.cancel()
    with pytest.raises(sluice.Error):
        served.join()


def test_bad_value(tree, dst):
    with pytest.raises(sluice.UsageError, match="encrypt="):
        local_receiver(dst, encrypt="yes")
    with pytest.raises(sluice.UsageError, match="encrypt="):
        sluice.send([tree], "sluice://127.0.0.1:1/?token=x", encrypt=1)
