// Receives one transfer into a directory and prints its stats; the URL to give the sender is
// printed first. Build: c++ -std=c++20 receive_once.cpp $(pkg-config --cflags --libs sluice)
// Usage: receive_once DIR [PORT]
#include <sluice/sluice.hpp>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s DIR [PORT]\n", argv[0]);
        return 2;
    }
    try {
        sluice::RecvOptions opts;
        opts.bind_address = "127.0.0.1";
        if (argc > 2) opts.port = static_cast<uint16_t>(std::atoi(argv[2]));
        sluice::Receiver rx(argv[1], opts); // listening from here on
        std::printf("%s\n", rx.url().c_str());
        std::fflush(stdout);
        sluice::Stats s = rx.wait(); // returns once every file is verified and in place
        std::printf("%s\n", s.to_json().c_str());
        return 0;
    } catch (const sluice::Error& e) {
        std::fprintf(stderr, "receive failed (%s): %s\n", sluice::error_code_name(e.code()), e.what());
        return 1;
    }
}
