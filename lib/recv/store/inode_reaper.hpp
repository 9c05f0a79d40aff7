#pragma once
// The old versions of files an update replaced (issue 17). The last reference to an unlinked
// inode frees its blocks, and on ext4 mounted with -o discard (this VM's root) that discards
// them and waits for the device: 10-20 ms per file here, 61% of the receiver's off-CPU time in
// a 1% update, all of it inside renameat on the data stream that finished the file. So
// finish_file keeps the old inode open (O_PATH) across the rename and hands it here: the
// closes run on threads of their own, several at once, and the streams go on receiving.
// At most kMaxQueued wait; past that the caller closes its own (slower, never unbounded).
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "core/io/unique_fd.hpp"

namespace sluice {

class InodeReaper {
public:
    InodeReaper() = default;
    InodeReaper(const InodeReaper&) = delete;
    InodeReaper& operator=(const InodeReaper&) = delete;
    // Closes what is still queued (waiting for the device) and joins the threads.
    ~InodeReaper();

    void retire(UniqueFd old);
    uint64_t retired() const { return retired_; }

    static constexpr size_t kThreads = 4;
    static constexpr size_t kMaxQueued = 256;

private:
    void run();

    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<UniqueFd> queue_;
    std::vector<std::thread> threads_;
    size_t idle_ = 0;
    bool stop_ = false;
    uint64_t retired_ = 0; // under mu_
};

} // namespace sluice
