// Receives one transfer into a callback sink that counts bytes per file instead of writing a
// directory, then prints the counts. Build:
//   c++ -std=c++20 count_sink.cpp $(pkg-config --cflags --libs sluice) -pthread
// Usage: count_sink [PORT]      (the URL to give the sender is printed first)
#include <sluice/sluice.hpp>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

// Called from several data-stream threads at once: the map is guarded.
class CountingSink : public sluice::Sink {
public:
    void write(const sluice::SinkEntry& e, uint64_t, std::span<const std::byte> data) override {
        std::lock_guard lk(mu_);
        bytes_[e.path] += data.size();
    }
    void entry_done(const sluice::SinkEntry& e) override {
        std::lock_guard lk(mu_);
        std::printf("%s %llu bytes\n", e.path.c_str(), static_cast<unsigned long long>(bytes_[e.path]));
    }

private:
    std::mutex mu_;
    std::map<std::string, uint64_t> bytes_;
};

int main(int argc, char** argv) {
    try {
        CountingSink sink;
        sluice::RecvOptions opts;
        opts.bind_address = "127.0.0.1";
        if (argc > 1) opts.port = static_cast<uint16_t>(std::atoi(argv[1]));
        sluice::Receiver rx(sink, opts); // the sink must outlive the receiver
        std::printf("%s\n", rx.url().c_str());
        std::fflush(stdout);
        sluice::Stats s = rx.wait();
        std::printf("total %llu bytes in %llu files\n", static_cast<unsigned long long>(s.bytes_sent),
                    static_cast<unsigned long long>(s.files));
        return 0;
    } catch (const sluice::Error& e) {
        std::fprintf(stderr, "receive failed (%s): %s\n", sluice::error_code_name(e.code()), e.what());
        return 1;
    }
}
