#pragma once
// Helpers for in-process transfers over loopback through the public API only.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "sluice/sluice.hpp"

namespace api_test {

namespace fs = std::filesystem;

// A fresh directory under /tmp, removed at scope exit.
struct TempDir {
    fs::path path;
    TempDir() {
        char tmpl[] = "/tmp/sluice-api-XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

inline std::string random_bytes(size_t n, unsigned seed) {
    std::mt19937_64 rng(seed);
    std::string s(n, '\0');
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = rng();
        for (size_t k = 0; k < 8 && i + k < n; ++k) s[i + k] = static_cast<char>(v >> (8 * k));
    }
    return s;
}

inline void write_file(const fs::path& p, const std::string& data) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << data;
}

inline std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

inline sluice::RecvOptions loopback_recv() {
    sluice::RecvOptions o;
    o.bind_address = "127.0.0.1";
    o.idle_timeout_ms = 20000;
    return o;
}

inline sluice::SendOptions quick_send(unsigned streams = 3) {
    sluice::SendOptions o;
    o.streams = streams;
    o.block_size = 256 * 1024;
    o.idle_timeout_ms = 20000;
    return o;
}

// Runs rx.wait() on its own thread; get() returns its stats or rethrows its error.
class Waiter {
public:
    explicit Waiter(sluice::Receiver& rx)
        : thread_([this, &rx] {
              try {
                  stats_ = rx.wait();
              } catch (...) {
                  error_ = std::current_exception();
              }
          }) {}
    ~Waiter() {
        if (thread_.joinable()) thread_.join();
    }
    sluice::Stats get() {
        thread_.join();
        if (error_) std::rethrow_exception(error_);
        return stats_;
    }

private:
    sluice::Stats stats_;
    std::exception_ptr error_;
    std::thread thread_;
};

} // namespace api_test
