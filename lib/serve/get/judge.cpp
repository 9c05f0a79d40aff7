#include "serve/get/judge.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "core/wire/auth.hpp"
#include "serve/engine/doc_root.hpp"
#include "serve/engine/shared.hpp"

namespace sluice::serve {

using wire::GetStatus;

PeerAddress peer_address(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
    char host[NI_MAXHOST];
    char port[NI_MAXSERV];
    if (::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, port, sizeof port,
                      NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return {};
    std::string h = host;
    if (h.rfind("::ffff:", 0) == 0 && h.find('.') != std::string::npos) h = h.substr(7); // IPv4 on a dual-stack socket
    return {h, static_cast<uint16_t>(std::stoul(port))};
}

bool loopback_host(const std::string& host) {
    in_addr a4{};
    if (::inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    return host == "::1";
}

wire::Bytes encode_reply(const wire::GetReply& r, tls::Sealer* sealer) {
    wire::Bytes out;
    encode_get_reply(out, r);
    if (!sealer) return out;
    wire::Bytes sealed;
    sealer->seal_append(out.data(), out.size(), sealed);
    return sealed;
}

namespace {

Judged refuse(GetStatus status, std::string message, const wire::Mac& mac = {}) {
    Judged j;
    j.reply.status = status;
    j.reply.message = std::move(message);
    j.reply.mac = mac;
    return j;
}

bool is_directory(int root_fd, const std::string& rel) {
    Opened o = open_beneath(root_fd, rel);
    struct stat st {};
    return o.status == 0 && ::fstat(o.fd.get(), &st) == 0 && S_ISDIR(st.st_mode);
}

} // namespace

Judged judge(Shared& sh, Attachments& att, const Asked& a, bool busy, int notify, bool walk) {
    const wire::GetRequest& q = a.q;
    if (busy) return refuse(GetStatus::busy, "the server is sending " + std::to_string(sh.opt.max_get_sessions) + " gets; try again later");
    if (q.version != wire::kVersion)
        return refuse(GetStatus::missing_feature, "protocol version " + std::to_string(q.version) + " (this server speaks " +
                                                      std::to_string(wire::kVersion) + ")");
    if (!(q.features & wire::kFeatureGetSessions))
        return refuse(GetStatus::missing_feature, "the request lacks feature bit 5 (get sessions)");
    if (sh.get_certs && sh.get_certs->verifies_peer() && !a.tls)
        return refuse(GetStatus::certificate_required, "this server verifies its clients (serve --ca/--pin): give sluice "
                                                       "get --cert FILE --key FILE, and --ca FILE or --pin sha256:HEX to "
                                                       "verify the server");
    wire::Mac mac{};
    std::string transfer_token = q.receiver_token; // a client from before, or a --public server
    if (a.hello.token_required) {
        wire::Mac want = wire::client_hello_mac(sh.opt.token, a.hello.nonce, wire::get_request_signed_part(a.frame));
        if (!wire::macs_equal(want, wire::Mac(q.mac))) return refuse(GetStatus::bad_token, "wrong token");
        // Bound (h18p): the reply's MAC covers the hello's features as sent, so a client whose
        // hello lost its offer on the way sees a mismatch; the transfer is keyed with what only
        // the two token holders can compute, not with the receiver_token read in clear.
        if (q.features & wire::kGetBoundTransfer) {
            mac = wire::get_reply_mac(sh.opt.token, q.nonce, a.hello.nonce, a.hello.features);
            transfer_token = wire::get_transfer_token(sh.opt.token, q.nonce, q.receiver_token);
        } else {
            mac = wire::server_auth_mac(sh.opt.token, q.nonce, a.hello.nonce);
        }
    }
    if (!walk && is_directory(sh.root.get(), q.path)) {
        Judged j;
        j.tree = true;
        return j;
    }
    Judged j;
    j.transfer_token = std::move(transfer_token);
    try {
        j.src = open_get_sources(sh.root.get(), q.path, sh.opt.max_get_files);
    } catch (const Error& e) {
        return refuse(GetStatus::bad_request, e.what(), mac);
    }
    if (j.src.status != 0)
        return refuse(j.src.status == 404 ? GetStatus::not_found : GetStatus::bad_request, j.src.message, mac);
    if (j.src.list.empty())
        return refuse(GetStatus::not_found, "'" + (q.path.empty() ? std::string("/") : q.path) + "' holds no regular files", mac);
    if (a.host.empty()) return refuse(GetStatus::bad_request, "the client's address is unknown (getpeername failed)", mac);
    // reply_port 0: the client connects the transfer's connections out to this port.
    if (q.reply_port == 0) {
        j.slot = att.open(q.nonce, 1 + q.streams, a.host, notify);
        if (!j.slot) return refuse(GetStatus::bad_request, "a get with this request's nonce is already running", mac);
    }
    j.reply.mac = mac;
    j.reply.files = j.src.files;
    j.reply.bytes = j.src.bytes;
    if (j.src.skipped)
        j.reply.message = std::to_string(j.src.skipped) + " entries not sent (" + std::to_string(j.src.links_out) +
                          " symlinks leading out of the tree; fifos, sockets, devices)";
    return j;
}

} // namespace sluice::serve
