#include "core/tls/ktls.hpp"

#include <linux/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "core/io/sys_error.hpp"

#ifndef SOL_TLS
#define SOL_TLS 282
#endif

namespace sluice::tls {

bool attach_ktls(int fd, std::string& why) {
    if (::setsockopt(fd, IPPROTO_TCP, TCP_ULP, "tls", sizeof "tls") == 0) return true;
    why = errno == ENOENT ? "the kernel has no tls ULP (CONFIG_TLS): records are sealed in user space"
                          : std::string("the kernel refused the tls ULP (") + std::strerror(errno) +
                                "): records are sealed in user space";
    return false;
}

namespace {
void install(int fd, int direction, const TrafficKey& k) {
    tls12_crypto_info_aes_gcm_128 info{};
    info.info.version = TLS_1_3_VERSION;
    info.info.cipher_type = TLS_CIPHER_AES_GCM_128;
    // TLS 1.3's 12-byte IV is the kernel's salt (4) followed by its iv (8); the sequence starts at 0.
    std::memcpy(info.salt, k.iv.data(), TLS_CIPHER_AES_GCM_128_SALT_SIZE);
    std::memcpy(info.iv, k.iv.data() + TLS_CIPHER_AES_GCM_128_SALT_SIZE, TLS_CIPHER_AES_GCM_128_IV_SIZE);
    std::memcpy(info.key, k.key.data(), TLS_CIPHER_AES_GCM_128_KEY_SIZE);
    if (::setsockopt(fd, SOL_TLS, direction, &info, sizeof info) != 0)
        throw_errno(ErrorCode::internal, direction == TLS_TX ? "kTLS: TLS_TX" : "kTLS: TLS_RX");
    std::memset(&info, 0, sizeof info);
}
} // namespace

void install_ktls(int fd, const LinkKeys& keys) {
    install(fd, TLS_TX, keys.tx);
    install(fd, TLS_RX, keys.rx);
}

} // namespace sluice::tls
