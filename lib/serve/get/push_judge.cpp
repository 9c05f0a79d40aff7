// A PUSH_REQUEST's checks (push_sessions.hpp), on the get ring: nothing here touches the disk.
#include "core/wire/auth.hpp"
#include "serve/engine/shared.hpp"
#include "serve/get/push_sessions.hpp"
#include "sluice/printable.hpp"

namespace sluice::serve {

using wire::GetStatus;

namespace {

PushJudged refuse(GetStatus status, std::string message, const wire::Mac& mac = {}) {
    PushJudged j;
    j.reply.status = status;
    j.reply.message = std::move(message);
    j.reply.mac = mac;
    return j;
}

} // namespace

std::string push_trust_text(SenderTrust trust) {
    switch (trust) {
    case SenderTrust::none:
        return "files stored as the server's own user and group, without set-uid/set-gid bits (sticky only on directories), "
               "with user.* attributes and ACLs naming no one only (--push-keep-owners keeps owners)";
    case SenderTrust::owners:
        return "owners and groups kept by name (--push-keep-owners), without set-uid/set-gid bits (sticky only on directories), "
               "file capabilities, security.* or trusted.* attributes (--push-keep-privileges keeps them)";
    case SenderTrust::full:
        return "everything a pusher sends kept where the server can, as a root sluice recv does: owners, set-id bits, file "
               "capabilities, security.* and trusted.* attributes (--push-keep-privileges)";
    }
    return "?";
}

PushJudged judge_push(Shared& sh, const Asked& a, bool busy) {
    const wire::GetRequest& q = a.q;
    // Before the token: the sender learns at once that no token would help.
    if (!sh.opt.allow_upload) return refuse(GetStatus::bad_request, "this server does not take pushes (it runs without --allow-upload)");
    if (busy)
        return refuse(GetStatus::busy, "the server is receiving " + std::to_string(sh.opt.max_pushes) +
                                           " pushes (--max-pushes); try again later");
    if (q.version != wire::kVersion)
        return refuse(GetStatus::missing_feature, "protocol version " + std::to_string(q.version) + " (this server speaks " +
                                                      std::to_string(wire::kVersion) + ")");
    if (!(q.features & wire::kFeatureGetSessions) || !(q.features & wire::kGetBoundTransfer))
        return refuse(GetStatus::missing_feature, "the push request lacks feature bits 5 and 7 (get sessions, bound transfer tokens)");
    // A server that verifies its clients does so for pushes as for gets: the certificate (checked
    // by --ca/--pin/--crl in the handshake on the ring) identifies the client, and then the token
    // authorizes the write below, as everywhere else: a certificate that may read may not write.
    if (sh.get_certs && sh.get_certs->verifies_peer() && !a.tls)
        return refuse(GetStatus::certificate_required, "this server verifies its clients (serve --ca/--pin): push with "
                                                       "sluice send --cert FILE --key FILE, and --ca FILE or --pin "
                                                       "sha256:HEX to verify the server");
    // The token, always: --public opens reads, never writes (as HTTP uploads).
    const wire::Mac want = wire::client_hello_mac(sh.opt.token, a.hello.nonce, wire::get_request_signed_part(a.frame));
    if (!wire::macs_equal(want, wire::Mac(q.mac))) return refuse(GetStatus::bad_token, "wrong token");
    const wire::Mac mac = wire::get_reply_mac(sh.opt.token, q.nonce, a.hello.nonce, a.hello.features);
    // The transfer's PSK handshakes, keyed by the token bound inside this session, are what
    // tie it to the verified client: certificate mode's transfer is never in clear.
    if (a.tls && !(q.features & wire::kGetEncrypted))
        return refuse(GetStatus::bad_request, "a push in certificate mode is encrypted (its keys bind it to the verified "
                                              "session); this request asks for clear", mac);
    if (!q.path.empty())
        // The path is the peer's text, echoed back and logged: escaped here, whatever prints it.
        return refuse(GetStatus::bad_request, "a push lands in the served directory itself and takes no path ('" +
                                                  printable(q.path) + "'): send a directory to store it as DIR/NAME", mac);
    if (q.reply_port != 0) return refuse(GetStatus::bad_request, "a push's connections attach (reply port 0)", mac);
    if (a.host.empty()) return refuse(GetStatus::bad_request, "the sender's address is unknown (getpeername failed)", mac);
    PushJudged j;
    j.reply.mac = mac;
    j.transfer_token = wire::get_transfer_token(sh.opt.token, q.nonce, q.receiver_token);
    return j;
}

} // namespace sluice::serve
