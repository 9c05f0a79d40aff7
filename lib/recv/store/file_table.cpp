#include "recv/store/file_table.hpp"

#include <algorithm>

#include "recv/store/dest_tree.hpp"

namespace sluice {

FileTable::FileTable(uint64_t max_files) : max_files_(max_files), slabs_((max_files + kSlab - 1) / kSlab), stripes_(256) {}

RecvFile& FileTable::append(wire::ManifestEntry&& e) {
    if (e.file_id != count_)
        throw Error(ErrorCode::protocol, "manifest entry '" + e.path + "' has id " + std::to_string(e.file_id) + ", expected " +
                                             std::to_string(count_));
    if (count_ >= max_files_)
        throw Error(ErrorCode::protocol,
                    "manifest has more than " + std::to_string(max_files_) + " entries (the receiver's limit)");
    auto& slab = slabs_[count_ / kSlab];
    if (!slab) slab = std::make_unique<RecvFile[]>(kSlab);
    RecvFile& f = slot(count_);
    f.parent = DestTree::parent_of(e.path);
    f.name = DestTree::name_of(e.path);
    f.temp = DestTree::temp_name(e.path);
    f.entry = std::move(e);
    ++count_;
    return f;
}

bool FileTable::mark_verified(RecvFile& f, uint64_t offset, uint64_t len, const std::function<void(bool first)>& on_partial) {
    std::lock_guard lk(lock_for(f));
    uint64_t end = offset + len;
    auto& v = f.verified;
    auto it = std::lower_bound(v.begin(), v.end(), std::make_pair(offset, uint64_t{0}));
    if ((it != v.end() && it->first < end) || (it != v.begin() && std::prev(it)->second > offset))
        throw Error(ErrorCode::protocol,
                    "block at offset " + std::to_string(offset) + " of '" + f.entry.path + "' overlaps data already received");
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
        v.insert(it, {offset, end});
    }
    f.verified_bytes += len;
    bool complete = f.verified_bytes == f.entry.size;
    if (!complete && on_partial) {
        on_partial(!f.journaled);
        f.journaled = true;
    }
    return complete;
}

void FileTable::record_checksum(RecvFile& f, uint64_t offset, uint64_t len, uint64_t checksum) {
    std::lock_guard lk(lock_for(f));
    f.sums.push_back({offset, len, checksum});
}

bool FileTable::is_complete(RecvFile& f) {
    std::lock_guard lk(lock_for(f));
    return f.complete;
}

void FileTable::set_complete(RecvFile& f) {
    std::lock_guard lk(lock_for(f));
    f.complete = true;
}

} // namespace sluice
