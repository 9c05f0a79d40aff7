#include "send/plan/planner.hpp"

#include <algorithm>
#include <unordered_map>

#include "sluice/progress.hpp"

namespace sluice {

void count_settled(Progress* progress, const std::vector<const SourceFile*>& files,
                   const std::vector<wire::ByteRange>& verified) {
    if (!progress) return;
    std::unordered_map<uint64_t, uint64_t> have;
    for (const auto& r : verified) have[r.file_id] += r.length;
    for (const SourceFile* f : files) {
        auto it = have.find(f->file_id);
        uint64_t skipped = it == have.end() ? 0 : std::min(it->second, f->size);
        progress->bytes_done += skipped;
        if (skipped == f->size) progress->files_done += 1;
    }
}


void Planner::add(const SourceFile& f, const std::vector<wire::ByteRange>& verified, std::vector<WorkItem>& out) {
    if (!f.sparse) return add_range(f, 0, f.size, verified, out);
    // Only the data extents: a hole is described in the manifest, never sent.
    for (const wire::Extent& x : f.extents) add_range(f, x.offset, x.offset + x.length, verified, out);
}

void Planner::add_range(const SourceFile& f, uint64_t begin, uint64_t end, const std::vector<wire::ByteRange>& verified,
                        std::vector<WorkItem>& out) {
    // Walk the range block by block (cut at multiples of the block size, so an extent's
    // blocks line up with a whole file's); a block wholly inside a verified range is skipped.
    for (uint64_t off = begin; off < end;) {
        uint64_t len = std::min((off / block_size_ + 1) * block_size_, end) - off;
        bool done = std::any_of(verified.begin(), verified.end(), [&](const wire::ByteRange& r) {
            return r.file_id == f.file_id && r.offset <= off && off + len <= r.offset + r.length;
        });
        const uint64_t at = off;
        off += len;
        if (done) {
            skipped_bytes_ += len;
            continue;
        }
        add_segment(f, at, len, out);
    }
}

void Planner::add_segment(const SourceFile& f, uint64_t offset, uint64_t length, std::vector<WorkItem>& out) {
    planned_bytes_ += length;
    if (length == block_size_) {
        out.push_back(WorkItem{{Segment{&f, offset, length}}});
        return;
    }
    batch_.segments.push_back(Segment{&f, offset, length});
    batch_bytes_ += length;
    if (batch_bytes_ >= block_size_ || batch_.segments.size() >= kMaxFilesPerBatch) flush(out);
}

void Planner::flush(std::vector<WorkItem>& out) {
    if (batch_.segments.empty()) return;
    out.push_back(std::move(batch_));
    batch_ = WorkItem{};
    batch_bytes_ = 0;
}

} // namespace sluice
