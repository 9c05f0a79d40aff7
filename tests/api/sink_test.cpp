// Receiver(Sink&): a pipeline receiving into its own code instead of a directory.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <mutex>

#include "api_fixture.hpp"

using namespace api_test;

namespace {

// Reassembles every file in memory and counts the callbacks.
class CollectingSink : public sluice::Sink {
public:
    void write(const sluice::SinkEntry& e, uint64_t offset, std::span<const std::byte> data) override {
        std::lock_guard lk(mu);
        std::string& f = files[e.path];
        if (f.size() < offset + data.size()) f.resize(offset + data.size());
        std::memcpy(f.data() + offset, data.data(), data.size());
        bytes += data.size();
    }
    void entry_done(const sluice::SinkEntry& e) override {
        std::lock_guard lk(mu);
        ++done[e.path];
        files.try_emplace(e.path);
        sizes[e.path] = e.size;
    }
    std::mutex mu;
    std::map<std::string, std::string> files;
    std::map<std::string, int> done;
    std::map<std::string, uint64_t> sizes;
    uint64_t bytes = 0;
};

class ThrowingSink : public sluice::Sink {
public:
    void write(const sluice::SinkEntry&, uint64_t offset, std::span<const std::byte>) override {
        if (offset > 0) throw std::runtime_error("quota exceeded in the pipeline");
    }
};

} // namespace

TEST_CASE("a sink receives every file of a tree, verified, with one entry_done each") {
    TempDir src;
    const std::string big = random_bytes(3 * 256 * 1024 + 123, 1); // several blocks, odd tail
    write_file(src.path / "t" / "big.bin", big);
    write_file(src.path / "t" / "small.txt", "hello sink");
    write_file(src.path / "t" / "sub" / "empty", "");
    CollectingSink sink;
    sluice::Receiver rx(sink, loopback_recv());
    Waiter w(rx);
    sluice::Stats sent = sluice::send({(src.path / "t").string()}, sluice::parse_url(rx.url()), quick_send());
    sluice::Stats got = w.get();
    CHECK(sent.bytes == big.size() + 10);
    CHECK(got.data_path == "sink");
    CHECK(sink.files["t/big.bin"] == big);
    CHECK(sink.files["t/small.txt"] == "hello sink");
    CHECK(sink.files.count("t/sub/empty") == 1);
    CHECK(sink.done["t/big.bin"] == 1);
    CHECK(sink.done["t/small.txt"] == 1);
    CHECK(sink.done["t/sub/empty"] == 1);
    CHECK(sink.bytes == big.size() + 10);
}

TEST_CASE("a sink that throws fails the transfer on both sides with its message") {
    TempDir src;
    write_file(src.path / "f.bin", random_bytes(2 * 256 * 1024, 2));
    ThrowingSink sink;
    sluice::Receiver rx(sink, loopback_recv());
    Waiter w(rx);
    auto o = quick_send(1);
    try {
        sluice::send({(src.path / "f.bin").string()}, sluice::parse_url(rx.url()), o);
        FAIL("send succeeded");
    } catch (const sluice::Error& e) {
        CHECK(std::string(e.what()).find("quota exceeded in the pipeline") != std::string::npos);
        CHECK(e.cause() == sluice::ErrorCause::peer_aborted); // the receiver's reason, not a local fault
    }
    try {
        w.get();
        FAIL("receiver succeeded");
    } catch (const sluice::Error& e) {
        CHECK(e.code() == sluice::ErrorCode::destination);
        CHECK(std::string(e.what()).find("the sink failed: quota exceeded") != std::string::npos);
        CHECK(e.cause() == sluice::ErrorCause::none);
    }
}
