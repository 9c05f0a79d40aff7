#pragma once
// Cuts files into work: a file of at least one block becomes block-sized segments (the last
// one shorter); smaller files are packed whole into batches of about one block, so that
// thousands of small files cost a few queue operations and no round trips.
#include <vector>

#include "send/plan/work_queue.hpp"
#include "core/wire/protocol.hpp"

namespace sluice {

class Planner {
public:
    static constexpr size_t kMaxFilesPerBatch = 512;

    explicit Planner(uint64_t block_size) : block_size_(block_size) {}
    // Before the first add().
    void set_block_size(uint64_t b) { block_size_ = b; }

    // Plans a file, leaving out the byte ranges the receiver already verified (resume).
    // `verified` must be sorted by file id (sort_by_file() does it; any order within a file).
    // Appends finished items to out.
    void add(const SourceFile& f, const std::vector<wire::ByteRange>& verified, std::vector<WorkItem>& out);
    // Emits the partly filled batch, if any.
    void flush(std::vector<WorkItem>& out);

    uint64_t planned_bytes() const { return planned_bytes_; }
    uint64_t skipped_bytes() const { return skipped_bytes_; }

private:
    void add_segment(const SourceFile& f, uint64_t offset, uint64_t length, std::vector<WorkItem>& out);
    // Plans [begin, end) of f cut at multiples of the block size.
    void add_range(const SourceFile& f, uint64_t begin, uint64_t end, const std::vector<wire::ByteRange>& verified,
                   std::vector<WorkItem>& out);

    uint64_t block_size_;
    WorkItem batch_;
    // add_range's list of what the receiver has of one file, kept between files: a page of
    // thousands of files verified whole costs no allocation per file.
    std::vector<std::pair<uint64_t, uint64_t>> have_;
    uint64_t batch_bytes_ = 0;
    uint64_t planned_bytes_ = 0;
    uint64_t skipped_bytes_ = 0;
};

// Sorts a page's verified ranges by file id, as Planner::add() needs them.
void sort_by_file(std::vector<wire::ByteRange>& verified);

struct Progress;

// Progress for what a page's ack settles without any block: empty files, and ranges the
// receiver already has (a resume) or reuses (an update). The stream threads count the rest as
// it is sent. Nothing when progress is null.
void count_settled(Progress* progress, const std::vector<const SourceFile*>& files,
                   const std::vector<wire::ByteRange>& verified);

} // namespace sluice
