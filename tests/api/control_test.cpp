// Cancelling and observing a transfer from other threads.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>

#include "api_fixture.hpp"

using namespace api_test;

TEST_CASE("cancel from another thread stops a send with a cancelled error") {
    TempDir src, dst;
    write_file(src.path / "f.bin", random_bytes(64 << 20, 6));
    sluice::Receiver rx(dst.path, loopback_recv());
    Waiter w(rx);
    std::atomic<bool> cancel{false};
    sluice::Progress progress;
    auto o = quick_send(2);
    o.rate_limit = 8 << 20; // slow enough to be cancelled midway
    o.cancel = &cancel;
    o.progress = &progress;
    std::thread canceller([&] {
        while (progress.bytes_done.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        cancel = true;
    });
    try {
        sluice::send({(src.path / "f.bin").string()}, sluice::parse_url(rx.url()), o);
        FAIL("send finished despite cancel");
    } catch (const sluice::Error& e) {
        CHECK(e.code() == sluice::ErrorCode::cancelled);
    }
    canceller.join();
    CHECK_THROWS_AS(w.get(), sluice::Error);
    CHECK_FALSE(fs::exists(dst.path / "f.bin")); // nothing incomplete under its final name
}

TEST_CASE("Receiver::cancel makes wait() return with a cancelled error") {
    TempDir dst;
    sluice::Receiver rx(dst.path, loopback_recv());
    std::thread t([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        rx.cancel();
    });
    try {
        rx.wait();
        FAIL("wait returned");
    } catch (const sluice::Error& e) {
        CHECK(e.code() == sluice::ErrorCode::cancelled);
    }
    t.join();
}
