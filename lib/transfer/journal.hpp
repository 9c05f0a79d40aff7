#pragma once
// The receiver's record of which byte ranges of a partly received file are verified, kept
// beside its temporary file (".sluice-part.<hash>.j"), so that running the same transfer
// again sends only what is missing.
//
// Format: header "SLJ1" u32 0 | size u64 | mtime_ns i64, then records of
// offset u64 | length u64 | check u64 (XXH3 of the other fields and the header's identity).
// Records are appended with O_APPEND after the block's data was written (and, with --sync,
// made durable with fdatasync), so a crash at any instant leaves a journal whose every whole
// record names data that is there; a torn last record fails its check and is ignored.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sluice::journal {

using Ranges = std::vector<std::pair<uint64_t, uint64_t>>; // [begin, end)

std::string name_for(const std::string& temp_name);
// Verified ranges of a partial file whose identity (size, mtime) still matches; empty when
// there is no journal, it belongs to another version of the file, or it is unreadable.
Ranges load(int dir_fd, const std::string& temp_name, uint64_t size, int64_t mtime_ns);
// Starts a journal for a new partial file (replacing any other).
void create(int dir_fd, const std::string& temp_name, uint64_t size, int64_t mtime_ns);
void append(int dir_fd, const std::string& temp_name, uint64_t size, int64_t mtime_ns, uint64_t offset, uint64_t length);
void remove(int dir_fd, const std::string& temp_name);

} // namespace sluice::journal
