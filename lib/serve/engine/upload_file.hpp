#pragma once
// One upload's file: written under a temporary name in its directory beneath DIR, renamed
// over the name the request gave only once the whole body has arrived. Confined as reads are
// and stricter: the parent is opened with openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS (no
// symlink is followed at all, even one that stays inside DIR), missing directories are made
// one component at a time with mkdirat + openat O_NOFOLLOW, the temporary file is created
// O_EXCL | O_NOFOLLOW, and the rename replaces the final name itself, never what it points to.
// Destroyed before commit() succeeded, it removes its temporary file: a client that goes away
// mid-body leaves nothing behind.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/io/unique_fd.hpp"
#include "serve/http/chunked.hpp"

namespace sluice::serve {

// The prefix of temporary names; a request naming such a file is refused (403).
inline constexpr char kUploadTempPrefix[] = ".sluice-upload.";

class UploadFile {
public:
    // rel: "a/b/c" from the request target (no '.', '..' or empty segments); length: the
    // Content-Length (0 when chunked: no space is set aside in advance). *status: 0, or
    // 403 (a symlink or a non-directory on the way, a reserved name), 409 (a directory of that
    // name), 507 (no space), 500. `open_count` is decremented when the UploadFile goes.
    static std::unique_ptr<UploadFile> open(int root_fd, const std::string& rel, uint64_t length, unsigned thread,
                                            std::atomic<unsigned>* open_count, int* status);
    ~UploadFile();
    UploadFile(const UploadFile&) = delete;
    UploadFile& operator=(const UploadFile&) = delete;

    // Appends body bytes; 0, or the status to answer (507 for ENOSPC/EDQUOT, 500).
    int write(const char* data, size_t len);
    // The rename into place, with fsync of the file before and of its directory (and any
    // directory made for it) after when `durable`. 0, or the status to answer. May block on
    // the disk: with durable it runs on the pool, never on a ring thread.
    int commit(bool durable);

    uint64_t left = 0;      // body bytes still owed (chunked: 1 until the last chunk is in)
    bool is_chunked = false; // the body is framed in chunks: `chunks` finds its end
    http::ChunkedDecoder chunks;
    uint64_t received = 0;
    bool created = false;   // the final name did not exist before (201, else 200)
    bool committing = false; // commit() runs on the pool
    int commit_status = 0;   // its result, read by the ring thread once woken
    int64_t total_deadline_ms = 0; // the whole body by then (--upload-timeout)

private:
    UploadFile() = default;
    int root_ = -1;
    UniqueFd parent_; // empty: the parent is DIR itself (root_)
    std::vector<UniqueFd> made_dirs_parents_; // directories a mkdirat changed (fsynced when durable)
    UniqueFd file_;
    std::string temp_, leaf_;
    bool committed_ = false;
    std::atomic<unsigned>* open_count_ = nullptr;
    int dir() const { return parent_ ? parent_.get() : root_; }
};

} // namespace sluice::serve
