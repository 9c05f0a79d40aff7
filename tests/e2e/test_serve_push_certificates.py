"""Pushes into `sluice serve` in certificate mode (issue 15, h15o): `sluice send --ca/--pin` to a
serve with --cert/--key runs a TLS 1.3 handshake that verifies the server on the request
connection before PUSH_REQUEST (and the one-time token that keys the transfer) is sent; the
transfer is then encrypted with PSK handshakes keyed by the token bound inside that session.
The token still authorizes the write (a client certificate does not: one that may read may
not write). With serve --ca/--pin the client must show a certificate, as for gets. Refused,
nothing written: a wrong pin, a server without a certificate, a client without a certificate
where one is required, a push in clear to such a server, a wrong token, a server without
--allow-upload. Certificates are made with openssl at run time."""
import json
import ssl
import urllib.request

import pytest

from certs import client_server_pki, pin_of
from conftest import run_sluice, tree_digest, write_random
from serve_client import Server

TOKEN = "testtoken"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return client_server_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def src(tmp_path):
    s = tmp_path / "src" / "tree"
    (s / "sub").mkdir(parents=True)
    write_random(s / "big.bin", 10 << 20, 7)
    for i in range(6):
        (s / "sub" / f"f{i}").write_bytes(bytes([i]) * (700 * i + 1))
    return s


def serve(root, pki, *args):
    root.mkdir(exist_ok=True)
    return Server(root, "--port", "0", "--cert", pki["server"], "--key", pki["server_key"], *args)


def push(server, src, *args, token=TOKEN):
    return run_sluice("send", src, server.sluice_base + f"?token={token}", "--json", *args, timeout=300)


def refused(server, src, *args, says, token=TOKEN):
    """A push refused with exit 3 (auth), its stderr saying `says`."""
    r = push(server, src, *args, token=token)
    assert r.returncode == 3 and says in r.stderr, r.stderr


def serve_stats(server):
    """/_stats over the server's HTTPS (its certificate is the test CA's: not checked here)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return json.loads(urllib.request.urlopen(server.url("/_stats"), timeout=30, context=ctx).read())


@pytest.mark.parametrize("verify", ["ca", "pin"])
def test_a_push_verifies_the_server_and_lands_encrypted(tmp_path, pki, src, verify):
    served = tmp_path / "served"
    s = serve(served, pki, "--allow-upload", "-v")
    try:
        how = ("--ca", pki["ca"]) if verify == "ca" else ("--pin", pin_of(pki["server"]))
        r = push(s, src, *how, "-v")
        assert r.returncode == 0, r.stderr
        assert tree_digest(served / "tree") == tree_digest(src)
        assert "certificate verified" in r.stderr and "the push request is TLS 1.3" in r.stderr
        sent = json.loads(r.stdout.splitlines()[-1])
        assert sent["encryption"] != "off", sent["encryption"]
        assert sent["tls_mode"] == "certificate-request" and sent["peer_certificate"] == pin_of(pki["server"])
        st = serve_stats(s)
        assert st["pushes"] == 1 and st["pushes_done"] == 1 and st["pushes_certificate"] == 1
        assert st["get_sessions"] == 0 and st["get_sessions_certificate"] == 0  # a push, not a get
    finally:
        s.kill()


def test_mutual_tls_a_client_certificate_is_required_and_the_token_still_is(tmp_path, pki, src):
    served = tmp_path / "served"
    s = serve(served, pki, "--allow-upload", "--ca", pki["ca"])
    try:
        # Without a certificate: refused in the handshake, nothing written.
        refused(s, src, "--ca", pki["ca"], says="requires a certificate from this side")
        # In clear (no --ca/--pin: token mode): refused as certificate_required.
        refused(s, src, says="client certificate is required: this server verifies its clients")
        # A certificate from a CA the server does not trust: refused.
        refused(s, src, "--ca", pki["ca"], "--cert", pki["stranger"], "--key", pki["stranger_key"], says="refused")
        # A good certificate with a wrong token: refused (the certificate does not authorize writes).
        refused(s, src, "--ca", pki["ca"], "--cert", pki["client"], "--key", pki["client_key"], says="wrong token",
                token="wrong")
        assert not (served / "tree").exists()
        # Certificate and token: stored.
        r = push(s, src, "--ca", pki["ca"], "--cert", pki["client"], "--key", pki["client_key"])
        assert r.returncode == 0, r.stderr
        assert tree_digest(served / "tree") == tree_digest(src)
        assert serve_stats(s)["pushes_done"] == 1
    finally:
        s.kill()


def test_refusals_write_nothing(tmp_path, pki, src):
    served = tmp_path / "served"
    # No --allow-upload: refused inside the session with the reason.
    s = serve(served, pki)
    try:
        refused(s, src, "--ca", pki["ca"], says="without --allow-upload")
    finally:
        s.kill()
    s = serve(served, pki, "--allow-upload")
    try:
        # A wrong pin (the message names the server's), a CA the server does not chain to:
        # refused in the handshake, before any request.
        refused(s, src, "--pin", "sha256:" + "00" * 32, says=pin_of(pki["server"]))
        refused(s, src, "--ca", pki["other_ca"], says="certificate")
        assert serve_stats(s)["pushes"] == 0  # no request reached the server
    finally:
        s.kill()
    assert list(served.iterdir()) == []
    # A server without a certificate: no request is sent unauthenticated.
    plain = Server(served, "--port", "0", "--allow-upload")
    try:
        refused(plain, src, "--ca", pki["ca"], says="has no certificate on its sluice port")
    finally:
        plain.kill()
    assert list(served.iterdir()) == []
