#pragma once
// The receiver's record of which byte ranges of a partly received file are verified, kept
// beside its temporary file (".sluice-part.<hash>.j"), so that running the same transfer
// again sends only what is missing.
//
// Format: header "SLJ2" u32 0 | size u64 | mtime_ns i64, then records of
// offset u64 | length u64 | xxh3 u64 | check u64: the block's XXH3-64 as the sender sent it (so
// that `recv --verify` can read a resumed file's earlier blocks back too), and a check, the XXH3
// of the other fields and the header's identity. A journal of another format is not trusted:
// its file is sent again whole.
// Records are appended with O_APPEND after the block's data was written (and, with --sync,
// made durable with fdatasync), so a crash at any instant leaves a journal whose every whole
// record names data that is there; a torn last record fails its check and is ignored.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sluice::journal {

using Ranges = std::vector<std::pair<uint64_t, uint64_t>>; // [begin, end)

struct Block {
    uint64_t offset, length, checksum;
};

// What a journal says: the verified blocks as recorded (a block received twice is listed
// twice), and the same merged into sorted, disjoint ranges.
struct Contents {
    std::vector<Block> blocks;
    Ranges ranges;
    // Something is under the journal's name (openat did not say ENOENT): remove() it when
    // ranges is empty. Nothing there, the usual case, costs no unlinkat.
    bool present = false;
};

std::string name_for(const std::string& temp_name);
// Verified blocks of a partial file whose identity (size, mtime) still matches; empty when
// there is no journal, it belongs to another version of the file, or it is unreadable.
Contents load(int dir_fd, const std::string& temp_name, uint64_t size, int64_t mtime_ns);
// Starts a journal for a new partial file (replacing any other).
void create(int dir_fd, const std::string& temp_name, uint64_t size, int64_t mtime_ns);
void append(int dir_fd, const std::string& temp_name, uint64_t size, int64_t mtime_ns, uint64_t offset, uint64_t length,
            uint64_t checksum);
void remove(int dir_fd, const std::string& temp_name);

} // namespace sluice::journal
