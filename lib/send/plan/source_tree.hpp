#pragma once
// What the sender reads: the paths given on the command line, checked before connecting,
// and walked depth-first into manifest entries (parents before children).
#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/wire/protocol.hpp"
#include "send/plan/sparse_extents.hpp"
#include "send/plan/tree_reader.hpp"

namespace sluice {

struct SourceRoot {
    std::string path; // as given
    std::string name; // its name under the destination directory
};

// How many holders a SourceFile has beyond the sender's record table (issue 19): queued and
// in-flight segments, an unanswered manifest page, a stream's open file. The table frees a
// record the receiver reports complete only when nothing holds it. A copy starts unheld.
struct Holders {
    mutable std::atomic<uint32_t> n{0};
    Holders() = default;
    Holders(const Holders&) noexcept {}
    Holders& operator=(const Holders&) noexcept { return *this; }
};

// A regular file the sender will read data from. Its address stays valid while anything holds
// it (hold / let_go), and for the whole transfer where no announce window frees records.
struct SourceFile {
    uint64_t file_id = 0;
    uint64_t size = 0;
    int64_t mtime_ns = 0;
    std::string path; // where to open it on this host
    std::string rel;  // its relative path in the transfer (for messages)
    // A range of a caller's open file (send(FdSource)): the data starts at `base` in the file,
    // which is reopened through /proc/self/fd/`fd` so the caller's file description is never
    // touched; its identity is its own size and mtime at listing.
    uint64_t base = 0;
    int fd = -1;
    uint64_t file_size = 0;
    int64_t file_mtime_ns = 0;
    // A sparse file: only these ranges are planned; the receiver leaves the rest as holes.
    bool sparse = false;
    std::vector<wire::Extent> extents;
    uint64_t file_offset(uint64_t offset) const { return base + offset; }
    // A path given to send() itself, not a file inside a tree: a symlink there was followed
    // when it was listed (check_sources), so it is opened following it again.
    bool is_operand() const { return fd < 0 && rel.find('/') == std::string::npos; }
    // A holder's last touch is its let_go() (release: its reads happen before the free).
    void hold() const noexcept { holders.n.fetch_add(1, std::memory_order_relaxed); }
    void let_go() const noexcept { holders.n.fetch_sub(1, std::memory_order_release); }
    bool held() const noexcept { return holders.n.load(std::memory_order_acquire) != 0; }
    Holders holders;
};

// Throws Error(source) naming the first path that is missing, unreadable or not sendable,
// or two sources that would land under the same name.
//
// A path given here that is a symlink is followed (what the user named is what is sent, as
// cp, tar -h and rsync -L do), under the symlink's own name; inside a tree, symlinks stay
// symlinks. What it leads to must be a regular file or a directory: a pipe, FIFO, socket or
// device (`<(producer)`, /dev/stdin, /proc/self/fd/N) is refused with a hint to send its
// bytes in pipe mode (`-`). A path ending in "." or ".." is named after the directory it
// actually resolves to, not after its text. A regular file whose size reads 0 but which has
// data (procfs, sysfs) is refused (refuse_pseudo_file), here and in the walk.
std::vector<SourceRoot> check_sources(const std::vector<std::string>& paths);

// Throws Error(source) if path (a regular file whose size is 0) is a pseudo-file: on a
// kernel pseudo file system (procfs, sysfs, debugfs, ...), or it yields data when read.
// sluice lists a file with its size and sends that many bytes; such a file would arrive
// empty with a success. follow: whether a symlink in path's last component is followed.
void refuse_pseudo_file(const std::string& path, bool follow);

// True if a sluice receiver holds DIR open for writing (it takes an exclusive flock(2) on
// its DIR for the whole transfer): dir_fd is then the directory being received into.
bool is_receiving_dir(int dir_fd);

struct WalkVisitor {
    // Every entry in manifest order; source_path is set for regular files. allocated: the
    // bytes the walk's lstat found allocated (st_blocks * 512; kUnknownAllocation where no
    // walk stat it), so the sparse check needs no second open and fstat per file.
    std::function<void(wire::ManifestEntry&& entry, std::string&& source_path, uint64_t allocated)> entry;
    // One line per skipped entry (fifo, socket, device, a receiver's DIR).
    std::function<void(std::string_view)> skipped;
    // Tree metadata (issue 17): nullptr walks as before (no metadata, hard links, special
    // files or filters). With it, `meta` is called right before `entry` for an entry that has
    // metadata, and `excluded` for each entry a filter rule left out (a directory once).
    const TreeOptions* tree = nullptr;
    std::function<void(wire::EntryMeta&&)> meta;
    std::function<void(std::string_view rel, bool is_dir)> excluded;
};

// Assigns file ids from 0 upwards in the order entries are emitted.
void walk_sources(const std::vector<SourceRoot>& roots, const WalkVisitor& visit);

} // namespace sluice
