#pragma once
// Where the direct path puts a block's bytes. O_DIRECT writes whole 4 KiB pages, so only the
// pages a block fills alone go that way; a page the block shares with a neighbouring block
// (which may arrive before, after or at the same time on another stream) goes through the
// page cache, which merges the two parts under its page lock: nothing is written over bytes
// another block owns. Kept apart from the receiver so the fuzzer can drive it
// (tests/fuzz/fuzz_entry.cpp, target "placement").
#include <cstddef>
#include <cstdint>

namespace sluice::direct_layout {

// The alignment O_DIRECT needs of file offsets, lengths and memory: a page, which covers
// devices with 512-byte and 4 KiB logical blocks and file systems with 4 KiB blocks.
constexpr uint64_t kAlign = 4096;

// One buffer's worth of a block: the file bytes [offset, offset + length), received at
// buffer + skew (skew = offset % kAlign), so every page-aligned file offset falls on a
// page-aligned address of the buffer. Only a block's first chunk can have a skew.
struct Chunk {
    uint64_t offset = 0;
    size_t skew = 0;
    size_t length = 0;
};

// The chunk of the block ending at end that starts at offset, for a buffer of capacity bytes
// (a multiple of kAlign). offset < end.
Chunk next_chunk(uint64_t offset, uint64_t end, size_t capacity);

// Bytes of a chunk: at file offset, taken from buffer + at.
struct Run {
    uint64_t offset = 0;
    size_t at = 0;
    size_t length = 0;
};

// How one chunk is written: head and tail through the page cache, direct with O_DIRECT.
struct Plan {
    Run head;   // the chunk's part of a first page it shares with bytes before it
    Run direct; // whole pages: offset and at are multiples of kAlign
    // direct.length rounded up to kAlign: longer only where the run ends at the end of the
    // file (the bytes past it are nobody's; finish_file truncates them), so a file's last
    // partial page needs no buffered write.
    size_t direct_padded = 0;
    Run tail; // the chunk's part of a last page it shares with bytes after it
};

Plan plan_chunk(const Chunk& c, uint64_t file_size);

} // namespace sluice::direct_layout
