// Sends files or directories to a running `sluice recv`, printing progress once a second.
// Build against the installed library:  c++ -std=c++20 send_tree.cpp $(pkg-config --cflags --libs sluice)
// Usage: send_tree sluice://HOST:PORT/?token=... PATH...
#include <sluice/sluice.hpp>

#include <chrono>
#include <cstdio>
#include <future>

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s URL PATH...\n", argv[0]);
        return 2;
    }
    try {
        sluice::Endpoint to = sluice::parse_url(argv[1]);
        std::vector<std::string> paths(argv + 2, argv + argc);
        sluice::Progress progress;
        sluice::SendOptions opts;
        opts.streams = 4;
        opts.progress = &progress;
        // send() blocks until the receiver has verified everything; run it on another thread
        // and poll the counters from this one.
        auto done = std::async(std::launch::async, [&] { return sluice::send(paths, to, opts); });
        while (done.wait_for(std::chrono::seconds(1)) != std::future_status::ready)
            std::printf("%llu / %llu bytes\n", (unsigned long long)progress.bytes_done.load(),
                        (unsigned long long)progress.bytes_total.load());
        sluice::Stats s = done.get();
        std::printf("%s\n", s.to_json().c_str());
        return 0;
    } catch (const sluice::Error& e) {
        std::fprintf(stderr, "send failed (%s): %s\n", sluice::error_code_name(e.code()), e.what());
        return 1;
    }
}
