"""Certificate mode on `sluice serve`'s sluice port and in `sluice get` (issue 18, h18o).

`serve --cert/--key --port` authenticates the sluice port with the HTTPS certificate; `get --ca`
or `--pin` runs a TLS 1.3 handshake that verifies it on the request connection before the
request (and the transfer's one-time token in it) is sent. Certificates are made here with
openssl at run time (never committed). What must hold: a public server (no token: the
certificate is all that authenticates it) and a token server are verified by CA and by pin and
serve the file whole, encrypted; a wrong CA, a wrong pin, a server revoked by --crl and a
server without a certificate are refused with exit 3 naming what did not match, nothing is
written, and no request reaches the server (no fallback to a request in clear); with
`serve --ca` a client without a certificate, or with a revoked one, is refused (exit 3) and one
with a good certificate is served; bad combinations are usage errors (exit 2)."""
import json

import pytest

from certs import client_server_pki, crls_of, pin_of, serial_of, signed
from conftest import file_hash, run_sluice, write_random
from serve_client import Server


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    out = client_server_pki(d)
    out["revoked"], out["revoked_key"] = signed(d, "revokedserver", "ca")
    out["bad_client"], out["bad_client_key"] = signed(d, "revokedclient", "ca")
    out["crl_none"], out["crl"] = crls_of(d, "ca", ["revokedserver", "revokedclient"])
    return out


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "www"
    r.mkdir()
    write_random(r / "big.bin", 12 << 20, 5)
    (r / "t").mkdir()
    for i in range(5):
        (r / "t" / f"f{i}").write_bytes(bytes([i]) * (1000 * i + 1))
    return r


def get(server, path, dest, *args, token=None):
    url = server.sluice_base + path + (f"?token={token}" if token else "")
    dest.mkdir(exist_ok=True)
    return run_sluice("get", url, dest, "--json", *args)


def stats(out):
    return json.loads(out.strip().splitlines()[-1])


def serve(root, pki, *args, public=True, cert="server"):
    return Server(root, "--port", "0", "--cert", pki[cert], "--key", pki[f"{cert}_key"], "--json", *args,
                  token=None if public else "testtoken", public=public)


def server_stats(s):
    rc, out, err = s.stop()
    assert rc == 0, err
    return stats(out), err


def test_a_public_server_verified_by_ca_and_by_pin(tmp_path, root, pki):
    s = serve(root, pki, "-v")
    try:
        r = get(s, "big.bin", tmp_path / "a", "--ca", pki["ca"], "-v")
        assert r.returncode == 0, r.stderr
        assert file_hash(tmp_path / "a" / "big.bin") == file_hash(root / "big.bin")
        st = stats(r.stdout)
        assert st["encryption"].startswith("tls13-"), st  # on loopback too: certificates turn it on
        assert "certificate verified (--ca" in r.stderr and pin_of(pki["server"]) in r.stderr, r.stderr
        r = get(s, "t", tmp_path / "b", "--pin", pin_of(pki["server"]), "--streams", "2")
        assert r.returncode == 0, r.stderr
        for i in range(5):
            assert (tmp_path / "b" / "t" / f"f{i}").read_bytes() == (root / "t" / f"f{i}").read_bytes()
        # A client that does not verify is still served (its choice), and told it could.
        r = get(s, "big.bin", tmp_path / "c", "-v")
        assert r.returncode == 0, r.stderr
        assert "has a certificate on its sluice port" in r.stderr, r.stderr
    finally:
        st, err = server_stats(s)
    assert st["get_sessions_certificate"] == 2 and st["get_certificate_failed"] == 0, st
    assert "certificate mode (the request's TLS handshake" in err, err


def test_a_wrong_ca_or_pin_is_refused_naming_what_did_not_match(tmp_path, root, pki):
    s = serve(root, pki)
    try:
        r = get(s, "big.bin", tmp_path / "a", "--ca", pki["other_ca"])
        assert r.returncode == 3, r.stderr
        assert "/CN=server" in r.stderr and f"did not verify against --ca {pki['other_ca']}" in r.stderr, r.stderr
        r = get(s, "big.bin", tmp_path / "b", "--pin", pin_of(pki["client"]))
        assert r.returncode == 3, r.stderr
        assert "matches no --pin" in r.stderr and pin_of(pki["server"]) in r.stderr, r.stderr
        for d in ("a", "b"):
            assert list((tmp_path / d).iterdir()) == []
        # The server is unharmed: the next client is served.
        r = get(s, "big.bin", tmp_path / "c", "--ca", pki["ca"])
        assert r.returncode == 0, r.stderr
    finally:
        st, _ = server_stats(s)
    # The refused handshakes never became requests: only the good one was sent.
    assert st["get_certificate_failed"] == 2 and st["get_sessions_certificate"] == 3, st
    assert st["get_sessions_ring"] == 1 and st["get_sessions_thread"] == 0, st  # on the ring since h15t


