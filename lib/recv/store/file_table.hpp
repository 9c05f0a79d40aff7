#pragma once
// The receiver's registry of manifest entries, indexed by file id. The control thread
// appends and publishes; data streams look entries up without a lock (entries below the
// published count never move) and record verified byte ranges under a striped lock.
// The memory it holds is counted (entries, their names, verified ranges and checksums) and
// bounded in total by --max-manifest-bytes (docs/protocol.md, "Limits"): every field is
// bounded on its own, but 20,000 entries of 8 KB each took 330 MB before this.
#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sluice/error.hpp"
#include "core/wire/protocol.hpp"
#include "recv/store/inode_reaper.hpp"
#include "recv/store/path_index.hpp"

namespace sluice {

class DirReplacer;

struct RecvFile {
    wire::ManifestEntry entry;
    std::string parent; // relative directory
    std::string name;   // final name in parent
    std::string temp;   // temporary name in parent
    // Set by the one stream writing the whole file into an unnamed O_TMPFILE inode (a file that
    // arrives in one block): it has no temporary name and is linked in place when verified.
    bool unnamed = false;
    // The direct path's allocation ahead of its writes (allocate_ahead.hpp):
    // bytes written with O_DIRECT, and the end of the allocated front. Shared by the streams.
    std::atomic<uint64_t> direct_written{0};
    std::atomic<uint64_t> allocated_to{0};
    // Guarded by the table's stripe lock for this id:
    std::vector<std::pair<uint64_t, uint64_t>> verified; // sorted, merged [begin, end)
    uint64_t verified_bytes = 0;
    // Blocks streams have claimed and not yet verified or disowned (FileTable::claim), and
    // whether one of them is the whole file: no other stream may touch the entry meanwhile.
    uint32_t receiving = 0;
    bool receiving_whole = false;
    bool complete = false;  // renamed into place
    bool journaled = false; // a journal of verified ranges exists beside the temp file
    // The quick check found an older regular file with blocks under the final name: its inode
    // is kept open across the rename and closed by the table's reaper (inode_reaper.hpp).
    bool replaces = false;
    // Its block sums go into the receiver's cache when it completes (sums_cache.hpp): every
    // block's checksum is recorded in `sums`, received or reused.
    bool keep_sums = false;
    // With --verify or keep_sums: every block's (offset, length, checksum); --verify re-checks
    // them from disk at the end.
    std::vector<std::array<uint64_t, 3>> sums;
};

class FileTable {
public:
    // What one data stream may still touch (issue 19): the entry it last looked up and the one
    // before it until settle(). A slab of entries is released only when no hold names one of
    // its entries (a hazard pointer, by id): look() is stored before the slab is read, and the
    // control thread unpublishes a slab before it reads the holds.
    class Hold {
    public:
        void look(uint64_t id) noexcept {
            prev_.store(cur_.load(std::memory_order_relaxed));
            cur_.store(id);
        }
        // The entry named before the last look() is no longer touched.
        void settle() noexcept { prev_.store(cur_.load(std::memory_order_relaxed)); }
        // For a stream that keeps many entries between lookups (recv_write: the blocks of a whole
        // receive buffer until their writes are reaped): every id from the lowest to the highest
        // widened since the last narrow() is named. widen() before the lookup of id; narrow(id)
        // once the stream touches only id again. Each store keeps a superset of what the
        // stream touches named, whatever a reader sees between the two.
        void widen(uint64_t id) noexcept {
            if (id < lo_.load(std::memory_order_relaxed)) lo_.store(id);
            if (id > hi_.load(std::memory_order_relaxed) || hi_.load(std::memory_order_relaxed) == kNone) hi_.store(id);
        }
        void narrow(uint64_t id) noexcept {
            lo_.store(id); // raise the low end first: [id, hi] still covers id
            hi_.store(id);
        }
        bool names(uint64_t lo, uint64_t hi) const noexcept {
            const uint64_t a = cur_.load(), b = prev_.load();
            const uint64_t l = lo_.load(), h = hi_.load();
            return (a >= lo && a < hi) || (b >= lo && b < hi) || (h != kNone && l < hi && h >= lo);
        }

