// Receive buffers are written with O_DIRECT and registered with io_uring: their alignment is a
// contract, and a 2 MiB one is what lets the kernel back them with one huge page each.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "core/io/aligned_buffer.hpp"

using sluice::AlignedBuffer;

TEST_CASE("AlignedBuffer alignment by size") {
    for (size_t size : {size_t{1}, size_t{4096}, size_t{65536} + 1, (size_t{2} << 20) - 1}) {
        AlignedBuffer b(size);
        CHECK(reinterpret_cast<uintptr_t>(b.data()) % 4096 == 0);
        CHECK(b.size() == size);
        std::memset(b.data(), 0xab, size);
    }
    for (size_t size : {size_t{2} << 20, (size_t{2} << 20) + 4096, size_t{8} << 20}) {
        AlignedBuffer b(size);
        CHECK(reinterpret_cast<uintptr_t>(b.data()) % AlignedBuffer::kHugePage == 0);
        CHECK(b.size() == size);
        std::memset(b.data(), 0xcd, size); // every byte is mapped and writable
        CHECK(b.data()[size - 1] == 0xcd);
    }
}

TEST_CASE("AlignedBuffer moves ownership") {
    AlignedBuffer a(size_t{4} << 20);
    unsigned char* p = a.data();
    p[0] = 7;
    AlignedBuffer b(std::move(a));
    CHECK(b.data() == p);
    CHECK(b.data()[0] == 7);
    CHECK(a.data() == nullptr);
    AlignedBuffer c(4096);
    c = std::move(b); // c's old buffer is freed by b's destructor
    CHECK(c.data() == p);
    CHECK(c.size() == (size_t{4} << 20));
}

namespace {

// The mapping of /proc/self/smaps holding address a: its end and its AnonHugePages in kB.
std::pair<uintptr_t, long> mapping_of(uintptr_t a) {
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    bool in = false;
    uintptr_t end = 0;
    while (std::getline(smaps, line)) {
        unsigned long lo = 0, hi = 0;
        // A mapping's first line ("lo-hi perms ..."); its fields ("Name:   value") follow.
        if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
            in = lo <= a && a < hi;
            if (in) end = hi;
            continue;
        }
        long kb = 0;
        if (in && std::sscanf(line.c_str(), "AnonHugePages: %ld kB", &kb) == 1) return {end, kb};
    }
    return {end, -1};
}

} // namespace

// The direct receive path's buffers are 2 MiB and a page of slack, which encrypted streams
// write: under THP "always" a slack mapped as part of a second huge page cost a 2 MiB zeroing
// on its first touch. The buffer is mapped to its last page, and the slack's pages stay small.
TEST_CASE("AlignedBuffer maps a buffer past a huge page to its last page, the tail in small pages") {
    const size_t size = AlignedBuffer::kHugePage + 4096;
    AlignedBuffer b(size);
    b.data()[size - 1] = 1; // the slack's first touch
    const auto slack = reinterpret_cast<uintptr_t>(b.data()) + AlignedBuffer::kHugePage;
    auto [end, huge_kb] = mapping_of(slack);
    CHECK(end == slack + 4096);
    CHECK(huge_kb == 0);
}