def test_a_revoked_server_is_refused_by_crl(tmp_path, root, pki):
    s = serve(root, pki, cert="revoked")
    try:
        r = get(s, "big.bin", tmp_path / "a", "--ca", pki["ca"], "--crl", pki["crl"])
        assert r.returncode == 3, r.stderr
        want = f"(/CN=revokedserver, serial {serial_of(pki['revoked'])}) is revoked by --crl {pki['crl']}"
        assert want in r.stderr, r.stderr
        assert list((tmp_path / "a").iterdir()) == []
        r = get(s, "big.bin", tmp_path / "b", "--ca", pki["ca"], "--crl", pki["crl_none"])
        assert r.returncode == 0, r.stderr
    finally:
        s.kill()


def test_a_server_without_a_certificate_is_refused(tmp_path, root, pki):
    s = Server(root, "--port", "0", token=None, public=True)
    try:
        r = get(s, "big.bin", tmp_path / "a", "--pin", pin_of(pki["server"]))
        assert r.returncode == 3, r.stderr
        assert "has no certificate on its sluice port" in r.stderr, r.stderr
        assert list((tmp_path / "a").iterdir()) == []
    finally:
        rc, out, err = s.stop()
    assert rc == 0, err


def test_a_token_server_with_a_certificate(tmp_path, root, pki):
    s = serve(root, pki, public=False)
    try:
        r = get(s, "big.bin", tmp_path / "a", "--ca", pki["ca"], token="testtoken")
        assert r.returncode == 0, r.stderr
        assert file_hash(tmp_path / "a" / "big.bin") == file_hash(root / "big.bin")
        r = get(s, "big.bin", tmp_path / "b", "--ca", pki["ca"], token="wrong")
        assert r.returncode == 3 and "wrong token" in r.stderr, r.stderr
        assert list((tmp_path / "b").iterdir()) == []
        r = get(s, "big.bin", tmp_path / "c", "--ca", pki["ca"])
        assert r.returncode == 2 and "requires a token" in r.stderr, r.stderr
    finally:
        s.kill()


def test_a_server_that_requires_client_certificates(tmp_path, root, pki):
    s = serve(root, pki, "--ca", pki["ca"], "--crl", pki["crl"])
    try:
        r = get(s, "big.bin", tmp_path / "a", "--ca", pki["ca"], "--cert", pki["client"], "--key", pki["client_key"])
        assert r.returncode == 0, r.stderr
        assert file_hash(tmp_path / "a" / "big.bin") == file_hash(root / "big.bin")
        # Verifying the server but showing no certificate.
        r = get(s, "big.bin", tmp_path / "b", "--ca", pki["ca"])
        assert r.returncode == 3 and "requires a certificate from this side" in r.stderr, r.stderr
        # In clear, without certificates at all: refused in the reply, as an auth error.
        r = get(s, "big.bin", tmp_path / "c")
        assert r.returncode == 3 and "a client certificate is required" in r.stderr, r.stderr
        # A revoked client certificate (the server's --crl lists it).
        r = get(s, "big.bin", tmp_path / "d", "--ca", pki["ca"], "--cert", pki["bad_client"], "--key",
                pki["bad_client_key"])
        assert r.returncode == 3 and "as revoked" in r.stderr, r.stderr
        for d in "bcd":
            assert list((tmp_path / d).iterdir()) == []
    finally:
        s.kill()


def test_bad_combinations_are_usage_errors(tmp_path, root, pki):
    s = serve(root, pki)
    try:
        r = get(s, "big.bin", tmp_path / "a", "--cert", pki["client"], "--key", pki["client_key"])
        assert r.returncode == 2 and "needs --ca FILE or --pin" in r.stderr, r.stderr
        r = get(s, "big.bin", tmp_path / "a", "--ca", pki["ca"], "--no-encrypt")
        assert r.returncode == 2 and "drop --no-encrypt" in r.stderr, r.stderr
        r = get(s, "big.bin", tmp_path / "a", "--pin", "sha256:xyz")
        assert r.returncode == 2 and "--pin 'sha256:xyz'" in r.stderr, r.stderr
        assert list((tmp_path / "a").iterdir()) == []
    finally:
        s.kill()
    r = run_sluice("serve", root, "--public", "--ca", pki["ca"], "--cert", pki["server"], "--key", pki["server_key"])
    assert r.returncode == 2 and "they need --port" in r.stderr, r.stderr
