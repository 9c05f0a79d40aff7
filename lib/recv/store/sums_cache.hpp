#pragma once
// The receiver's cache of block sums (issue 17, docs/protocol.md "Updates by changed blocks",
// docs/guarantees.md "The block-sums cache"). An update hashes the old version of a file
// before the sender can compare; for a 4 GiB file that is a whole read of it on the receiver.
// A file this receiver wrote has its blocks' XXH3 at hand as it completes (each received block
// is checked against its checksum; reused blocks have the old version's sums), so they are
// kept in a file of their own, outside the destination tree, and the next update of that file
// offers them without reading it.
//
// Trust: an entry is used only when the file's device, inode, size, mtime AND ctime (ns) are
// those recorded when it was stored, and the block size is the same. ctime cannot be set from
// user space, and every change of content, size, mode, owner, attribute or link count sets it;
// the entry's ctime is read after everything this receiver did to the file (stat), and on a
// file system with multigrain timestamps (ext4, XFS, btrfs, tmpfs; Linux 6.13+) a change after
// such a read always gets a later ctime, even within the same clock tick. Elsewhere nothing is
// stored (coarse ctime: a write in the same tick would go unseen). Entries carry their own
// XXH3; a damaged, truncated, foreign-owned or otherwise unexpected entry is ignored (the old
// version is hashed, as without a cache).
#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "recv/store/dest_tree.hpp"
#include "recv/store/file_table.hpp"

namespace sluice {

class SumsCache {
public:
    // dir empty: off (nothing loaded or stored).
    explicit SumsCache(std::string dir) : dir_(std::move(dir)) {}
    bool enabled() const { return !dir_.empty(); }
    const std::string& dir() const { return dir_; }

    // Files with fewer blocks are neither cached nor looked up: hashing them costs little, and
    // an entry per small file would grow the cache for nothing.
    static constexpr uint64_t kMinBlocks = 16;
    // Entries kept at most; the oldest are removed beyond it (checked when storing).
    static constexpr size_t kMaxEntries = 4096;

    // The sums stored for the file st describes, if its entry is there and matches st and
    // block_size exactly (see above); nothing otherwise.
    std::optional<std::vector<uint64_t>> load(const struct stat& st, uint64_t block_size) const;

    // The sender's block size (UPDATE_PARAMS), before the first file is registered.
    void set_block_size(uint64_t b) { block_size_.store(b); }
    uint64_t block_size() const { return block_size_.load(); }
    // Whether a file of this size is cached, at the block size set.
    bool wants(uint64_t size) const;

    // Any thread, as f completes (before FileTable::set_complete clears f.sums): keeps f's
    // sums for flush() if f.sums holds one checksum for every block.
    void keep(const RecvFile& f);

    // At the end of the transfer, after every change this receiver makes to the files (owners,
    // attributes, links, --delete): stores an entry for each kept file still as it was
    // written (same size and mtime). Returns the entries stored; `note` says why none could be
    // (a file system without fine-grained ctime, a cache directory not safely ours), once.
    uint64_t flush(const DestTree& tree, const std::function<void()>& working, std::string& note);

    // The file name of the entry of (dev, ino) and its bytes, for tests and docs: "SLSUMS01",
    // dev, ino, size, mtime_ns, ctime_ns, block_size, count (u64 each, little-endian), the
    // sums, then XXH3-64 of all that.
    static std::string entry_name(uint64_t dev, uint64_t ino);
    static std::vector<unsigned char> encode(const struct stat& st, uint64_t block_size, const std::vector<uint64_t>& sums);

private:
    struct Kept {
        std::string parent, name;
        uint64_t size = 0;
        int64_t mtime_ns = 0;
        uint64_t block_size = 0;
        std::vector<uint64_t> sums;
    };
    // The cache directory, created 0700 if missing; empty if it is not a directory owned by
    // us and writable by us alone (another user could plant entries there).
    UniqueFd open_dir(bool create, std::string* why) const;
    void prune(int dir) const;

    std::string dir_;
    std::atomic<uint64_t> block_size_{0};
    std::mutex mu_;
    std::vector<Kept> kept_;
};

// Whether this file system gives every change after a stat a later ctime (multigrain
// timestamps): ext4, XFS, btrfs, tmpfs on Linux 6.13 or later.
bool fine_grained_ctime(int fd);

} // namespace sluice
