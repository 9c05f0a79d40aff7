#include "serve/engine/cold_reads.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "core/io/unique_fd.hpp"
#include "serve/engine/upload_file.hpp"

#ifndef __NR_cachestat
#define __NR_cachestat 451 // the same on x86_64 and arm64 (the generic table)
#endif

namespace sluice::serve {

namespace {

struct CachestatRange {
    uint64_t off, len;
};
struct Cachestat {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

long cachestat(int fd, uint64_t off, uint64_t len, Cachestat& out) {
    CachestatRange r{off, len};
    return ::syscall(__NR_cachestat, fd, &r, &out, 0);
}

constexpr size_t kScratch = 1 << 20;

} // namespace

int probe_cachestat() {
    UniqueFd fd(::memfd_create("sluice-cachestat-probe", MFD_CLOEXEC));
    if (!fd) return errno;
    Cachestat cs{};
    return cachestat(fd.get(), 0, 4096, cs) == 0 ? 0 : errno;
}

bool range_cached(int fd, uint64_t offset, uint64_t length) {
    static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    Cachestat cs{};
    if (length == 0) return true;
    if (cachestat(fd, offset, length, cs) != 0) return false;
    const uint64_t pages = (offset + length + page - 1) / page - offset / page;
    return cs.nr_cache >= pages;
}

int probe_null_sink() {
    UniqueFd src(::memfd_create("sluice-null-sink-probe", MFD_CLOEXEC));
    UniqueFd null(::open("/dev/null", O_WRONLY | O_CLOEXEC));
    if (!src || !null) return errno;
    const char byte = 0;
    if (::pwrite(src.get(), &byte, 1, 0) != 1) return errno;
    off_t off = 0;
    return ::sendfile(null.get(), src.get(), &off, 1) == 1 ? 0 : errno;
}

ColdReads::ColdReads(unsigned threads, bool null_sink) {
    if (null_sink) null_.reset(::open("/dev/null", O_WRONLY | O_CLOEXEC));
    for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

ColdReads::~ColdReads() {
    {
        std::lock_guard lock(mu_);
        ending_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
}

ColdReads::Reading* ColdReads::overlapping(const FileKey& file, uint64_t offset, uint64_t length) {
    for (Reading& r : reading_)
        if (r.file == file && offset < r.end && r.offset < offset + length) return &r;
    return nullptr;
}

void ColdReads::register_read(ColdJob& job) {
    job.id = next_id_++;
    reading_.push_back(Reading{job.id, job.file, job.offset, job.offset + job.length, {}});
    reading_count_.store(reading_.size(), std::memory_order_release);
}

void ColdReads::read_ahead(ColdJob job) {
    {
        std::lock_guard lock(mu_);
        if (overlapping(job.file, job.offset, job.length)) return;
        register_read(job);
        queue_.push_back(std::move(job));
    }
    cv_.notify_one();
}

void ColdReads::submit(ColdJob job) {
    {
        std::lock_guard lock(mu_);
        if (!job.commit) register_read(job);
        queue_.push_back(std::move(job));
    }
    cv_.notify_one();
}

bool ColdReads::reading_joined(const FileKey& file, uint64_t offset, uint64_t length, WakeQueue* back, uint32_t conn,
                               uint32_t gen) {
    if (reading_count_.load(std::memory_order_acquire) == 0) return false; // the warm path: no lock
    std::lock_guard lock(mu_);
    Reading* r = overlapping(file, offset, length);
    if (r) r->waiters.push_back(Waiter{back, conn, gen});
    return r != nullptr;
}

bool ColdReads::reading(const FileKey& file, uint64_t offset, uint64_t length) {
    if (reading_count_.load(std::memory_order_acquire) == 0) return false;
    std::lock_guard lock(mu_);
    return overlapping(file, offset, length) != nullptr;
}

void ColdReads::ended(const ColdJob& job, int err) {
    std::vector<Waiter> waiters;
    {
        std::lock_guard lock(mu_);
        for (auto it = reading_.begin(); it != reading_.end(); ++it) {
            if (it->id != job.id) continue;
            waiters = std::move(it->waiters);
            reading_.erase(it);
            break;
        }
        reading_count_.store(reading_.size(), std::memory_order_release);
    }
    if (job.back) job.back->push(ColdDone{job.conn, job.gen, err});
    // A joiner checks its own range again when woken: this read's error is not its.
    for (const Waiter& w : waiters) w.back->push(ColdDone{w.conn, w.gen, 0});
}

void ColdReads::run() {
    std::unique_ptr<char[]> scratch(null_ ? nullptr : new char[kScratch]);
    for (;;) {
        ColdJob job;
        bool ending;
        {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [&] { return ending_ || !queue_.empty(); });
            if (queue_.empty()) return; // ending, and nothing left that a connection waits for
            job = std::move(queue_.front());
            queue_.pop_front();
            ending = ending_;
        }
        if (ending && !job.back && !job.commit) { // a read ahead for a server that has stopped
            ended(job, 0);
            continue;
        }
        int err = 0;
        if (job.commit) {
            // The connection stays until it is woken: the UploadFile outlives this call.
            job.commit->commit_status = job.commit->commit(true);
            job.back->push(ColdDone{job.conn, job.gen, 0});
            continue;
        }
        // Reading the range brings it into the page cache, and the ring thread sends the
        // cached pages with sendfile. The fd reads no further ahead than asked
        // (POSIX_FADV_RANDOM where this pool runs): the whole range is asked for at once so that
        // the disk gets it as one batch, then waited for: by sendfile into /dev/null, which
        // takes references to the pages and drops them (no copy), else by pread into a scratch
        // buffer that is thrown away.
        ::posix_fadvise(job.fd, static_cast<off_t>(job.offset), static_cast<off_t>(job.length), POSIX_FADV_WILLNEED);
        for (uint64_t off = job.offset, end = job.offset + job.length; off < end;) {
            const size_t want = static_cast<size_t>(std::min<uint64_t>(kScratch, end - off));
            ssize_t n;
            if (null_) {
                off_t o = static_cast<off_t>(off);
                n = ::sendfile(null_.get(), job.fd, &o, want);
            } else {
                n = ::pread(job.fd, scratch.get(), want, static_cast<off_t>(off));
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                err = errno;
                break;
            }
            if (n == 0) break; // the file shrank: sendfile will find out and close
            off += static_cast<uint64_t>(n);
        }
        ended(job, err);
    }
}

} // namespace sluice::serve
