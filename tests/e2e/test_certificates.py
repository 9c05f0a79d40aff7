"""Certificate mode (issue 18): TLS 1.3 with X.509 on the control connection, the data streams
resumed from its session; the token still authorizes the transfer.

Certificates are made here with openssl at run time (never committed). What must hold: a pinned
or CA-verified receiver is accepted and every data stream runs a resumed (PSK) handshake, not a
full one; a wrong pin, an unknown CA, an expired certificate, a missing sender certificate and a
peer in the other mode are refused as auth errors (exit 3) naming what to change; a key that is
not the certificate's and an unreadable file are usage errors (exit 2) naming the file.
--crl (CRLs made by `openssl ca` here): a revoked receiver or sender is refused (exit 3) by the
side holding the CRL, naming its subject, serial and the CRL file, and the other side says it
was refused as revoked; a chain whose CA has no CRL in the file is refused (fail closed); a
CRL file that is missing, not a CRL, expired or not signed by its CA is a usage error."""
import json
import subprocess

import pytest

import sluice_wire as w
from certs import ca_db, crls_of, gencrl, new_key_and_csr, openssl, pin_of, self_signed, serial_of, signed
from conftest import SLUICE, run_sluice, write_random


def mkd(p):
    p.mkdir(exist_ok=True)
    return p


def stats(out):
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    out = {}
    out["ca"], out["ca_key"] = self_signed(d, "ca")
    out["other_ca"], _ = self_signed(d, "otherca")
    out["recv"], out["recv_key"] = signed(d, "recv", "ca")
    out["expired"], out["expired_key"] = signed(d, "expired", "ca", days=-1)
    out["wrong_name"], out["wrong_name_key"] = signed(d, "wrongname", "ca", san="DNS:elsewhere.invalid")
    out["self"], out["self_key"] = self_signed(d, "self")
    out["sender"], out["sender_key"] = self_signed(d, "sender")
    return out


def tree(tmp_path):
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    write_random(src / "big.bin", 6 << 20, 7)
    for i in range(20):
        (src / "d" / f"f{i}").write_bytes(bytes([i]) * (300 * i))
    return src


def assert_copied(src, dst):
    for p in src.rglob("*"):
        if p.is_file():
            assert (dst / p.relative_to(src)).read_bytes() == p.read_bytes()


def test_a_pinned_receiver_and_resumed_data_streams(tmp_path, receiver_factory, pki):
    src = tree(tmp_path)
    rx = receiver_factory(mkd(tmp_path / "dst"), "--cert", pki["self"], "--key", pki["self_key"], "-v")
    r = run_sluice("send", src, rx.url, "--pin", pin_of(pki["self"]), "--streams", "3", "--json", "-v")
    assert r.returncode == 0, r.stderr
    rc, out, err = rx.wait()
    assert rc == 0, err
    s, t = stats(r.stdout), stats(out)
    # Encrypted though on loopback: certificates turn encryption on.
    assert s["encryption"].startswith("tls13-") and s["tls_mode"] == "certificate" and t["tls_mode"] == "certificate"
    for x in (s, t):
        assert x["tls_full_handshakes"] == 1, x
        assert x["tls_resumed_handshakes"] == 3, x
        assert x["tls_psk_handshakes"] == 0, x
    assert s["peer_certificate"] == pin_of(pki["self"])
    assert t["peer_certificate"] == ""  # the receiver did not ask the sender for one
    assert pin_of(pki["self"]) in err  # -v: the receiver says the pin to give
    assert "1 full handshake" in r.stderr and "3 resumed" in r.stderr
    # Both sides know CERTIFICATE_ACCEPTED: the sender waited for it, so -v has no warning.
    assert "predates CERTIFICATE_ACCEPTED" not in r.stderr
    assert_copied(src, tmp_path / "dst" / "src")


def test_the_receiver_offers_the_certificate_verdict(tmp_path, receiver_factory, pki):
    """Hello feature bit 6 negotiates CERTIFICATE_ACCEPTED: a receiver offers it, so a sender
    from before it (which never sets the bit) is never sent a frame it does not know."""
    rx = receiver_factory(mkd(tmp_path / "dst"), "--cert", pki["self"], "--key", pki["self_key"])
    assert w.server_features("127.0.0.1", rx.port) & w.FEATURE_CERTIFICATE_VERDICT


