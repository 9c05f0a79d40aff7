#include "serve/get/sum_pool.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "core/io/sys_error.hpp"

namespace sluice::serve {

namespace {

constexpr size_t kChunk = 1 << 20; // one scratch buffer per thread, whatever the block size

void hash_range(SumJob& j, unsigned char* buf) {
    XXH3_state_t* st = XXH3_createState();
    if (!st) {
        j.err = ENOMEM;
        return;
    }
    XXH3_64bits_reset(st);
    uint64_t off = j.offset;
    const uint64_t end = j.offset + j.length;
    while (off < end) {
        const size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, end - off));
        ssize_t n = ::pread(j.fd, buf, want, static_cast<off_t>(off));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            j.err = n < 0 ? errno : EIO; // 0: the file got shorter than the manifest says
            break;
        }
        XXH3_64bits_update(st, buf, static_cast<size_t>(n));
        off += static_cast<uint64_t>(n);
    }
    j.sum = XXH3_64bits_digest(st);
    XXH3_freeState(st);
}

} // namespace

void ReadsInFlight::remove(const FileKey& file, uint64_t offset, uint64_t length) {
    for (auto it = r_.begin(); it != r_.end(); ++it) {
        if (it->file == file && it->offset == offset && it->end == offset + length) {
            r_.erase(it); // one of equal ranges: either is the same to overlaps()
            return;
        }
    }
}

bool ReadsInFlight::overlaps(const FileKey& file, uint64_t offset, uint64_t length) const {
    for (const Range& r : r_)
        if (r.file == file && offset < r.end && r.offset < offset + length) return true;
    return false;
}

SumPool::SumPool(unsigned threads) {
    efd_.reset(::eventfd(0, EFD_CLOEXEC));
    if (!efd_) throw_errno(ErrorCode::internal, "eventfd for the get sessions' checksum pool");
    for (unsigned i = 0; i < std::max(1u, threads); ++i) threads_.emplace_back([this] { work(); });
}

SumPool::~SumPool() {
    {
        std::lock_guard lock(mu_);
        ending_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
}

void SumPool::push(const SumJob& j) {
    {
        std::lock_guard lock(mu_);
        todo_.push_back(j);
        reading_.add(j.file, j.offset, j.length);
        reading_count_.store(reading_.size(), std::memory_order_release);
    }
    cv_.notify_one();
}

bool SumPool::reading(const FileKey& file, uint64_t offset, uint64_t length) {
    if (reading_count_.load(std::memory_order_acquire) == 0) return false; // nothing read: no lock
    std::lock_guard lock(mu_);
    return reading_.overlaps(file, offset, length);
}

void SumPool::take(std::vector<SumJob>& out) {
    std::lock_guard lock(mu_);
    out.swap(done_);
    done_.clear();
}

void SumPool::post(uint64_t tag, std::function<void()> fn) {
    {
        std::lock_guard lock(mu_);
        tasks_.emplace_back(tag, std::move(fn));
    }
    cv_.notify_one();
}

void SumPool::take_tasks(std::vector<uint64_t>& out) {
    std::lock_guard lock(mu_);
    out.swap(tasks_done_);
    tasks_done_.clear();
}

void SumPool::work() {
    auto buf = std::make_unique<unsigned char[]>(kChunk);
    for (;;) {
        SumJob j;
        std::pair<uint64_t, std::function<void()>> task;
        {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [&] { return ending_ || !todo_.empty() || !tasks_.empty(); });
            if (ending_) return;
            if (!tasks_.empty()) {
                task = std::move(tasks_.front());
                tasks_.pop_front();
            } else {
                j = todo_.front();
                todo_.pop_front();
            }
        }
        if (task.second) {
            task.second();
            {
                std::lock_guard lock(mu_);
                tasks_done_.push_back(task.first);
            }
            uint64_t one = 1;
            [[maybe_unused]] ssize_t w = ::write(efd_.get(), &one, sizeof one);
            continue;
        }
        // The fds read here read no further ahead than asked (POSIX_FADV_RANDOM: a ring's
        // cachestat would count pages readahead is still filling, which no registry knows of):
        // the whole block is asked for at once, so the disk gets it as one batch.
        ::posix_fadvise(j.fd, static_cast<off_t>(j.offset), static_cast<off_t>(j.length), POSIX_FADV_WILLNEED);
        if (j.seal)
            j.err = j.seal->fill(j.fd, j.entry, j.offset, j.length, &j.sum);
        else
            hash_range(j, buf.get());
        {
            std::lock_guard lock(mu_);
            done_.push_back(j);
            reading_.remove(j.file, j.offset, j.length);
            reading_count_.store(reading_.size(), std::memory_order_release);
        }
        uint64_t one = 1;
        [[maybe_unused]] ssize_t w = ::write(efd_.get(), &one, sizeof one);
    }
}

} // namespace sluice::serve
