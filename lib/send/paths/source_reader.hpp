#pragma once
// Opens source files for a data stream (one open per file, not per block) and computes
// block checksums by reading the page cache through a mapping, so that checksumming adds
// no copy to a zero-copy send.
#include <cstdint>
#include <vector>

#include "core/io/unique_fd.hpp"
#include "core/checksum/xxh3.hpp"
#include "send/plan/source_tree.hpp"

namespace sluice {

class SourceReader {
public:
    // The most a checksum maps at once, so that the RSS stays bounded whatever --block-size is
    // (whole-block mappings counted streams x block: 264 MiB at 8 streams of 64 MiB blocks).
    // Not smaller than the default block, which so keeps one mapping (and one TLB flush on
    // unmap) per block, as measured in docs/benchmarks.md; 2 MiB windows measured the same
    // unbounded, and 1 Gbit/s runs were too noisy to tell.
    static constexpr uint64_t kWindow = uint64_t{8} << 20;

    // The fd of f, opened on first use; checks that f still has the size and mtime the
    // manifest announced (a changed source is an error, never sent torn).
    int open(const SourceFile& f);
    // XXH3-64 of [offset, offset+length) of the open file.
    uint64_t checksum(const SourceFile& f, uint64_t offset, uint64_t length);
    // Checks that the file this reader has open still has its listed size and mtime: a file
    // written to while it was being sent is reported, never delivered torn. Called when the
    // reader moves to another file and when the stream ends.
    void check_unchanged();
    // Reads all of f (offset 0, f.size bytes) into out with pread and checks, after the read,
    // that f still has its listed size and mtime: the bytes read are the file as listed.
    void read_whole(const SourceFile& f, unsigned char* out);
    // Set when a mapping failed and the checksum was read through a buffer instead.
    bool used_read_fallback() const { return read_fallback_; }

private:
    const SourceFile* current_ = nullptr;
    Xxh3 hash_;
    UniqueFd fd_;
    std::vector<unsigned char> fallback_buf_;
    bool read_fallback_ = false;
};

} // namespace sluice