def test_the_token_mode_counts_psk_handshakes(tmp_path, receiver_factory):
    (tmp_path / "a").write_bytes(b"x" * 5000)
    rx = receiver_factory(mkd(tmp_path / "dst"), "--encrypt")
    r = run_sluice("send", tmp_path / "a", rx.url, "--encrypt", "--streams", "2", "--json")
    assert r.returncode == 0, r.stderr
    s = stats(r.stdout)
    assert s["tls_mode"] == "psk" and s["tls_psk_handshakes"] == 3 and s["tls_full_handshakes"] == 0
    assert rx.wait()[0] == 0


def test_a_wrong_pin_is_refused(tmp_path, receiver_factory, pki):
    (tmp_path / "a").write_bytes(b"secret" * 100)
    rx = receiver_factory(mkd(tmp_path / "dst"), "--cert", pki["self"], "--key", pki["self_key"])
    r = run_sluice("send", tmp_path / "a", rx.url, "--pin", pin_of(pki["sender"]))
    assert r.returncode == 3, r.stderr
    assert "matches no --pin" in r.stderr and pin_of(pki["self"]) in r.stderr and "127.0.0.1" in r.stderr
    rc, _, err = rx.wait()
    assert rc == 3 and "refused this side's certificate" in err
    assert not (tmp_path / "dst" / "a").exists()


def test_ca_mode_verifies_the_chain_and_the_host(tmp_path, receiver_factory, pki):
    src = tree(tmp_path)
    rx = receiver_factory(mkd(tmp_path / "dst"), "--cert", pki["recv"], "--key", pki["recv_key"])
    r = run_sluice("send", src, rx.url, "--ca", pki["ca"], "--json")
    assert r.returncode == 0, r.stderr
    assert stats(r.stdout)["tls_full_handshakes"] == 1
    assert rx.wait()[0] == 0
    assert_copied(src, tmp_path / "dst" / "src")


@pytest.mark.parametrize("cert,ca,why", [("recv", "other_ca", "unable to get local issuer certificate"),
                                         ("expired", "ca", "certificate has expired"),
                                         ("wrong_name", "ca", "mismatch")])
def test_ca_mode_refuses(tmp_path, receiver_factory, pki, cert, ca, why):
    (tmp_path / "a").write_bytes(b"x" * 100)
    rx = receiver_factory(mkd(tmp_path / "dst"), "--cert", pki[cert], "--key", pki[cert + "_key"])
    r = run_sluice("send", tmp_path / "a", rx.url, "--ca", pki[ca])
    assert r.returncode == 3, r.stderr
    assert "did not verify against --ca " + str(pki[ca]) in r.stderr and why in r.stderr
    assert rx.wait()[0] == 3


def test_mutual_tls_and_a_sender_without_a_certificate(tmp_path, receiver_factory, pki):
    (tmp_path / "a").write_bytes(b"x" * 100)
    rx = receiver_factory(mkd(tmp_path / "dst"), "--cert", pki["self"], "--key", pki["self_key"],
                          "--pin", pin_of(pki["sender"]))
    r = run_sluice("send", tmp_path / "a", rx.url, "--pin", pin_of(pki["self"]), "--cert", pki["sender"], "--key",
                   pki["sender_key"])
    assert r.returncode == 0, r.stderr
    rc, out, err = rx.wait()
    assert rc == 0 and stats(out)["peer_certificate"] == pin_of(pki["sender"])

    rx = receiver_factory(mkd(tmp_path / "dst2"), "--cert", pki["self"], "--key", pki["self_key"],
                          "--pin", pin_of(pki["sender"]))
    r = run_sluice("send", tmp_path / "a", rx.url, "--pin", pin_of(pki["self"]))
    assert r.returncode == 3, r.stderr
    assert "requires a certificate from this side" in r.stderr
    rc, _, err = rx.wait()
    assert rc == 3 and "sent no certificate" in err