    private:
        static constexpr uint64_t kNone = UINT64_MAX;
        std::atomic<uint64_t> cur_{kNone}, prev_{kNone};
        std::atomic<uint64_t> lo_{kNone}, hi_{kNone}; // the widened range; hi_ kNone: empty
    };

    // max_bytes: the most memory the table may hold; 0 for default_max_bytes().
    explicit FileTable(uint64_t max_files, uint64_t max_bytes = 0);
    ~FileTable();
    FileTable(const FileTable&) = delete;
    FileTable& operator=(const FileTable&) = delete;

    // A quarter of the memory this process may use (physical memory, or its cgroup's limit
    // if lower), at least 256 MiB: ~10M files of typical path lengths on a 32 GB host.
    static uint64_t default_max_bytes();
    // What one entry costs the table beyond its verified ranges: the RecvFile, the heap
    // blocks of its strings, its slot in the path index and in the control side's lists.
    static uint64_t entry_bytes(const RecvFile& f);

    uint64_t size() const { return published_.load(std::memory_order_acquire); }
    // Memory held now, as counted; the limit.
    uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
    uint64_t max_bytes() const { return max_bytes_; }
    // Control thread only. Throws protocol Error if ids are not dense, a path is listed
    // twice, or the entry cap or the memory limit is hit.
    RecvFile& append(wire::ManifestEntry&& e);
    void publish() { published_.store(count_, std::memory_order_release); }
    // nullptr for an id not (yet) announced, or released. A data stream that may release
    // (allow_release) names the id in its Hold first.
    RecvFile* find(uint64_t id) {
        if (id >= size()) return nullptr;
        RecvFile* s = slabs_[id / kSlab].load(std::memory_order_seq_cst);
        return s ? &s[id % kSlab] : nullptr;
    }
    // An entry not released (control thread, or after the streams have ended); also one of a
    // slab that is unpublished but still named by a stream's hold.
    RecvFile& at(uint64_t id) { return slot(id); }
    // Control thread: the entry's slab was freed; every entry in it was complete (or a
    // directory or symlink the caller keeps a copy of).
    bool released(uint64_t id) const {
        return id < count_ && !slabs_[id / kSlab].load(std::memory_order_relaxed) && !deferred_.contains(id / kSlab);
    }

    // Releasing complete entries (issue 19, docs/protocol.md "Announce window"): only where
    // every data stream names what it touches in its Hold (the direct path), and only for
    // slabs whose every entry is settled: a regular file complete (set_complete) or another
    // kind the caller copied out (settle).
    void allow_release(bool on) { release_ = on; }
    bool releasing() const { return release_; }
    Hold& hold(unsigned stream) { return holds_[stream % holds_.size()]; }
    // Control thread: a directory or symlink entry the caller copies out when its slab is
    // released (count_copy: such copies count against the same limit as the table).
    void settle(RecvFile& f);
    void count_copy(const wire::ManifestEntry& e);
    // Control thread: frees every full slab whose entries are all settled and that no hold
    // names (retried for those a hold named), each after `before_free(its entries)`. Returns
    // the entries released.
    using BeforeFree = std::function<void(std::span<const RecvFile>)>;
    uint64_t release_settled(const BeforeFree& before_free = {});
    // FILES_DONE's `below` (issue 19): every entry below it needs nothing more from the sender
    // (a regular file complete, or not a regular file). Advances over whole slabs of published
    // entries, so the sender frees its records in the same order; never goes back. Any thread,
    // one at a time (the caller's lock).
    uint64_t complete_below();
    // Entries held in memory now and at most (announced minus released).
    uint64_t held() const { return count_ - released_entries_; }
    uint64_t held_peak() const { return held_peak_; }

