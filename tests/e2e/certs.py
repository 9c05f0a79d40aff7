"""Certificates and CRLs made with openssl at run time (never committed), for the certificate-mode
tests (test_certificates.py, test_serve_get_certificates.py) and HTTPS on `sluice serve` (test_serve_https.py)."""
import hashlib
import subprocess


def openssl(*args, cwd):
    subprocess.run(["openssl", *map(str, args)], cwd=cwd, check=True, capture_output=True, timeout=60)


def new_key_and_csr(d, name):
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)


def self_signed(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
            f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={name}", cwd=d)
    return d / f"{name}.pem", d / f"{name}.key"


def signed(d, name, ca, days=2, san="IP:127.0.0.1"):
    """A certificate for name signed by the CA ca (its .pem and .key in d); days -1: expired."""
    new_key_and_csr(d, name)
    (d / f"{name}.ext").write_text(f"subjectAltName={san}\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
            "-out", f"{name}.pem", "-days", str(days), "-extfile", f"{name}.ext", cwd=d)
    return d / f"{name}.pem", d / f"{name}.key"


def pin_of(cert):
    """sha256:HEX of the certificate's SubjectPublicKeyInfo, as openssl computes it."""
    pub = subprocess.run(["openssl", "x509", "-in", str(cert), "-pubkey", "-noout"], check=True, capture_output=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pub, check=True,
                         capture_output=True).stdout
    return "sha256:" + hashlib.sha256(der).hexdigest()


CA_CONF = """[ ca ]
default_ca = here
[ here ]
database = index.txt
crlnumber = crlnumber
default_md = sha256
default_crl_days = 2
certificate = {ca}.pem
private_key = {ca}.key
"""


def ca_db(d, ca):
    """An `openssl ca` database in d for the CA ca (its .pem and .key in d)."""
    (d / "index.txt").write_text("")
    (d / "crlnumber").write_text("01\n")
    (d / "ca.cnf").write_text(CA_CONF.format(ca=ca))


def gencrl(d, out, *extra):
    openssl("ca", "-config", "ca.cnf", "-gencrl", "-out", out, *extra, cwd=d)
    return d / out


def crls_of(d, ca, revoked):
    """Two CRLs of the CA ca (its .pem and .key in d): one revoking nothing, one revoking the
    certificates named (made by signed() in d)."""
    ca_db(d, ca)
    none = gencrl(d, "crl-none.pem")
    for name in revoked:
        openssl("ca", "-config", "ca.cnf", "-revoke", f"{name}.pem", cwd=d)
    return none, gencrl(d, "crl-revoked.pem")


def serial_of(cert):
    out = subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", "-serial"], check=True, capture_output=True,
                         text=True).stdout
    return out.strip().split("=", 1)[1]


def client_server_pki(d):
    """A CA with a server (for 127.0.0.1) and a client certificate under it, and a second CA
    with a stranger's certificate: {"ca", "server", "server_key", "client", "client_key",
    "other_ca", "stranger", "stranger_key"} (paths)."""
    out = {}
    out["ca"], _ = self_signed(d, "ca")
    out["other_ca"], _ = self_signed(d, "otherca")
    out["server"], out["server_key"] = signed(d, "server", "ca")
    out["client"], out["client_key"] = signed(d, "client", "ca")
    out["stranger"], out["stranger_key"] = signed(d, "stranger", "otherca")
    return out
