#pragma once
// Small files of the direct receive path written with O_DIRECT (issue 19).
//
// Why: a file under the direct path's 1 MiB threshold used to be written through the page cache:
// a second copy of every byte into freshly allocated pages, their write-back, and the window that
// drops them again (writeback_window.hpp). At the WDT report's minor set (files of 1-400 KiB)
// that copy was the receiver's largest single cost. A file that arrives whole in one block now
// goes into an unnamed inode (O_TMPFILE) and its whole pages are written with O_DIRECT from the
// buffer they were received into: the disk reads them there.
//
// How: the bytes past the last whole page are written first, through the page cache, while the
// fd is still a buffered one; that also sets the file's size. Then O_DIRECT is turned on
// (fcntl F_SETFL), the pages are allocated (fallocate) and the whole pages are queued on the
// stream's ring. Padding the last page and cutting the file back instead would make ext4 read
// that page from the disk to zero its end (ext4_block_truncate_page), a synchronous read per
// file. The stream does not wait for the write before it takes the next file: the fd is kept
// here until its block retires.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

#include "core/io/unique_fd.hpp"

namespace sluice {

struct RecvFile;

// Writes all n bytes at offset (EINTR and short writes retried). Throws Error (destination)
// naming path.
void pwrite_whole(int fd, const unsigned char* p, size_t n, uint64_t offset, const std::string& path);

class SmallDirectFiles {
public:
    // Below this size a whole file goes this way (the direct path writes larger ones with O_DIRECT
    // by its temporary name).
    static constexpr uint64_t kMaxBytes = 1 << 20;

    bool enabled() const noexcept { return enabled_; }

    // f is open as an unnamed file (open_unnamed_file), not O_DIRECT, as fd.
    // f's `size` bytes are at data (page-aligned). Writes the part past the last whole page
    // through fd, then turns O_DIRECT on. Returns how many bytes from data the caller writes with
    // O_DIRECT: the whole pages, or 0 when there are none or O_DIRECT is refused (then everything
    // was written here, and the stream stops trying: said in fallback()).
    size_t write_tail(const RecvFile& f, int fd, const unsigned char* data, size_t size);

    // The fd of a file whose O_DIRECT write is still in flight as the stream moves on; closed by
    // let_go() once that file's block retires (files retire in the order they were kept).
    // Its last partial page stays cached (clean once written back, reclaimable): dropping it
    // through a write-back window per file cost 8% of the minor set's files/s and 15% more
    // CPU per GB (docs/benchmarks.md, "Issue 19 (h19g, session 13)").
    void keep(UniqueFd fd) { in_flight_.push_back(std::move(fd)); }
    void let_go() {
        if (!in_flight_.empty()) in_flight_.pop_front();
    }

    uint64_t files() const noexcept { return files_; }
    uint64_t bytes() const noexcept { return bytes_; }
    std::string fallback() const;

private:
    bool enabled_ = true;
    bool allocate_ = true; // fallocate before the write (no EOPNOTSUPP so far)
    std::string refused_; // why this stream went back to buffered small files
    uint64_t files_ = 0, bytes_ = 0;
    std::deque<UniqueFd> in_flight_;
};

} // namespace sluice
