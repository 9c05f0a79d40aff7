#include "recv/store/file_table.hpp"

#include <algorithm>

#include "core/session/memory_budget.hpp"
#include "recv/store/dest_tree.hpp"

namespace sluice {

namespace {

// What a string's heap block costs (libstdc++ keeps up to 15 bytes inside the object; malloc
// adds its header and rounds to 16), so the count follows the real memory, not the text.
uint64_t heap_bytes(const std::string& s) {
    constexpr uint64_t kInline = 15;
    return s.capacity() <= kInline ? 0 : (s.capacity() + 1 + 8 + 15) / 16 * 16;
}

// Beyond the RecvFile: its slots in the path index, and a pointer in the control side's
// directory or link list.
constexpr uint64_t kIndexBytes = PathIndex::kBytesPerPath + 8;

} // namespace

uint64_t FileTable::default_max_bytes() { return default_manifest_budget(); }

uint64_t FileTable::entry_bytes(const RecvFile& f) {
    return sizeof(RecvFile) + kIndexBytes + heap_bytes(f.entry.path) + heap_bytes(f.entry.link_target) + heap_bytes(f.parent) +
           heap_bytes(f.name) + heap_bytes(f.temp) + f.entry.data_extents.capacity() * sizeof(wire::Extent);
}

FileTable::FileTable(uint64_t max_files, uint64_t max_bytes)
    : max_files_(max_files), max_bytes_(max_bytes ? max_bytes : default_max_bytes()),
      slab_count_((max_files + kSlab - 1) / kSlab), stripes_(256) {
    slabs_ = std::make_unique<std::atomic<RecvFile*>[]>(slab_count_);
    settled_ = std::make_unique<std::atomic<uint32_t>[]>(slab_count_);
    finished_ = std::make_unique<std::atomic<uint32_t>[]>(slab_count_);
}

FileTable::~FileTable() {
    for (uint64_t s = 0; s < slab_count_; ++s) delete[] slabs_[s].load();
    // Deferred slabs were unpublished but not freed.
    for (auto& [s, entries] : deferred_) delete[] entries;
}

void FileTable::charge(uint64_t n, const wire::ManifestEntry& e, const char* what) {
    uint64_t now = bytes_.fetch_add(n, std::memory_order_relaxed) + n;
    if (now <= max_bytes_) return;
    // The path may be 4 KB: the id and a prefix say enough.
    std::string path = e.path.size() > 80 ? e.path.substr(0, 80) + "..." : e.path;
    throw Error(ErrorCode::protocol, "the manifest needs more than " + std::to_string(max_bytes_) +
                                         " bytes of the receiver's memory (--max-manifest-bytes " + std::to_string(max_bytes_) +
                                         "): " + std::to_string(now) + " bytes at " + what + "entry " +
                                         std::to_string(e.file_id) + " '" + path + "'");
}

RecvFile& FileTable::append(wire::ManifestEntry&& e) {
    if (e.file_id != count_)
        throw Error(ErrorCode::protocol, "manifest entry '" + e.path + "' has id " + std::to_string(e.file_id) + ", expected " +
                                             std::to_string(count_));
    if (count_ >= max_files_)
        throw Error(ErrorCode::protocol,
                    "manifest has more than " + std::to_string(max_files_) + " entries (the receiver's limit)");
    if (paths_.contains(e.path)) throw Error(ErrorCode::protocol, "manifest lists '" + e.path + "' twice");
    auto& slab = slabs_[count_ / kSlab];
    if (!slab.load(std::memory_order_relaxed)) slab.store(new RecvFile[kSlab], std::memory_order_release);
    RecvFile& f = slot(count_);
    f.parent = DestTree::parent_of(e.path);
    f.name = DestTree::name_of(e.path);
    f.temp = DestTree::temp_name(e.path);
    f.entry = std::move(e);
    // Counted before it is published: an entry past the limit is never used (the transfer
    // fails), and what it holds is freed with the table.
    charge(entry_bytes(f), f.entry, "");
    paths_.insert(&f.entry.path);
    if (f.entry.kind != wire::EntryKind::file) finished_[count_ / kSlab].fetch_add(1); // no data: nothing to ask for
    ++count_;
    held_peak_ = std::max(held_peak_, held());
    return f;
}

namespace {

using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

// Where [offset, end) would go in the sorted ranges v; throws protocol if it overlaps one.
Ranges::iterator place(Ranges& v, const RecvFile& f, uint64_t offset, uint64_t end) {
    auto it = std::lower_bound(v.begin(), v.end(), std::make_pair(offset, uint64_t{0}));
    if ((it != v.end() && it->first < end) || (it != v.begin() && std::prev(it)->second > offset))
        throw Error(ErrorCode::protocol,
                    "block at offset " + std::to_string(offset) + " of '" + f.entry.path + "' overlaps data already received");
    return it;
}

bool whole_file(const RecvFile& f, uint64_t offset, uint64_t len) { return offset == 0 && len == f.entry.size; }

// Gives up a stream's claim on [offset, offset + len); the caller holds f's lock.
void give_up_claim(RecvFile& f, uint64_t offset, uint64_t len) {
    if (f.receiving > 0) --f.receiving;
    if (whole_file(f, offset, len)) f.receiving_whole = false;
}

} // namespace

void FileTable::claim(RecvFile& f, uint64_t offset, uint64_t len) {
    std::lock_guard lk(lock_for(f));
    if (f.complete)
        throw Error(ErrorCode::protocol, "BLOCK at offset " + std::to_string(offset) + " of '" + f.entry.path +
                                             "', which is already complete (a block sent twice)");
    place(f.verified, f, offset, offset + len);
    const bool whole = whole_file(f, offset, len);
    if (f.receiving_whole || (whole && f.receiving > 0))
        throw Error(ErrorCode::protocol, "'" + f.entry.path + "' (BLOCK at offset " + std::to_string(offset) +
                                             ") is being received on two streams at once (a block sent twice)");
    ++f.receiving;
    f.receiving_whole = whole;
}

void FileTable::disown(RecvFile& f, uint64_t offset, uint64_t len) {
    std::lock_guard lk(lock_for(f));
    give_up_claim(f, offset, len);
}

bool FileTable::mark_verified(RecvFile& f, uint64_t offset, uint64_t len, const std::function<void(bool first)>& on_partial,
                              bool claimed) {
    std::lock_guard lk(lock_for(f));
    if (claimed) give_up_claim(f, offset, len);
    uint64_t end = offset + len;
    auto& v = f.verified;
    auto it = place(v, f, offset, end);
    // Merge with neighbours so the list stays as short as the number of gaps.
    bool merge_prev = it != v.begin() && std::prev(it)->second == offset;
    bool merge_next = it != v.end() && it->first == end;
    if (merge_prev && merge_next) {
        std::prev(it)->second = it->second;
        v.erase(it);
    } else if (merge_prev) {
        std::prev(it)->second = end;
    } else if (merge_next) {
        it->first = offset;
    } else {
        size_t before = v.capacity();
        v.insert(it, {offset, end});
        // A range list grows with the gaps a sender leaves (one per block at worst).
        if (v.capacity() != before) charge((v.capacity() - before) * sizeof v[0], f.entry, "the verified ranges of ");
    }
    f.verified_bytes += len;
    bool complete = f.verified_bytes == f.entry.size;
    // Every byte is verified, so a claim still open is a copy of bytes already here, on
    // another stream that reads the names set_complete() frees.
    if (complete && f.receiving > 0)
        throw Error(ErrorCode::protocol, "'" + f.entry.path + "' is complete while a block of it is still arriving on another stream (a block sent twice)");
    if (!complete && on_partial) {
        on_partial(!f.journaled);
        f.journaled = true;
    }
    return complete;
}

void FileTable::record_checksum(RecvFile& f, uint64_t offset, uint64_t len, uint64_t checksum) {
    std::lock_guard lk(lock_for(f));
    size_t before = f.sums.capacity();
    f.sums.push_back({offset, len, checksum});
    if (f.sums.capacity() != before)
        charge((f.sums.capacity() - before) * sizeof f.sums[0], f.entry, "the block checksums (--verify) of ");
}

bool FileTable::is_complete(RecvFile& f) {
    std::lock_guard lk(lock_for(f));
    return f.complete;
}

void FileTable::set_complete(RecvFile& f) {
    std::lock_guard lk(lock_for(f));
    if (f.complete) return;
    f.complete = true;
    release(f);
    settled_[f.entry.file_id / kSlab].fetch_add(1);
    if (f.entry.kind == wire::EntryKind::file) finished_[f.entry.file_id / kSlab].fetch_add(1); // others: at append
}

uint64_t FileTable::complete_below() {
    // Published slabs only: an appended entry not yet published is not counted as done.
    const uint64_t full = size() / kSlab;
    while (below_slabs_ < full && finished_[below_slabs_].load() == kSlab) ++below_slabs_;
    return below_slabs_ * kSlab;
}

void FileTable::count_copy(const wire::ManifestEntry& e) {
    charge(sizeof e + heap_bytes(e.path) + heap_bytes(e.link_target), e, "a kept copy of ");
}

void FileTable::settle(RecvFile& f) { settled_[f.entry.file_id / kSlab].fetch_add(1); }

uint64_t FileTable::release_settled(const BeforeFree& before_free) {
    if (!release_) return 0;
    const uint64_t before = released_entries_;
    // Those a hold named last time: unpublished already, freed once no hold names them.
    std::erase_if(deferred_, [&](const auto& d) {
        for (const Hold& h : holds_)
            if (h.names(d.first * kSlab, (d.first + 1) * kSlab)) return false;
        free_slab(d.second, before_free);
        return true;
    });
    const uint64_t full = count_ / kSlab; // the slab being filled is never released
    while (next_unreleased_ < full && !slabs_[next_unreleased_].load(std::memory_order_relaxed)) ++next_unreleased_;
    for (uint64_t s = next_unreleased_; s < full; ++s) {
        RecvFile* entries = slabs_[s].load(std::memory_order_relaxed);
        if (!entries || settled_[s].load() != kSlab) continue;
        slabs_[s].store(nullptr); // seq_cst: before the holds are read (Hold)
        bool named = false;
        for (const Hold& h : holds_) named = named || h.names(s * kSlab, (s + 1) * kSlab);
        if (named)
            deferred_[s] = entries;
        else
            free_slab(entries, before_free);
    }
    return released_entries_ - before;
}

void FileTable::free_slab(RecvFile* entries, const BeforeFree& before_free) {
    if (before_free) before_free(std::span<const RecvFile>(entries, kSlab));
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < kSlab; ++i) {
        paths_.erase(entries[i].entry.path); // a later entry may use the path again: a new file there
        bytes += entry_bytes(entries[i]);
    }
    delete[] entries;
    bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    released_entries_ += kSlab;
}

// A file in place needs only its entry from here on (the checks at the end, stats, a later
// entry naming it): its names, ranges and checksums are freed and uncounted, so that what a
// completed file holds is its slot, its path and its index node (issue 19: the receiver's
// memory against the file count). Nothing reads them after completion: the streams and
// the finishing steps use them only for files not yet complete.
void FileTable::release(RecvFile& f) {
    const uint64_t before = entry_bytes(f) + f.verified.capacity() * sizeof f.verified[0] + f.sums.capacity() * sizeof f.sums[0];
    std::string().swap(f.parent);
    std::string().swap(f.name);
    std::string().swap(f.temp);
    decltype(f.verified)().swap(f.verified);
    decltype(f.sums)().swap(f.sums);
    bytes_.fetch_sub(before - entry_bytes(f), std::memory_order_relaxed);
}

} // namespace sluice