def test_token_mode_against_certificate_mode_is_refused_both_ways(tmp_path, receiver_factory, pki):
    (tmp_path / "a").write_bytes(b"x" * 100)
    rx = receiver_factory(mkd(tmp_path / "dst"), "--cert", pki["self"], "--key", pki["self_key"])
    r = run_sluice("send", tmp_path / "a", rx.url, "--encrypt")
    assert r.returncode == 3, r.stderr
    assert "is in certificate mode" in r.stderr and "--pin" in r.stderr
    rc, _, err = rx.wait()
    assert rc == 3 and "uses the token's key alone" in err

    rx = receiver_factory(mkd(tmp_path / "dst2"), "--encrypt")
    r = run_sluice("send", tmp_path / "a", rx.url, "--pin", pin_of(pki["self"]))
    assert r.returncode == 3, r.stderr
    assert "is not in certificate mode" in r.stderr
    rc, _, err = rx.wait()
    assert rc == 3 and "is in certificate mode" in err and "this receiver is not" in err


def test_a_wrong_token_is_still_refused_in_certificate_mode(tmp_path, receiver_factory, pki):
    (tmp_path / "a").write_bytes(b"x" * 100)
    rx = receiver_factory(mkd(tmp_path / "dst"), "--cert", pki["self"], "--key", pki["self_key"], token="right")
    r = run_sluice("send", tmp_path / "a", rx.url.replace("right", "wrong"), "--pin", pin_of(pki["self"]))
    assert r.returncode == 3 and "refused the token" in r.stderr, r.stderr


def test_bad_files_are_usage_errors_naming_the_file(tmp_path, pki):
    r = run_sluice("recv", mkd(tmp_path / "d"), "--cert", pki["self"], "--key", pki["sender_key"], "--port", "0")
    assert r.returncode == 2, r.stderr
    assert f"--key {pki['sender_key']} is not the private key of --cert {pki['self']}" in r.stderr
    missing = tmp_path / "nope.pem"
    r = run_sluice("recv", tmp_path / "d", "--cert", missing, "--key", pki["self_key"], "--port", "0")
    assert r.returncode == 2 and f"--cert {missing}: cannot read it" in r.stderr, r.stderr
    r = run_sluice("send", tmp_path / "d", "sluice://127.0.0.1:9/?token=t", "--ca", missing)
    assert r.returncode == 2 and f"--ca {missing}: cannot read it" in r.stderr, r.stderr
    r = run_sluice("send", tmp_path / "d", "sluice://127.0.0.1:9/?token=t", "--pin", "sha256:abc")
    assert r.returncode == 2 and "--pin 'sha256:abc'" in r.stderr, r.stderr
    r = run_sluice("send", tmp_path / "d", "sluice://127.0.0.1:9/?token=t", "--cert", pki["sender"], "--key",
                   pki["sender_key"])
    assert r.returncode == 2 and "needs --ca FILE or --pin" in r.stderr, r.stderr
    r = run_sluice("send", tmp_path / "d", "sluice://127.0.0.1:9/?token=t", "--pin", pin_of(pki["self"]),
                   "--no-encrypt")
    assert r.returncode == 2 and "drop --no-encrypt" in r.stderr, r.stderr


