// Receive buffers are written with O_DIRECT and registered with io_uring: their alignment is a
// contract, and a 2 MiB one is what lets the kernel back them with one huge page each.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
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
