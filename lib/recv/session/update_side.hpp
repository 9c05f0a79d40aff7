#pragma once
// Changed-block updates, the receiver's half (docs/protocol.md, "Updates by changed blocks").
// A file whose final name already holds another version: its blocks' XXH3 go to the sender
// (BLOCK_SUMS, before the page's ack); the sender answers with the ranges that are the same
// (REUSE), which are copied from the old version into the temporary file (a reflink where the
// file system shares extents, otherwise a copy) while the other blocks arrive as usual.
// The old version stays untouched under its name until the new one is complete and verified
// and renamed over it, so a reader never sees a half-updated file.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/io/aligned_buffer.hpp"
#include "core/wire/protocol.hpp"
#include "recv/store/dest_tree.hpp"
#include "recv/store/file_table.hpp"
#include "recv/store/sums_cache.hpp"

namespace sluice {

class UpdateSide {
public:
    // The receiver's block-sums cache: offer() takes an old version's sums from it when its
    // entry matches, and files completed here (apply) leave theirs in it.
    explicit UpdateSide(SumsCache& cache) : cache_(cache) {}

    // UPDATE_PARAMS: once, before the first page.
    void set_params(const wire::UpdateParams& p);
    bool active() const { return params_.block_size != 0; }
    // --checksum at the sender: size and mtime alone do not make a file complete.
    bool checksum() const { return params_.checksum; }

    // f (registered, nothing resumed) and its old version under the final name: the sums to
    // send, or nothing (no old version, not a regular file, empty, too many blocks for one
    // frame). `working` runs between blocks (the hash of a large file takes a while). The
    // sums come from the cache when it holds them for this very inode (not with --checksum,
    // which asks for the content to be read).
    std::optional<wire::BlockSums> offer(const DestTree& tree, const RecvFile& f, const std::function<void()>& working);

    struct Applied {
        uint64_t bytes = 0;    // reused
        bool complete = false; // the file is complete and in place (marked in the table)
    };
    // REUSE: checks the ranges against what was offered, copies them into f's temporary
    // file and marks them verified; finishes f when that completes it. A file reused whole
    // at the same size keeps its old inode: only its mode and mtime are set.
    Applied apply(const DestTree& tree, FileTable& files, const wire::Reuse& r, bool sync);

    // Files of one block up to this size are not offered (sent whole; offer()).
    static constexpr uint64_t kWholeBytes = 1u << 20;

    // The slower path taken (no reflink: the unchanged blocks were copied), for the stats.
    const std::string& fallback() const { return fallback_; }
    // Old versions offered with sums from the cache, and hashed.
    uint64_t sums_cached() const { return sums_cached_; }
    uint64_t sums_hashed() const { return sums_hashed_; }

private:
    struct Old {
        uint64_t size = 0;
        int64_t mtime_ns = 0;
        uint64_t ino = 0;
        std::vector<uint64_t> sums; // kept for a file whose sums go to the cache (keep_sums)
    };
    // Records the sums of the reused blocks in [offset, offset + length) for the cache.
    static void record_reused(FileTable& files, RecvFile& f, const Old& old, uint64_t offset, uint64_t length, uint64_t block);
    uint64_t copy_range(int from, int to, int to_direct, uint64_t offset, uint64_t length, const std::string& path);
    static void write_all(int fd, const unsigned char* p, size_t n, uint64_t at, const std::string& path);
    static constexpr size_t kCopyBytes = 4u << 20; // one read and one O_DIRECT write per step

    SumsCache& cache_;
    wire::UpdateParams params_;
    uint64_t sums_cached_ = 0, sums_hashed_ = 0;
    std::unordered_map<uint64_t, Old> offered_; // file id -> the version whose sums were sent
    std::string fallback_;
    bool mapped_refused_ = false;
    bool clone_refused_ = false;
    std::optional<AlignedBuffer> copy_buf_; // allocated at the first copy, kept
};

} // namespace sluice