def test_pipe_mode_in_certificate_mode(tmp_path, pki):
    """Pipe mode's connections go through relays: the same full and resumed handshakes."""
    data = bytes(range(256)) * 8192
    rx = subprocess.Popen([SLUICE, "recv", "--stdout", "--bind", "127.0.0.1", "--port", "0", "--token", "t", "--json",
                           "--cert", pki["self"], "--key", pki["self_key"]], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    try:
        url = rx.stderr.readline().decode().strip()
        assert url.startswith("sluice://"), rx.stderr.read()
        r = subprocess.run([SLUICE, "send", "-", url, "--pin", pin_of(pki["self"]), "--streams", "2", "--json"],
                           input=data, capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr
        out, err = rx.communicate(timeout=120)
        assert rx.returncode == 0, err
        assert out == data
        s = stats(r.stdout.decode())
        assert s["encryption_streams"] in ("relay", "ktls")
        assert (s["tls_full_handshakes"], s["tls_resumed_handshakes"]) == (1, 2)
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.communicate()


def big_tree(tmp_path):
    """Enough data that four data streams are busy when a refusal arrives, if they were opened."""
    src = tmp_path / "src"
    src.mkdir()
    write_random(src / "big.bin", 16 << 20, 11)
    return src


@pytest.mark.parametrize("check,why", [("pin", "matches no --pin"), ("ca", "did not verify against --ca")])
def test_the_receiver_refuses_the_senders_certificate(tmp_path, receiver_factory, pki, check, why):
    """In TLS 1.3 the receiver judges the sender's certificate after the sender's handshake has
    ended: the sender must wait for that verdict before its data streams start, and report the
    refusal (exit 3, the reason) instead of a data stream's end of file or the receiver gone."""
    src = big_tree(tmp_path)
    judge = ["--pin", pin_of(pki["self"])] if check == "pin" else ["--ca", pki["other_ca"]]
    rx = receiver_factory(mkd(tmp_path / "dst"), "--cert", pki["self"], "--key", pki["self_key"], *judge)
    r = run_sluice("send", src, rx.url, "--pin", pin_of(pki["self"]), "--cert", pki["sender"], "--key",
                   pki["sender_key"], "--streams", "4")
    rc, _, err = rx.wait()
    assert rc == 3, err
    assert why in err
    assert r.returncode == 3, r.stderr
    assert "refused this side's certificate" in r.stderr and "--pin or --ca" in r.stderr, r.stderr
    assert not (tmp_path / "dst" / "src" / "big.bin").exists()


def test_the_sender_refuses_the_receivers_certificate_in_mutual_tls(tmp_path, receiver_factory, pki):
    """The other direction, with both sides holding certificates: the sender's own check fails
    its handshake, and the receiver hears why from its alert."""
    src = big_tree(tmp_path)
    rx = receiver_factory(mkd(tmp_path / "dst"), "--cert", pki["self"], "--key", pki["self_key"],
                          "--pin", pin_of(pki["sender"]))
    r = run_sluice("send", src, rx.url, "--pin", pin_of(pki["sender"]), "--cert", pki["sender"], "--key",
                   pki["sender_key"], "--streams", "4")
    assert r.returncode == 3, r.stderr
    assert "matches no --pin" in r.stderr and pin_of(pki["self"]) in r.stderr, r.stderr
    rc, _, err = rx.wait()
    assert rc == 3, err
    assert "refused this side's certificate" in err
    assert not (tmp_path / "dst" / "src" / "big.bin").exists()


# --crl (h18j): certificate revocation lists made here by `openssl ca` at run time (certs.py).
@pytest.fixture(scope="module")
def crls(tmp_path_factory, pki):
    """CRLs of pki's CA: none revoked, two revoked (a receiver's and a sender's certificate
    made for it), one past its next update; one of another CA; one that names pki's CA as
    its issuer but is signed by another key."""
    d = pki["ca"].parent
    out = {}
    out["recv"], out["recv_key"] = signed(d, "revokedrecv", "ca")
    out["sender"], out["sender_key"] = signed(d, "revokedsender", "ca")
    out["good_sender"], out["good_sender_key"] = signed(d, "goodsender", "ca")
    out["none"], out["revoked"] = crls_of(d, "ca", ["revokedrecv", "revokedsender"])
    out["expired"] = gencrl(d, "crl-expired.pem", "-crl_lastupdate", "20200101000000Z", "-crl_nextupdate",
                            "20200102000000Z")
    o = tmp_path_factory.mktemp("otherpki")
    self_signed(o, "otherca")
    ca_db(o, "otherca")
    out["other"] = gencrl(o, "crl-other.pem")
    f = tmp_path_factory.mktemp("forgedpki")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
            "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=ca", cwd=f)  # pki's CA's name, another key
    ca_db(f, "ca")
    out["forged"] = gencrl(f, "crl-forged.pem")
    return out


def test_the_sender_refuses_a_revoked_receiver(tmp_path, receiver_factory, pki, crls):
    """A CRL that revokes nothing lets the receiver through; one revoking its certificate
    refuses it (exit 3) naming the certificate's subject and serial, and nothing is written."""
    src = tree(tmp_path)
    rx = receiver_factory(mkd(tmp_path / "dst"), "--cert", pki["recv"], "--key", pki["recv_key"])
    r = run_sluice("send", src, rx.url, "--ca", pki["ca"], "--crl", crls["revoked"])
    assert r.returncode == 0, r.stderr  # recv.pem is not on the list
    assert rx.wait()[0] == 0
    assert_copied(src, tmp_path / "dst" / "src")

    rx = receiver_factory(mkd(tmp_path / "dst2"), "--cert", crls["recv"], "--key", crls["recv_key"])
    r = run_sluice("send", src, rx.url, "--ca", pki["ca"], "--crl", crls["none"])
    assert r.returncode == 0, r.stderr  # not revoked yet when that CRL was made
    assert rx.wait()[0] == 0

    rx = receiver_factory(mkd(tmp_path / "dst3"), "--cert", crls["recv"], "--key", crls["recv_key"])
    r = run_sluice("send", src, rx.url, "--ca", pki["ca"], "--crl", crls["revoked"])
    assert r.returncode == 3, r.stderr
    assert f"(/CN=revokedrecv, serial {serial_of(crls['recv'])}) is revoked by --crl {crls['revoked']}" in r.stderr
    rc, _, err = rx.wait()
    assert rc == 3 and "a CRL of its --crl lists it" in err, err
    assert not (tmp_path / "dst3" / "src").exists()


def test_the_receiver_refuses_a_revoked_sender(tmp_path, receiver_factory, pki, crls):
    src = big_tree(tmp_path)
    judge = ["--cert", pki["recv"], "--key", pki["recv_key"], "--ca", pki["ca"], "--crl", crls["revoked"]]
    rx = receiver_factory(mkd(tmp_path / "dst"), *judge)
    r = run_sluice("send", src, rx.url, "--ca", pki["ca"], "--cert", crls["good_sender"], "--key",
                   crls["good_sender_key"])
    assert r.returncode == 0, r.stderr
    assert rx.wait()[0] == 0

    rx = receiver_factory(mkd(tmp_path / "dst2"), *judge)
    r = run_sluice("send", src, rx.url, "--ca", pki["ca"], "--cert", crls["sender"], "--key", crls["sender_key"],
                   "--streams", "4")
    rc, _, err = rx.wait()
    assert rc == 3, err
    assert f"(/CN=revokedsender, serial {serial_of(crls['sender'])}) is revoked by --crl {crls['revoked']}" in err
    assert r.returncode == 3, r.stderr
    assert "refused this side's certificate as revoked (a CRL of its --crl lists it)" in r.stderr, r.stderr
    assert not (tmp_path / "dst2" / "src" / "big.bin").exists()


def test_a_chain_without_its_cas_crl_is_refused(tmp_path, receiver_factory, pki, crls):
    """Fail closed: a CRL file without the receiver's CA's list does not let it through."""
    (tmp_path / "a").write_bytes(b"x" * 100)
    rx = receiver_factory(mkd(tmp_path / "dst"), "--cert", pki["recv"], "--key", pki["recv_key"])
    r = run_sluice("send", tmp_path / "a", rx.url, "--ca", pki["ca"], "--crl", crls["other"])
    assert r.returncode == 3, r.stderr
    assert f"and --crl {crls['other']}" in r.stderr and "unable to get certificate CRL" in r.stderr, r.stderr
    assert rx.wait()[0] == 3


def test_bad_crl_files_are_usage_errors_naming_the_file(tmp_path, pki, crls):
    url = "sluice://127.0.0.1:9/?token=t"  # nothing listens: the refusal must come first
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a CRL\n")
    (tmp_path / "a").write_bytes(b"x")
    missing = tmp_path / "nope.pem"
    for bad, why in [(missing, "cannot read it"), (garbage, "no PEM CRL"), (pki["ca"], "no PEM CRL"),
                     (crls["expired"], "past its next update"), (crls["forged"], "is not signed by that CA of --ca")]:
        r = run_sluice("send", tmp_path / "a", url, "--ca", pki["ca"], "--crl", bad)
        assert r.returncode == 2, r.stderr
        assert f"--crl {bad}" in r.stderr and why in r.stderr, r.stderr
        r = run_sluice("recv", mkd(tmp_path / "d"), "--cert", pki["recv"], "--key", pki["recv_key"], "--ca", pki["ca"],
                       "--crl", bad, "--port", "0")
        assert r.returncode == 2, r.stderr
        assert f"--crl {bad}" in r.stderr and why in r.stderr, r.stderr
    r = run_sluice("send", tmp_path / "a", url, "--pin", pin_of(pki["self"]), "--crl", crls["none"])
    assert r.returncode == 2 and f"--crl {crls['none']}: needs --ca FILE" in r.stderr, r.stderr
