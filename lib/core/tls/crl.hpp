#pragma once
// Certificate revocation lists for certificate mode (--crl FILE, docs/guarantees.md,
// "Certificates"): a PKI that revokes a certificate publishes its serial in a CRL signed by the
// CA; given that file, a side refuses a peer whose chain holds a revoked certificate. The
// lists are read and checked once, before any connection, and the chain is then checked
// against them by OpenSSL's verification at every certificate handshake.
#include <openssl/ssl.h>

#include <string>

namespace sluice::tls {

// Adds every CRL of crl_file (PEM, one or more) to ctx's certificate store and turns on the
// revocation check for each certificate of the peer's chain below its trust anchor (each
// needs its issuer's CRL: a chain whose issuer has none is refused, not let through). Throws
// usage naming the file: unreadable, no CRL in it, a CRL past its next update, or one whose
// issuer is a CA of ca_file (already loaded into ctx) that did not sign it.
void load_crls(SSL_CTX* ctx, const std::string& crl_file, const std::string& ca_file);

// Whether a verification error is the revocation check's (a revoked certificate, or a CRL
// missing, expired or not verifiable): the refusal then names --crl.
bool is_revocation_error(int x509_error);

// "its certificate (SUBJECT, serial HEX) is revoked by --crl FILE", the subject escaped.
std::string revoked_text(X509* cert, const std::string& crl_file);

} // namespace sluice::tls
