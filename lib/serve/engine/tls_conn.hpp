#pragma once
// An HTTPS connection's TLS state (serve --cert/--key; docs/design.md, "HTTPS"): while its
// handshake runs, the handshake (core/tls/web_handshake.hpp) fed with what the ring received;
// after, the record layer's two directions (core/tls/record.hpp, the process's record
// engine) and the input of one record at most. Responses are sealed into a TlsOut the worker
// lends while a response is being sent: nothing is allocated per record.
#include <sys/uio.h>

#include <cstdint>
#include <memory>

#include "core/tls/record.hpp"
#include "core/tls/web_handshake.hpp"

namespace sluice::serve {

// Records sealed at once: 8 x 16 KiB of content, one sendmsg.
inline constexpr size_t kTlsOutRecords = 8;

struct TlsOut {
    unsigned char slot[kTlsOutRecords][tls::kMaxRecord];
};

struct TlsConn {
    explicit TlsConn(const tls::WebContext& ctx) : shake(std::make_unique<tls::WebHandshake>(ctx)) {}
    std::unique_ptr<tls::WebHandshake> shake; // until the handshake ends
    std::unique_ptr<tls::Sealer> sealer;
    std::unique_ptr<tls::Opener> opener;
    uint16_t out = 0xffff; // the worker's TlsOut lent to this response (kNoBuf: none)
    uint8_t iov_at = 0, iov_n = 0;
    size_t out_left = 0; // sealed bytes not yet sent
    iovec iov[kTlsOutRecords]{};
    uint32_t rx_len = 0; // a record's bytes received so far (ciphertext)
    unsigned char rx[tls::kHeaderBytes + tls::kMaxCiphertext];
};

} // namespace sluice::serve
