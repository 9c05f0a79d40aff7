#pragma once
// Open files kept for a second (nginx's open_file_cache): a hit skips openat2, fstat and
// close, half the system calls of a small response. Entries are opened beneath DIR like any
// other (doc_root.cpp) and re-opened once stale, so a file replaced by a rename is served as
// the old version for at most kValidMs (or not at all when an upload of this server replaced
// it: drop_if_changed). Bounded: when full, the table is emptied; responses
// in flight keep their file through their own reference.
#include <sys/stat.h>

#include <memory>
#include <string>
#include <unordered_map>

#include "core/io/unique_fd.hpp"

namespace sluice::serve {

struct CachedFile {
    UniqueFd fd;
    struct stat st {};
    char etag[64] = {};
    char last_modified[32] = {};
};

class FileCache {
public:
    static constexpr int64_t kValidMs = 1000;
    static constexpr size_t kMaxEntries = 4096;

    // no_readahead: the files are opened with POSIX_FADV_RANDOM, so that nothing but the
    // cold-read pool starts reads from the disk on them (sendfile on a page the kernel's
    // readahead is still filling would wait for the disk on a ring thread; cold_reads.hpp).
    FileCache(int root_fd, bool no_readahead) : root_(root_fd), no_readahead_(no_readahead) {}
    // A regular file: returns it. A directory: returns nullptr and its fd in *dir. Otherwise
    // nullptr and *status (403, 404, 500).
    std::shared_ptr<const CachedFile> get(const std::string& rel, int64_t now_ms, UniqueFd* dir, int* status);
    // An upload was stored since the last call (any thread's): forget every entry.
    void drop_if_changed(uint64_t upload_gen) {
        if (upload_gen == seen_gen_) return;
        seen_gen_ = upload_gen;
        slots_.clear();
    }

private:
    struct Slot {
        std::shared_ptr<const CachedFile> file;
        int64_t expires_ms;
    };
    int root_;
    bool no_readahead_;
    uint64_t seen_gen_ = 0;
    std::unordered_map<std::string, Slot> slots_;
};

} // namespace sluice::serve
