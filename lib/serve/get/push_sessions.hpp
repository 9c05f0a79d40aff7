#pragma once
// Pushes into `sluice serve DIR` (h15s; docs/design.md, "Pushes"): `sluice send` asks on the
// sluice port with PUSH_REQUEST (GET_REQUEST's payload under its own type), the get ring judges
// it (uploads allowed, --max-pushes, the token's MAC: push_judge.cpp) and refuses there, and an
// admitted push is received by a receiver of its own (receive_hosted: `sluice recv`'s engine)
// whose data streams the admitting ring receives (PushStreams: no thread per stream); the
// receiver's own two threads remain (the push's thread: its reply, then admitting the sender's
// connections as they attach on any ring, each data stream's TLS handshake; and the control
// thread: manifest, RESENDs, verdicts, renames). Bounded by --max-pushes over all rings; a
// sender whose control connection has not joined within the attach deadline is cancelled by
// the ring's tick; every later wait is the receiver's own.
#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "serve/get/admission.hpp"
#include "serve/get/attachments.hpp"
#include "serve/get/judge.hpp"
#include "core/session/hosted_streams.hpp"
#include "sluice/sluice.hpp"

namespace sluice::serve {

struct Shared;
class RingRequest;

// What the ring decided about a PUSH_REQUEST (push_judge.cpp): the reply (ok, or why not) and,
// when ok, the token that keys the push's transfer (derived: it never crosses the wire).
struct PushJudged {
    wire::GetReply reply;
    std::string transfer_token;
};
PushJudged judge_push(Shared& sh, const Asked& a, bool busy);
// What /_stats and -v say of how pushes are received (push_path).
std::string push_path_text(unsigned max_pushes);
// What /_stats (push_metadata) and -v say a push may store (ServeOptions::push_trust).
std::string push_trust_text(SenderTrust trust);
// The most memory one push's receiver may hold for its manifest: the quarter of memory a
// `sluice recv` may use alone, shared by --max-pushes pushes (at least 64 MiB each).
uint64_t push_manifest_budget(unsigned max_pushes);

class PushSessions {
public:
    // streams: where the pushes' data streams are received (the admitting ring's PushStreams).
    PushSessions(Shared& sh, Attachments& att, StreamHost& streams) : sh_(sh), att_(att), streams_(streams) {}
    ~PushSessions() { stop(); }
    PushSessions(const PushSessions&) = delete;
    PushSessions& operator=(const PushSessions&) = delete;

    // On the ring: a PUSH_REQUEST read. Refused with its reason on the ring (r lingers), or
    // taken by a push thread.
    void admit(RingRequest& r);
    // On the ring's tick: joins the pushes that ended, cancels those whose sender did not join
    // its control connection within the attach deadline.
    void tick(int64_t now_ms);
    void cancel_all(); // cancels every push (never waits: on the ring, whose streams they wait for)
    bool running() const { return !list_.empty(); } // pushes not yet joined by tick()
    void stop(); // cancels every push and joins (the ring that hosts their streams no longer runs, or none is left)

    struct One {
        std::thread thread;
        std::atomic<bool> done{false};
        std::mutex mu;                // guards rx against the push thread's end
        HostedReceive* rx = nullptr;  // while it waits
        bool cancelled = false;   // by stop() or the join deadline: rx is cancelled when made
        Progress progress;        // stream_count is set once the control connection joined
        int64_t join_by_ms = 0;   // the control connection's deadline
        std::string who;          // "push from HOST"
    };

private:
    Shared& sh_;
    Attachments& att_;
    StreamHost& streams_;
    std::list<std::unique_ptr<One>> list_;
};

} // namespace sluice::serve
