// Pushes (push_sessions.hpp): admitted on the ring, received by a receiver each (its data
// streams on the ring: PushStreams), handed the sender's connections as they reach the sluice
// port's rings (Attachments); its own listener is on loopback and never announced.
#include "serve/get/push_sessions.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <system_error>

#include "core/io/rtt_deadlines.hpp"
#include "core/io/socket.hpp"
#include "core/session/memory_budget.hpp"
#include "core/wire/auth.hpp"
#include "core/wire/codec_get.hpp"
#include "serve/engine/shared.hpp"
#include "serve/engine/worker.hpp"
#include "serve/get/ring_request.hpp"

namespace sluice::serve {

namespace {

// The control connection must have joined (attached and through its handshake) within this
// many request timeouts of the admission: one for the sender to connect and attach, one for
// the handshake (the receiver's own deadline for it is 10 s, the default request timeout).
constexpr int kJoinRequestTimeouts = 2;

Encrypt encryption_asked(uint8_t features) {
    if (features & wire::kGetEncrypted) return Encrypt::on;
    if (features & wire::kGetClear) return Encrypt::off;
    return Encrypt::automatic;
}

void say(Shared& sh, const std::string& line) {
    if (sh.opt.verbose && sh.opt.log) sh.opt.log(line);
}

// The push itself, on its thread: the receiver, the slot its connections arrive through, the
// reply, then the transfer. Never throws; counts the push.
void receive_push(Shared& sh, Attachments& att, StreamHost& streams, PushSessions::One& one, Asked a, std::string token,
                  wire::Mac reply_mac) {
    const std::string& who = one.who;
    const std::string peer = a.host;
    auto refuse = [&](wire::GetStatus status, const std::string& why) {
        sh.push_refused.fetch_add(1);
        say(sh, who + ": refused: " + why);
        wire::GetReply r;
        r.status = status;
        r.message = why;
        try {
            send_all(a.fd.get(), encode_reply(r, a.sealer.get()), "a push reply");
        } catch (const Error&) {
        }
    };
    try {
        set_nonblocking(a.fd.get(), false);
        set_io_timeout(a.fd.get(), rtt_scaled_ms(sh.opt.request_timeout_ms, a.rtt_us));
    } catch (const Error& e) {
        sh.push_failed.fetch_add(1);
        return say(sh, who + ": " + e.what());
    }
    RecvOptions o;
    // The connections come from the sluice port's rings (adopt). A Receiver always listens:
    // on loopback, on a port the kernel picks and nobody is told (it admits only T anyway).
    o.bind_address = "127.0.0.1";
    o.token = token;
    o.sync = sh.opt.sync_uploads;
    o.idle_timeout_ms = sh.opt.send_timeout_ms;
    // A pusher holds the token but is still a peer: no link out of DIR, no device, no hard
    // link to a file it did not send (RecvOptions::confine_links, as sluice get's receiver).
    o.confine_links = true;
    // The streams its request asked for, no more: the attaches are not counted for a push
    // (attachments.hpp), so its receiver holds the hello to them.
    o.max_streams = a.q.streams;
    // The token lets a client write files here, not act as this host's root (a root serve would
    // otherwise store its setuid binaries, file capabilities and owners): push_trust_text.
    o.sender_trust = sh.opt.push_trust;
    // Up to --max-pushes receivers at once share the one manifest budget a `sluice recv` has
    // alone (a quarter of memory): each gets its share, so hostile pushers that all send huge
    // manifests hold at most that together. A larger tree needs a lower --max-pushes.
    o.max_manifest_bytes = push_manifest_budget(sh.opt.max_pushes);
    o.encrypt = encryption_asked(a.q.features);
    o.verbose = sh.opt.verbose;
    if (sh.opt.log) o.log = [&sh, who](std::string_view line) { sh.opt.log(who + ": " + std::string(line)); };
    o.progress = &one.progress;
    std::unique_ptr<HostedReceive> rx;
    try {
        rx = receive_hosted(sh.root_display, o, streams);
    } catch (const Error& e) {
        return refuse(wire::GetStatus::bad_request, std::string("the server cannot receive into its directory: ") + e.what());
    }
    HostedReceive* r = rx.get();
    // Declared after rx: the slot goes first, and with it every hand-over to rx. 1 + 2 x streams:
    // the control, each data stream, and as many reopened streams (stream reconnect).
    std::unique_ptr<Attachments::Slot> slot =
        att.open_to(a.q.nonce, 1u + 2u * a.q.streams, peer, [r](UniqueFd fd) { r->adopt(std::move(fd)); });
    if (!slot) return refuse(wire::GetStatus::bad_request, "a push with this request's nonce is already running");
    wire::GetReply ok;
    ok.mac = reply_mac;
    try {
        send_all(a.fd.get(), encode_reply(ok, a.sealer.get()), "a push reply");
    } catch (const Error& e) {
        sh.push_failed.fetch_add(1);
        return say(sh, who + ": the sender left before the reply: " + e.what());
    }
    a.fd.reset(); // the request is answered: the transfer's connections attach
    {
        std::lock_guard lock(one.mu);
        if (one.cancelled) rx->cancel();
        one.rx = r;
    }
    sh.push_open.fetch_add(1);
    const auto t0 = std::chrono::steady_clock::now();
    try {
        const Stats s = rx->wait();
        sh.push_done.fetch_add(1);
        sh.push_bytes.fetch_add(s.bytes_sent);
        sh.add_push_not_kept(s.metadata_not_kept);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        say(sh, who + ": stored " + std::to_string(s.files) + " files, " + std::to_string(s.bytes_sent) + " bytes received (" +
                    std::to_string(s.bytes_skipped) + " already there) in " + std::to_string(secs) +
                    " s, its " + std::to_string(s.streams) + " data streams on the ring (" + s.data_path + ")");
    } catch (const Error& e) {
        sh.push_failed.fetch_add(1);
        say(sh, who + ": failed: " + e.what());
    }
    sh.push_open.fetch_sub(1);
    std::lock_guard lock(one.mu);
    one.rx = nullptr;
    slot.reset();
}

} // namespace

uint64_t push_manifest_budget(unsigned max_pushes) {
    return std::max<uint64_t>(default_manifest_budget() / std::max(1u, max_pushes), kMinManifestBudget / 4);
}

std::string push_path_text(unsigned max_pushes) {
    return "requests read and judged on the get rings; each push's data streams received on the ring that admitted it "
           "(its receives on the ring, each stream's parse, writes, checksums and file finishing on the ring's pool), its "
           "control (manifest, RESENDs, verdicts, renames) and connection admission on 2 threads of its own, at most " +
           std::to_string(max_pushes) +
           " at once (--max-pushes), the sender's connections attached through the rings; each push's manifest held to " +
           std::to_string(push_manifest_budget(max_pushes) >> 20) + " MiB (a quarter of memory shared by --max-pushes)";
}

void PushSessions::admit(RingRequest& req) {
    Asked& a = req.asked();
    Admission place = Admission::take(sh_.push_admitted, sh_.opt.max_pushes);
    PushJudged j = judge_push(sh_, a, !place);
    if (j.reply.status != wire::GetStatus::ok) {
        sh_.push_refused.fetch_add(1);
        say(sh_, "push from " + a.host + ": refused: " + j.reply.message);
        return req.reply(j.reply);
    }
    auto one = std::make_unique<One>();
    One* raw = one.get();
    raw->who = "push from " + a.host;
    raw->join_by_ms = monotonic_ms() + rtt_scaled_ms(kJoinRequestTimeouts * sh_.opt.request_timeout_ms, a.rtt_us);
    Asked taken;
    taken.fd = req.take();
    taken.hello = a.hello;
    taken.q = a.q;
    taken.host = a.host;
    taken.rtt_us = a.rtt_us;
    taken.tls = a.tls;
    taken.client_spki = a.client_spki;
    taken.sealer = req.take_sealer(); // certificate mode: the reply goes in its records
    try {
        raw->thread = std::thread([this, raw, b = std::move(taken), t = std::move(j.transfer_token), m = j.reply.mac, p = std::move(place)]() mutable {
            receive_push(sh_, att_, streams_, *raw, std::move(b), std::move(t), m);
            p = Admission();
            raw->done.store(true);
        });
    } catch (const std::system_error&) {
        sh_.push_failed.fetch_add(1); // the connection went with the lambda
        return;
    }
    list_.push_back(std::move(one));
}

void PushSessions::tick(int64_t now_ms) {
    for (auto it = list_.begin(); it != list_.end();) {
        One& o = **it;
        if (o.done.load()) {
            o.thread.join();
            it = list_.erase(it);
            continue;
        }
        if (now_ms >= o.join_by_ms && o.progress.stream_count.load() == 0) {
            std::lock_guard lock(o.mu);
            if (!o.cancelled) {
                o.cancelled = true;
                say(sh_, o.who + ": its control connection did not join within the deadline: cancelled");
                if (o.rx) o.rx->cancel();
            }
        }
        ++it;
    }
}

void PushSessions::cancel_all() {
    for (auto& o : list_) {
        std::lock_guard lock(o->mu);
        o->cancelled = true;
        if (o->rx) o->rx->cancel();
    }
}

void PushSessions::stop() {
    cancel_all();
    for (auto& o : list_)
        if (o->thread.joinable()) o->thread.join();
    list_.clear();
}

} // namespace sluice::serve