    // A data stream takes the block [offset, offset+len) of f before it touches the entry's
    // names or writes a byte (file_for_block). Throws protocol Error, with f untouched, if f is
    // complete (its names and verified ranges may be freed: a stream must not use them), if the
    // block overlaps a verified range, or if it is the whole file and another block of f is
    // being received, or the whole file is: a block sent twice, which an honest sender never
    // does (a reconnect sends again only what STREAM_RESUME says did not arrive, a RESEND only
    // once the bad copy is disowned). So f completes only with no stream still on it.
    void claim(RecvFile& f, uint64_t offset, uint64_t len);
    // A claimed block that will not be verified: its checksum failed (before the RESEND goes
    // out) or its connection broke inside it (before STREAM_RESUME goes out).
    void disown(RecvFile& f, uint64_t offset, uint64_t len);
    // Records [offset, offset+len) of f as verified; claimed: a stream's block, whose claim it
    // ends. Returns true to the one caller whose range completes the file. Throws protocol
    // Error on an overlap, or on completion while another stream's claim is open (a block sent
    // twice). `on_partial(first)` runs under the file's lock when the range leaves the file
    // incomplete (first: no journal yet), so journal records of one file never race.
    bool mark_verified(RecvFile& f, uint64_t offset, uint64_t len, const std::function<void(bool first)>& on_partial = {},
                       bool claimed = false);
    void record_checksum(RecvFile& f, uint64_t offset, uint64_t len, uint64_t checksum);
    bool is_complete(RecvFile& f);
    // Marks f in place and frees what it no longer needs: parent, name, temp, verified and
    // sums are empty afterwards (entry stays).
    void set_complete(RecvFile& f);
    // Closes the old versions of replaced files off the data streams (finish_file).
    InodeReaper& reaper() { return reaper_; }
    // --delete's (TreeMirror's): a non-empty directory gives way to the entry the source now has
    // under its name (dir_replacer.hpp). Null without --delete: such a directory is refused.
    DirReplacer* dir_replacer() const { return dir_replacer_; }
    void set_dir_replacer(DirReplacer* r) { dir_replacer_ = r; }

private:
    // 1,024 entries (~300 KiB): the unit in which complete entries are given back.
    static constexpr uint64_t kSlab = 1024;
    // Adds n bytes to what the table holds; throws protocol Error naming the limit past it.
    void charge(uint64_t n, const wire::ManifestEntry& e, const char* what);
    void release(RecvFile& f); // under f's lock
    RecvFile& slot(uint64_t id) {
        RecvFile* s = slabs_[id / kSlab].load(std::memory_order_relaxed);
        // Not `(s ? s : deferred_.at(..))[id % kSlab]`: GCC 12 with -fsanitize=shift (in
        // -fsanitize=undefined) compiles that to entry 0 of the deferred slab for every id.
        if (!s) s = deferred_.at(id / kSlab);
        return s[id % kSlab];
    }
    void free_slab(RecvFile* entries, const BeforeFree& before_free); // control thread, once no hold names it
    std::mutex& lock_for(const RecvFile& f) { return stripes_[f.entry.file_id % stripes_.size()]; }

    uint64_t max_files_;
    uint64_t max_bytes_;
    std::atomic<uint64_t> bytes_{0};
    uint64_t count_ = 0;
    // entry.path of every entry held (stable: slabs never move), for "listed twice". Its
    // slots grow with the most entries held at once, when they are charged, and stay.
    PathIndex paths_;
    std::atomic<uint64_t> published_{0};
    // Sized once, never reallocated; an entry is null before its slab is made and once it is
    // released. settled_: entries of each slab that are settled (see allow_release).
    std::unique_ptr<std::atomic<RecvFile*>[]> slabs_;
    std::unique_ptr<std::atomic<uint32_t>[]> settled_;
    // Entries of each slab the sender is done with (complete_below): regular files complete,
    // other kinds from their append. below_slabs_: slabs below it are all done.
    std::unique_ptr<std::atomic<uint32_t>[]> finished_;
    uint64_t below_slabs_ = 0;
    uint64_t slab_count_ = 0;
    std::vector<std::mutex> stripes_;
    bool release_ = false;
    std::array<Hold, wire::kMaxStreams + 1> holds_; // by data stream index
    uint64_t next_unreleased_ = 0; // slabs below it are released or waiting in deferred_
    std::unordered_map<uint64_t, RecvFile*> deferred_; // unpublished slabs a hold still named
    uint64_t released_entries_ = 0;
    uint64_t held_peak_ = 0;
    InodeReaper reaper_;
    DirReplacer* dir_replacer_ = nullptr;
};

} // namespace sluice
