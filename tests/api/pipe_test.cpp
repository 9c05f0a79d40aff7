// send_pipe() into Receiver(OutputFd) and Receiver(Sink&).
#include <doctest/doctest.h>
#include <fcntl.h>

#include "api_fixture.hpp"

using namespace api_test;

namespace {

struct PipeFds {
    int r = -1, w = -1;
    PipeFds() {
        int fds[2];
        REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
        r = fds[0];
        w = fds[1];
    }
    ~PipeFds() {
        if (r >= 0) ::close(r);
        if (w >= 0) ::close(w);
    }
    void close_write() {
        ::close(w);
        w = -1;
    }
};

void write_all(int fd, const std::string& s) {
    size_t done = 0;
    while (done < s.size()) {
        ssize_t n = ::write(fd, s.data() + done, s.size() - done);
        REQUIRE(n > 0);
        done += static_cast<size_t>(n);
    }
}

std::string read_all(int fd) {
    std::string out;
    char buf[1 << 16];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0) return out;
        out.append(buf, static_cast<size_t>(n));
    }
}

class OrderedSink : public sluice::Sink {
public:
    void write(const sluice::SinkEntry& e, uint64_t offset, std::span<const std::byte> data) override {
        CHECK(e.is_pipe);
        CHECK(offset == got.size()); // byte order, one call at a time
        got.append(reinterpret_cast<const char*>(data.data()), data.size());
    }
    void entry_done(const sluice::SinkEntry& e) override {
        final_size = e.size;
        ++done;
    }
    std::string got;
    uint64_t final_size = 0;
    int done = 0;
};

} // namespace

TEST_CASE("a pipe transfer from a pipe reaches an output pipe in order over several streams") {
    const std::string data = random_bytes(9 * (1 << 20) + 777, 3);
    PipeFds in, out;
    sluice::Receiver rx(sluice::OutputFd{out.w}, loopback_recv());
    Waiter w(rx);
    std::string received;
    std::thread consumer([&] { received = read_all(out.r); });
    std::thread producer([&] {
        write_all(in.w, data);
        in.close_write();
    });
    sluice::Progress progress;
    auto o = quick_send(4);
    o.progress = &progress;
    sluice::Stats sent = sluice::send_pipe(in.r, sluice::parse_url(rx.url()), o);
    producer.join();
    sluice::Stats got = w.get();
    out.close_write();
    consumer.join();
    CHECK(received == data);
    CHECK(sent.bytes == data.size());
    CHECK(got.bytes == data.size());
    CHECK(sent.data_path == "pipe_splice");
    CHECK(progress.stream_count == 4);
    uint64_t per_stream = 0;
    for (unsigned i = 0; i < 4; ++i) {
        per_stream += progress.streams[i].bytes;
        CHECK(progress.streams[i].state == sluice::StreamState::done);
    }
    CHECK(per_stream == data.size());
}

TEST_CASE("a pipe into a sink arrives in order and ends with its length") {
    const std::string data = random_bytes(5 * (1 << 20) + 5, 4);
    PipeFds in;
    OrderedSink sink;
    sluice::Receiver rx(sink, loopback_recv());
    Waiter w(rx);
    std::thread producer([&] {
        write_all(in.w, data);
        in.close_write();
    });
    sluice::send_pipe(in.r, sluice::parse_url(rx.url()), quick_send(3));
    producer.join();
    w.get();
    CHECK(sink.got == data);
    CHECK(sink.done == 1);
    CHECK(sink.final_size == data.size());
}

TEST_CASE("an output fd not open for writing is refused up front") {
    PipeFds p;
    CHECK_THROWS_AS(sluice::Receiver(sluice::OutputFd{p.r}, loopback_recv()), sluice::Error);
}
