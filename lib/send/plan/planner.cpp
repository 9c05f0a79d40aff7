#include "send/plan/planner.hpp"

#include <algorithm>
#include <unordered_map>

#include "sluice/progress.hpp"

namespace sluice {

void sort_by_file(std::vector<wire::ByteRange>& verified) {
    std::sort(verified.begin(), verified.end(), [](const wire::ByteRange& a, const wire::ByteRange& b) {
        return a.file_id < b.file_id || (a.file_id == b.file_id && a.offset < b.offset);
    });
}

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
    // What the receiver already has of [begin, end) (a resume), sorted. Its ranges need not
    // line up with our blocks: the interrupted run may have used another --block-size.
    // `verified` is sorted by file id (add()'s contract): this file's ranges are one run of
    // it, found by binary search, so a page of thousands of files costs no quadratic scan.
    std::vector<std::pair<uint64_t, uint64_t>>& have = have_;
    have.clear();
    auto first = std::lower_bound(verified.begin(), verified.end(), f.file_id,
                                  [](const wire::ByteRange& r, uint64_t id) { return r.file_id < id; });
    for (auto r = first; r != verified.end() && r->file_id == f.file_id; ++r)
        if (r->length && r->offset < end && r->offset + r->length > begin)
            have.emplace_back(r->offset, r->offset + r->length);
    std::sort(have.begin(), have.end());
    // Walk the range cut at multiples of the block size (so an extent's blocks line up with a
    // whole file's) and send exactly the parts not verified: a block that overlapped a verified
    // range would be refused by the receiver.
    size_t h = 0;
    for (uint64_t off = begin; off < end;) {
        const uint64_t cell_end = std::min((off / block_size_ + 1) * block_size_, end);
        while (h < have.size() && have[h].second <= off) ++h;
        if (h < have.size() && have[h].first <= off) {
            const uint64_t to = std::min(have[h].second, cell_end);
            skipped_bytes_ += to - off;
            off = to;
            continue;
        }
        const uint64_t to = h < have.size() ? std::min(have[h].first, cell_end) : cell_end;
        add_segment(f, off, to - off, out);
        off = to;
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
