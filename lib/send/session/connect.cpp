#include "send/session/connect.hpp"

#include <sys/socket.h>

#include "core/io/socket.hpp"
#include "send/session/handshake.hpp"
#include "core/wire/auth.hpp"
#include "core/wire/codec.hpp"

namespace sluice {

Connections connect_transfer(const Endpoint& to, const SendOptions& opts) {
    const std::string peer = to.host + ":" + std::to_string(to.port);
    Connections c;
    wire::ClientHello hello;
    wire::random_bytes(hello.transfer_id);
    hello.stream_count = static_cast<uint16_t>(opts.streams);
    c.control = connect_tcp(to.host, to.port, opts.connect_timeout_ms);
    set_nodelay(c.control.get());
    set_io_timeout(c.control.get(), opts.idle_timeout_ms);
    hello.role = wire::Role::control;
    client_handshake(c.control.get(), to.token, hello, peer);
    set_io_timeout(c.control.get(), 0); // acks may be far apart while data flows
    for (unsigned i = 1; i <= opts.streams; ++i) {
        if (opts.progress) opts.progress->streams[i - 1].state = StreamState::connecting;
        UniqueFd fd = connect_tcp(to.host, to.port, opts.connect_timeout_ms);
        set_io_timeout(fd.get(), opts.idle_timeout_ms);
        hello.role = wire::Role::data;
        hello.stream_index = static_cast<uint16_t>(i);
        client_handshake(fd.get(), to.token, hello, peer);
        c.data.push_back(std::move(fd));
        if (opts.progress) opts.progress->streams[i - 1].state = StreamState::idle;
    }
    if (opts.progress) opts.progress->stream_count = opts.streams;
    return c;
}

void send_transfer_end(int control, uint32_t data_streams, uint64_t blocks, uint64_t bytes, int idle_timeout_ms) {
    set_io_timeout(control, idle_timeout_ms); // the verdict must come back in time
    wire::Bytes out;
    wire::encode_transfer_end(out, {data_streams, blocks, bytes});
    send_all(control, out, "ending the transfer");
}

void abort_transfer(int control, const std::vector<UniqueFd>& data, uint32_t code, const std::string& why) {
    try {
        wire::Bytes out;
        wire::encode_abort(out, {code, why});
        send_all(control, out, "aborting");
    } catch (const Error&) {
    }
    ::shutdown(control, SHUT_RDWR);
    for (auto& d : data) ::shutdown(d.get(), SHUT_RDWR);
}

} // namespace sluice
