// A RecvSession whose data streams a StreamHost receives (core/session/hosted_streams.hpp):
// what `sluice serve` runs for a push, so that a push's data streams are read by the server's
// rings and hold no thread. The session's other work is as for any Receiver: its wait() thread
// admits connections and, here, runs each data stream's STREAM_RESUME and TLS handshake
// (blocking, under the stream's idle timeout) before it hands the stream over; its control
// thread runs the ControlSide.
#include <sys/socket.h>

#include "recv/session/recv_session.hpp"
#include "recv/session/recv_target.hpp"

namespace sluice {

namespace {

// One data stream as the host sees it: the receive path's steps, and its end told to the session.
class HostedDataStream final : public HostedStream {
public:
    HostedDataStream(int sock, unsigned index, std::unique_ptr<HostedReceiver> rx,
                     std::function<void(unsigned, std::unique_ptr<HostedReceiver>, const Error*)> ended)
        : sock_(sock), index_(index), rx_(std::move(rx)), ended_(std::move(ended)) {}
    int fd() const override { return sock_; }
    Read next_read() override { return rx_->next_read(); }
    bool timed_out() override { return rx_->timed_out(); }
    bool received(size_t n) override { return rx_->received(n); }
    Write next_write() override { return rx_->next_write(); }
    void wrote(int res) override { rx_->wrote(res); }
    Error broke(int err) const override { return rx_->broke(err); }
    void end(const Error* e) noexcept override { ended_(index_, std::move(rx_), e); }

private:
    int sock_;
    unsigned index_;
    std::unique_ptr<HostedReceiver> rx_;
    std::function<void(unsigned, std::unique_ptr<HostedReceiver>, const Error*)> ended_;
};

class Hosted final : public HostedReceive {
public:
    Hosted(const std::filesystem::path& dir, RecvOptions o, StreamHost& host)
        : session_(RecvTarget::directory(dir, o.path), std::move(o), &host) {}
    void adopt(UniqueFd fd) override { session_.adopt(std::move(fd)); }
    Stats wait() override { return session_.wait(); }
    void cancel() override { session_.cancel(); }

private:
    RecvSession session_;
};

} // namespace

std::unique_ptr<HostedReceive> receive_hosted(const std::filesystem::path& dir, RecvOptions options, StreamHost& host) {
    return std::make_unique<Hosted>(dir, std::move(options), host);
}

void RecvSession::host_data_stream(unsigned index, int sock, std::optional<StreamReceipt> resumed) {
    StreamProgress* sp = progress_of(index);
    try {
        if (sp) sp->state = StreamState::moving;
        if (resumed) send_stream_resume(sock, index, *resumed, log_);
        std::optional<tls::LinkKeys> keys;
        if (psk_[index]) {
            keys = links_.open_records(sock, tls::Side::server, *psk_[index], "the sender", index);
            // Under kTLS the kernel opens the records: the stream then reads plain bytes.
            if (index == 1) log_.verbose_line("encryption: " + links_.path() + "; data streams: " + tls::streams_text(links_.streams()));
        }
        auto rx = std::make_unique<HostedReceiver>(sock, index, ctx_, keys ? &*keys : nullptr);
        {
            std::lock_guard lk(hosted_mu_);
            ++hosted_live_;
        }
        stream_host_->host(std::make_unique<HostedDataStream>(
            sock, index, std::move(rx),
            [this](unsigned i, std::unique_ptr<HostedReceiver> r, const Error* e) { hosted_ended(i, std::move(r), e); }));
    } catch (const Error& e) {
        if (sp) sp->state = StreamState::failed;
        fail(e);
    }
}

void RecvSession::hosted_ended(unsigned index, std::unique_ptr<HostedReceiver> rx, const Error* e) {
    StreamProgress* sp = progress_of(index);
    try {
        if (!e) {
            const StreamReceipt r = rx->receipt();
            if (std::string fb = rx->fallback(); tally_.note_fallback(fb)) log_.verbose_line("slower path: " + fb);
            rx.reset(); // its counts (tally_.marks) are in before the stream counts as ended
            if (sp) {
                sp->bytes = r.bytes;
                sp->state = StreamState::done;
            }
            tally_.stream_ended(r);
        } else if (reconnect_ && !latch_.stopped() && BrokenStreams::heals(*e)) {
            const StreamReceipt whole = rx->settle_after_break();
            rx.reset(); // done with the old connection before a new one can take its place
            tally_.stream_broke(whole);
            broken_.broke(index, whole, e->what());
            log_.verbose_line("data stream " + std::to_string(index) + " broke (" + e->what() + ") after " +
                              std::to_string(whole.blocks) + " whole blocks: waiting for the sender to reopen it");
            if (sp) sp->state = StreamState::waiting;
        } else {
            rx.reset();
            if (sp) sp->state = StreamState::failed;
            fail(*e);
        }
    } catch (const Error& x) {
        fail(x);
    }
    {
        std::lock_guard lk(hosted_mu_);
        --hosted_live_;
    }
    hosted_cv_.notify_all();
}

} // namespace sluice
