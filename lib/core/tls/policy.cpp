#include "core/tls/policy.hpp"

#include <netinet/in.h>

#include "core/io/sys_error.hpp"

namespace sluice::tls {

bool is_loopback(const sockaddr_storage& ss) {
    if (ss.ss_family == AF_INET)
        return (ntohl(reinterpret_cast<const sockaddr_in&>(ss).sin_addr.s_addr) >> 24) == 127;
    if (ss.ss_family == AF_INET6) {
        const in6_addr& a = reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
        return IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127;
    }
    return false;
}

bool wants_encryption(Encrypt mode, const sockaddr_storage& peer) {
    if (mode == Encrypt::on) return true;
    if (mode == Encrypt::off) return false;
    return !is_loopback(peer);
}

bool wants_encryption(Encrypt mode, int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (mode == Encrypt::automatic && ::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0)
        throw_errno(ErrorCode::network, "getpeername");
    return wants_encryption(mode, ss);
}

Encrypt with_certificates(Encrypt mode, const Certificates& c) {
    if (!c.any()) return mode;
    if (mode == Encrypt::off)
        throw Error(ErrorCode::usage, "--cert, --key, --ca and --pin are for encrypted transfers: drop --no-encrypt");
    return Encrypt::on;
}

Psk hello_psk(const std::string& token, std::span<const unsigned char> server_nonce, uint16_t server_features,
              const wire::ClientHello& h) {
    return derive_psk(token, PskContext{.server_nonce = server_nonce,
                                        .client_nonce = h.nonce,
                                        .transfer_id = h.transfer_id,
                                        .role = static_cast<uint8_t>(h.role),
                                        .stream_index = h.stream_index,
                                        .server_features = server_features,
                                        .client_features = h.features});
}

std::string mismatch_text_for_sender(const std::string& peer, bool we_encrypt) {
    if (we_encrypt)
        return "the receiver at " + peer + " refused an encrypted transfer: it was started with --no-encrypt (or sees "
               "this sender on a loopback address); start it with --encrypt, or give this sender --no-encrypt as well";
    return "the receiver at " + peer + " requires encryption and this sender does not encrypt (--no-encrypt, or a "
           "loopback address); drop --no-encrypt here or pass --encrypt, or give the receiver --no-encrypt as well";
}

std::string mismatch_text_for_receiver(const std::string& source, bool we_encrypt) {
    if (we_encrypt)
        return "refused a connection from " + source + ": the sender does not encrypt (--no-encrypt) and this receiver "
               "requires encryption (--encrypt, or a peer not on loopback); give both sides --no-encrypt to send in clear";
    return "refused a connection from " + source + ": the sender encrypts and this receiver does not (--no-encrypt, or "
           "a loopback peer); give both sides the same --encrypt / --no-encrypt";
}

} // namespace sluice::tls
