#pragma once
// The server side of HTTPS (sluice serve --cert/--key, docs/design.md, "HTTPS"): a TLS 1.3
// handshake with an X.509 certificate for ordinary web clients (curl, wget, aria2c, Python),
// run by OpenSSL over two memory BIOs so that an event loop steps it with the bytes its ring
// received and sends what it produced: no thread and no blocking socket per connection. After
// the handshake OpenSSL leaves the connection, as in handshake.hpp: the records that follow
// are this project's record layer (record.hpp), keyed from the traffic secrets.
//
// One suite, TLS_AES_128_GCM_SHA256 (the one every TLS 1.3 client must implement, RFC 8446
// 9.1, and the one the record engine seals); no TLS 1.2; no session tickets (a connection's
// records are counted from sequence 0 by the next layer, nothing of OpenSSL's may follow);
// ALPN http/1.1 when the client offers it.
#include <openssl/ssl.h>

#include <cstddef>
#include <memory>
#include <string>

#include "core/tls/keys.hpp"

namespace sluice::tls {

// The certificate, the key and the settings, shared by every connection of a server.
class WebContext {
public:
    // Throws usage naming the option, the file and the reason (unreadable, not PEM, a key that
    // is not the certificate's), internal when OpenSSL cannot set up a context.
    WebContext(const std::string& cert_file, const std::string& key_file);
    WebContext(const WebContext&) = delete;
    WebContext& operator=(const WebContext&) = delete;
    SSL_CTX* get() const { return ctx_.get(); }
    const std::string& spki() const { return spki_; } // "sha256:HEX" of the certificate's key

private:
    struct CtxFree {
        void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
    };
    std::unique_ptr<SSL_CTX, CtxFree> ctx_; // owned from the line that makes it: a refused key throws
    std::string spki_;
};

// One connection's handshake. The bytes it holds are bounded (kMaxIn in, OpenSSL's flight out).
class WebHandshake {
public:
    enum class Step : uint8_t { more, done, failed };
    // Input a client may send before its handshake ends: a ClientHello (at most ~16 KiB in
    // practice), its CCS, Certificate-less Finished. More is refused as hostile.
    static constexpr size_t kMaxIn = 64 << 10;

    explicit WebHandshake(const WebContext& ctx); // throws internal
    ~WebHandshake();
    WebHandshake(const WebHandshake&) = delete;
    WebHandshake& operator=(const WebHandshake&) = delete;

    // Bytes received from the client; false (and failed) beyond kMaxIn.
    bool feed(const unsigned char* p, size_t n);
    // Runs the handshake as far as the input allows. failed: why() says why, plain_http()
    // whether the client spoke plain HTTP to this port.
    Step step();
    // What to send now (OpenSSL's flight, or its alert after a failure), then how much went.
    size_t pending(const unsigned char** p) const;
    void sent(size_t n);
    // Once step() said done: the record keys (tx: the server's), and the bytes received past the
    // handshake (the client's first records) moved into dst (room for cap; false if more).
    LinkKeys keys();
    bool take_rest(unsigned char* dst, size_t cap, size_t* len);
    const std::string& why() const { return why_; }
    bool plain_http() const { return plain_http_; }

private:
    struct State;
    std::unique_ptr<State> st_;
    std::string why_;
    bool plain_http_ = false;
};

} // namespace sluice::tls
