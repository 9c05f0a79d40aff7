#pragma once
// The kernel's TLS (the `tls` ULP, CONFIG_TLS): once the handshake is done, the record keys are
// handed to the kernel, which then seals what send, sendfile and splice put on the socket and
// opens what recv reads, so the zero-copy send paths stay zero-copy with encryption on.
// Records are the same TLS 1.3 records as record.hpp's, so either side may use either.
#include <string>

#include "core/tls/keys.hpp"

namespace sluice::tls {

// Attaches the `tls` ULP to a connected TCP socket. False, with why, where the kernel has no
// such ULP (ENOENT: not built, as on this project's test machine) or refuses it; the socket is
// then unchanged and the user-space record layer is used.
bool attach_ktls(int fd, std::string& why);
// Gives both directions' keys to the kernel (after attach_ktls succeeded); throws internal.
void install_ktls(int fd, const LinkKeys& keys);

} // namespace sluice::tls
