#include "send/plan/planner.hpp"

#include <algorithm>

namespace sluice {

void Planner::add(const SourceFile& f, const std::vector<wire::ByteRange>& verified, std::vector<WorkItem>& out) {
    // Walk the file block by block; a block wholly inside a verified range is skipped.
    for (uint64_t off = 0; off < f.size; off += block_size_) {
        uint64_t len = std::min(block_size_, f.size - off);
        bool done = std::any_of(verified.begin(), verified.end(), [&](const wire::ByteRange& r) {
            return r.file_id == f.file_id && r.offset <= off && off + len <= r.offset + r.length;
        });
        if (done) {
            skipped_bytes_ += len;
            continue;
        }
        add_segment(f, off, len, out);
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
