#pragma once
// Pipe mode: telling a producer that died from one that finished. Both close the pipe, and
// the exit status belongs to the shell, so the sender watches the processes holding its
// input pipe's write end through the kernel's process-events connector (needs CAP_NET_ADMIN)
// and learns how each of them exited.
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/io/unique_fd.hpp"

namespace sluice {

class ProducerWatch {
public:
    // Starts watching when fd is a pipe; otherwise there is no producer to watch.
    explicit ProducerWatch(int fd);
    ~ProducerWatch();
    ProducerWatch(const ProducerWatch&) = delete;
    ProducerWatch& operator=(const ProducerWatch&) = delete;

    // After end of input: waits up to wait_ms for the writers to exit and returns why the
    // byte stream must be treated as cut short (a writer killed by a signal or exiting non-zero).
    std::optional<std::string> failure(int wait_ms);
    // Empty when watching (or when there is nothing to watch); otherwise why a producer's
    // death cannot be told from the end of its data.
    const std::string& unavailable() const { return unavailable_; }
    size_t writers() const { return writers_.size(); }

private:
    bool subscribe();
    void find_writers(int fd);
    void run();

    std::string unavailable_;
    UniqueFd netlink_;
    std::map<int, std::string> writers_; // pid -> command name
    std::mutex mu_;
    std::condition_variable cv_;
    std::map<int, int> exits_; // pid -> wait status, for writers (and, while scanning, anyone)
    bool scanning_ = true;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

} // namespace sluice
