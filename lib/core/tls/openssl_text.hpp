#pragma once
// Text from OpenSSL for the errors certificate mode raises (cert.cpp, crl.cpp): its last
// error's reason and a certificate name, escaped, since a peer's certificate names are
// peer text.
#include <openssl/x509.h>

#include <string>

namespace sluice::tls {

// OpenSSL's last error as text ("no reason given" when it set none); clears its queue.
std::string openssl_reason();

// name in OpenSSL's one-line form ("/CN=host"), printable() (it may come from the peer).
std::string name_text(const X509_NAME* name);

} // namespace sluice::tls
