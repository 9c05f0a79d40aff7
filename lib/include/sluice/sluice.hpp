#pragma once
// libsluice: move files and trees between hosts over several TCP streams, from the page cache
// to the socket without copies through user space.
//
//   sluice::Receiver rx("/data/in", {});          // listens; rx.url() is what a sender needs
//   ... on another host:
//   sluice::Stats s = sluice::send({"/data/out"}, sluice::parse_url(url), {});
//   ... back on the receiver:
//   sluice::Stats r = rx.wait();                   // returns once the transfer is verified
//
// Errors are thrown as sluice::Error (error.hpp) with a code and a message naming the path,
// host or value and the reason.
#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/error.hpp"
#include "sluice/progress.hpp"
#include "sluice/stats.hpp"
#include "sluice/url.hpp"

namespace sluice {

enum class SendPath { splice, sendfile, read_send };
enum class RecvPath { recv_write, splice, direct, null_sink };
const char* send_path_name(SendPath p);
const char* recv_path_name(RecvPath p);
SendPath parse_send_path(std::string_view name);
RecvPath parse_recv_path(std::string_view name);

// Called with one human-readable line: warnings (skipped entries) and, when verbose, the
// paths chosen. May be called from any of the transfer's threads, never concurrently.
using LogFn = std::function<void(std::string_view line)>;

inline constexpr unsigned kDefaultStreams = 4;
inline constexpr uint64_t kDefaultBlockSize = 8ull << 20;

struct SendOptions {
    unsigned streams = kDefaultStreams;
    uint64_t block_size = kDefaultBlockSize;
    uint64_t rate_limit = 0;          // bytes per second over all streams; 0 = unlimited
    SendPath path = SendPath::splice;
    int connect_timeout_ms = 10000;
    int idle_timeout_ms = 60000;      // a peer silent for this long fails the transfer
    bool verbose = false;
    LogFn log;                        // warnings and verbose lines; default: dropped
    Progress* progress = nullptr;     // optional counters to poll
    const std::atomic<bool>* cancel = nullptr; // set to true from any thread to stop
};

// Sends files, directories (recursively, relative to their parent) and symlinks to a
// receiver. Returns once the receiver has verified everything; throws otherwise.
Stats send(const std::vector<std::string>& paths, const Endpoint& to, const SendOptions& options);

struct RecvOptions {
    std::string bind_address;         // empty: all addresses
    std::string advertise_host;       // host put into url(); empty: this host's primary address
    uint16_t port = 0;                // 0: the kernel picks one
    std::string token;                // empty: a random one
    RecvPath path = RecvPath::direct;
    bool sync = false;                // fsync files and directories before reporting success
    bool verify = false;              // re-read each file from disk (O_DIRECT) and check every block before renaming it
    uint64_t max_files = 10'000'000;
    int idle_timeout_ms = 60000;
    bool verbose = false;
    LogFn log;
    Progress* progress = nullptr;
};

class Receiver {
public:
    // Validates the directory and starts listening; throws on a bad directory or port.
    Receiver(const std::filesystem::path& dir, RecvOptions options);
    ~Receiver();
    Receiver(const Receiver&) = delete;
    Receiver& operator=(const Receiver&) = delete;

    std::string url() const;
    uint16_t port() const;
    // Serves one transfer to completion. Throws if it failed; nothing incomplete is left
    // under a final name.
    Stats wait();
    // Makes wait() return with a cancelled Error; safe from any thread.
    void cancel();

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

} // namespace sluice
