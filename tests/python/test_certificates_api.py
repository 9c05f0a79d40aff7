"""cert=, key=, ca=, pin=, crl= from Python (issue 18, certificate mode): a receiver with a
certificate made here by openssl at run time, a sender pinning its key; a wrong pin raises
AuthError naming the pin it found; a CRL listing the receiver's certificate raises AuthError
on both sides; a bad pin or CRL value is a UsageError before any connection."""
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


def test_crl_is_taken_and_a_bad_one_is_a_usage_error(tmp_path, tree, cert):
    """crl= reaches the library: a file that is not a CRL is refused naming it, before any
    connection, on both sides."""
    c, k, _ = cert
    bad = tmp_path / "not-a-crl.pem"
    bad.write_text("nothing\n")
    with pytest.raises(sluice.UsageError, match=f"--crl {bad}: no PEM CRL"):
        sluice.send([tree], "sluice://127.0.0.1:9/?token=t", ca=c, crl=bad)
    with pytest.raises(sluice.UsageError, match=f"--crl {bad}: no PEM CRL"):
        sluice.Receiver(tree, cert=c, key=k, ca=c, crl=bad)
    with pytest.raises(sluice.UsageError, match="crl="):
        sluice.send([tree], "sluice://127.0.0.1:9/?token=t", ca=c, crl=5)


def openssl(*args, cwd):
    subprocess.run(["openssl", *map(str, args)], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture
def revocation(tmp_path):
    """A CA, a receiver certificate it signs (for 127.0.0.1), and two CRLs of the CA made by
    `openssl ca` here: one before and one after the receiver's certificate is revoked."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=pyca", cwd=tmp_path)
    openssl("req", *ec, "-keyout", "rx.key", "-out", "rx.csr", "-subj", "/CN=pyrx", cwd=tmp_path)
    (tmp_path / "rx.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "rx.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "rx.pem",
            "-days", "2", "-extfile", "rx.ext", cwd=tmp_path)
    (tmp_path / "index.txt").write_text("")
    (tmp_path / "crlnumber").write_text("01\n")
    (tmp_path / "ca.cnf").write_text("[ca]\ndefault_ca = here\n[here]\ndatabase = index.txt\ncrlnumber = crlnumber\n"
                                     "default_md = sha256\ndefault_crl_days = 2\ncertificate = ca.pem\n"
                                     "private_key = ca.key\n")
    openssl("ca", "-config", "ca.cnf", "-gencrl", "-out", "none.pem", cwd=tmp_path)
    openssl("ca", "-config", "ca.cnf", "-revoke", "rx.pem", cwd=tmp_path)
    openssl("ca", "-config", "ca.cnf", "-gencrl", "-out", "revoked.pem", cwd=tmp_path)
    return {n: tmp_path / f"{n}.pem" for n in ("ca", "rx", "none", "revoked")} | {"rx_key": tmp_path / "rx.key"}


def test_crl_accepts_a_certificate_it_does_not_list_and_refuses_a_revoked_one(tmp_path, tree, revocation):
    r = revocation
    dst = tmp_path / "dst"
    dst.mkdir()
    rx = local_receiver(dst, cert=r["rx"], key=r["rx_key"])
    served = Served(rx)
    sent = sluice.send([tree], rx.url, ca=r["ca"], crl=r["none"])
    served.join()
    assert sent["tls_mode"] == "certificate"
    assert_same_tree(tree, dst / "src")

    dst2 = tmp_path / "dst2"
    dst2.mkdir()
    rx = local_receiver(dst2, cert=r["rx"], key=r["rx_key"])
    served = Served(rx)
    with pytest.raises(sluice.AuthError, match=f"/CN=pyrx, serial .*\\) is revoked by --crl {r['revoked']}"):
        sluice.send([tree], rx.url, ca=r["ca"], crl=r["revoked"], connect_timeout=5, idle_timeout=5)
    with pytest.raises(sluice.AuthError, match="revoked"):
        served.join()
    assert not (dst2 / "src").exists()


def test_get_verifies_a_servers_certificate(tmp_path, cert):
    """sluice.get(ca=/pin=) against sluice.serve(cert=, key=, port=) (h18o): a pinned server
    is served encrypted and counted in certificate mode; a wrong pin raises AuthError naming
    the server's pin, and writes nothing; a server that requires client certificates (ca=)
    refuses a client without one."""
    c, k, pin = cert
    root = tmp_path / "www"
    root.mkdir()
    (root / "f.bin").write_bytes(bytes(range(256)) * 4096)
    for d in "abc":
        (tmp_path / d).mkdir()
    with sluice.serve(root, http_port=0, port=0, public=True, bind_address="127.0.0.1", threads=1, cert=c,
                      key=k) as srv:
        url = f"sluice://127.0.0.1:{srv.get_port}/f.bin"
        got = sluice.get(url, tmp_path / "a", pin=pin)
        assert (tmp_path / "a" / "f.bin").read_bytes() == (root / "f.bin").read_bytes()
        assert got["encryption"].startswith("tls13-")
        with pytest.raises(sluice.AuthError, match=pin):
            sluice.get(url, tmp_path / "b", pin="sha256:" + "0" * 64)
        assert not (tmp_path / "b" / "f.bin").exists()
        assert srv.stats()["get_sessions_certificate"] == 2
    with sluice.serve(root, http_port=0, port=0, public=True, bind_address="127.0.0.1", threads=1, cert=c, key=k,
                      pin=pin) as srv:
        with pytest.raises(sluice.AuthError, match="requires a certificate from this side"):
            sluice.get(f"sluice://127.0.0.1:{srv.get_port}/f.bin", tmp_path / "c", pin=pin)
