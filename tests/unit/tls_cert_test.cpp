// Certificate mode's pieces that need no certificate (lib/core/tls/cert.hpp, keys.hpp): a data
// stream's resumed PSK depends on every one of its inputs, and a CertContext refuses a side's
// missing or malformed options as usage errors before reading any file.
#include <doctest/doctest.h>

#include <string>

#include "core/tls/cert.hpp"
#include "core/tls/keys.hpp"
#include "sluice/error.hpp"

using namespace sluice;

namespace {

tls::Psk filled(unsigned char v) {
    tls::Psk p;
    p.fill(v);
    return p;
}

ErrorCode code_of(const Certificates& c, tls::Side side, std::string& message) {
    try {
        tls::CertContext ctx(c, side);
    } catch (const Error& e) {
        message = e.what();
        return e.code();
    }
    return ErrorCode::internal; // not refused
}

} // namespace

TEST_CASE("a resumed PSK is bound to the session, the control connection's PSK and the stream's") {
    const tls::Secret session = filled(1);
    const tls::Psk base = tls::resumed_psk(session, filled(2), filled(3));
    CHECK(base == tls::resumed_psk(session, filled(2), filled(3)));
    CHECK(base != tls::resumed_psk(filled(9), filled(2), filled(3))); // another certificate session
    CHECK(base != tls::resumed_psk(session, filled(9), filled(3)));   // another control hello
    CHECK(base != tls::resumed_psk(session, filled(2), filled(9)));   // another stream (or token)
    CHECK(base != tls::resumed_psk(session, filled(3), filled(2)));   // the two hellos swapped
}

TEST_CASE("certificate options a side needs, or gives malformed, are usage errors naming them") {
    std::string m;
    Certificates sender_without_check;
    sender_without_check.cert_file = "c.pem";
    sender_without_check.key_file = "k.pem";
    CHECK(code_of(sender_without_check, tls::Side::client, m) == ErrorCode::usage);
    CHECK(m.find("--ca FILE or --pin") != std::string::npos);

    Certificates receiver_without_cert;
    receiver_without_cert.pins = {"sha256:" + std::string(64, 'a')};
    CHECK(code_of(receiver_without_cert, tls::Side::server, m) == ErrorCode::usage);
    CHECK(m.find("--cert FILE and --key FILE") != std::string::npos);

    Certificates half;
    half.cert_file = "c.pem";
    half.pins = {"sha256:" + std::string(64, 'a')};
    CHECK(code_of(half, tls::Side::client, m) == ErrorCode::usage);
    CHECK(m.find("--cert and --key go together") != std::string::npos);

    for (const std::string& bad : {std::string("sha256:abc"), "md5:" + std::string(64, 'a'), "sha256:" + std::string(64, 'g')}) {
        Certificates c;
        c.pins = {bad};
        CHECK(code_of(c, tls::Side::client, m) == ErrorCode::usage);
        CHECK(m.find("--pin '" + bad + "'") != std::string::npos);
    }

    Certificates missing;
    missing.ca_file = "/nonexistent/ca.pem";
    CHECK(code_of(missing, tls::Side::client, m) == ErrorCode::usage);
    CHECK(m.find("--ca /nonexistent/ca.pem: cannot read it") != std::string::npos);
}
