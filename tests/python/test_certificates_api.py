"""cert=, key=, ca=, pin= from Python (issue 18, certificate mode): a receiver with a
certificate made here by openssl at run time, a sender pinning its key; a wrong pin raises
AuthError naming the pin it found; a bad pin value is a UsageError before any connection."""
import subprocess

import pytest

from conftest import Served, assert_same_tree, local_receiver

import sluice


@pytest.fixture
def cert(tmp_path):
    """A self-signed certificate and key, and the pin of its key (sha256:HEX of its SPKI)."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", "k.pem", "-out", "c.pem", "-days", "2", "-subj", "/CN=rx"],
                   cwd=tmp_path, check=True, capture_output=True, timeout=60)
    digest = subprocess.run("openssl x509 -in c.pem -pubkey -noout | openssl pkey -pubin -outform der | sha256sum",
                            shell=True, cwd=tmp_path, check=True, capture_output=True, text=True, timeout=60)
    return tmp_path / "c.pem", tmp_path / "k.pem", "sha256:" + digest.stdout.split()[0]


def test_a_pinned_receiver(tree, dst, cert):
    c, k, pin = cert
    rx = local_receiver(dst, cert=c, key=k)
    served = Served(rx)
    sent = sluice.send([tree], rx.url, streams=2, pin=pin)
    got = served.join()
    assert_same_tree(tree, dst / "src")
    assert sent["tls_mode"] == "certificate" and got["tls_mode"] == "certificate"
    assert sent["tls_full_handshakes"] == 1 and sent["tls_resumed_handshakes"] == 2
    assert sent["peer_certificate"] == pin


def test_a_wrong_pin_raises_auth_error(tree, dst, cert):
    c, k, pin = cert
    rx = local_receiver(dst, cert=c, key=k)
    served = Served(rx)
    other = "sha256:" + ("0" * 64)
    with pytest.raises(sluice.AuthError, match="matches no --pin"):
        sluice.send([tree], rx.url, pin=[other], connect_timeout=5, idle_timeout=5)
    with pytest.raises(sluice.AuthError):
        served.join()


def test_bad_values_are_usage_errors(tree, cert):
    with pytest.raises(sluice.UsageError, match="pin"):
        sluice.send([tree], "sluice://127.0.0.1:9/?token=t", pin=[1])
    with pytest.raises(sluice.UsageError, match="--pin 'md5:00'"):
        sluice.send([tree], "sluice://127.0.0.1:9/?token=t", pin="md5:00")
    with pytest.raises(sluice.UsageError, match="needs --cert FILE and --key FILE"):
        sluice.Receiver(tree, ca=cert[0])
