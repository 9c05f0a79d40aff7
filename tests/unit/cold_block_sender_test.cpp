// Blocks not in the page cache are read with O_DIRECT into the sender's buffer, hashed there and
// sent from it (paths/cold_block_sender.hpp). Checked here: each cold block reaches the socket
// whole, as one BLOCK frame with its bytes and their XXH3, including a last block that is not a
// multiple of 4096; a block partly cached is still read from the disk; a wholly cached block is
// left to the stream's path (nothing sent, nothing left in flight); blocks keep their order
// although each one's send runs while the next is read; the cold reads leave no pages cached; a file that
// shrinks or grows between its blocks is an error naming it, never a torn block; a read queued
// ahead of its turn whose file changed reports that in the block's turn, never before.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <vector>

#include "core/checksum/xxh3.hpp"
#include "core/io/page_cache.hpp"
#include "core/io/unique_fd.hpp"
#include "send/paths/cold_block_sender.hpp"
#include "sluice/error.hpp"
#include "source_files.hpp"
#include "temp_dir.hpp"

namespace {

using sluice::ColdBlockSender;
using sluice::Segment;
constexpr uint64_t kMiB = 1 << 20;

using unit_test::cache_range;

bool cached(const std::string& path, uint64_t offset, uint64_t length) {
    sluice::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(fd);
    const std::optional<bool> c = sluice::range_cached(fd.get(), offset, length);
    REQUIRE(c.has_value()); // the test machine's kernel has cachestat(2) (Linux >= 6.5)
    return *c;
}

// The message of the Error(source) that f throws; a failure if it throws none.
template <class F>
std::string source_error(F f) {
    try {
        f();
    } catch (const sluice::Error& e) {
        CHECK(e.code() == sluice::ErrorCode::source);
        return e.what();
    }
    FAIL("no error: the block was sent");
    return {};
}

using unit_test::Wire;

} // namespace

TEST_CASE("cold blocks go out of the O_DIRECT buffer whole; cached ones are left to the path") {
    unit_test::TempDir dir;
    const uint64_t size = 3 * kMiB + 123; // the last block is not a multiple of 4096
    unit_test::Source s = unit_test::make_source(dir.path.string(), 7, size, true);
    // Mixed: block 0 has its first page cached, block 1 is wholly cached, blocks 2 and 3 cold.
    cache_range(s.f.path, 0, 4096);
    cache_range(s.f.path, kMiB, kMiB);
    REQUIRE(cached(s.f.path, kMiB, kMiB));
    REQUIRE(!cached(s.f.path, 0, kMiB));
    REQUIRE(!cached(s.f.path, 2 * kMiB, size - 2 * kMiB));

    Wire w;
    uint64_t blocks = 0, bytes = 0;
    std::vector<bool> sent;
    {
        ColdBlockSender cold(w.tx.get(), 60000);
        for (uint64_t off = 0; off < size; off += kMiB)
            sent.push_back(cold.try_send(Segment{&s.f, off, std::min(kMiB, size - off)}, true));
        cold.drain();
        blocks = cold.blocks();
        bytes = cold.bytes();
        CHECK(cold.fallback().empty());
        CHECK(cold.unaligned() == 0);
    }
    CHECK(!s.f.held()); // the sender let go of the file it kept open
    const auto frames = unit_test::parse_frames(w.close());
    CHECK(sent == std::vector<bool>{true, false, true, true});
    CHECK(blocks == 3);
    CHECK(bytes == size - kMiB);
    REQUIRE(frames.size() == 3);
    const uint64_t offsets[] = {0, 2 * kMiB, 3 * kMiB};
    for (size_t i = 0; i < 3; ++i) {
        const uint64_t len = std::min(kMiB, size - offsets[i]);
        CHECK(frames[i].file_id == 7);
        CHECK(frames[i].offset == offsets[i]);
        REQUIRE(frames[i].data.size() == len);
        CHECK(std::equal(frames[i].data.begin(), frames[i].data.end(), s.data.begin() + static_cast<long>(offsets[i])));
        CHECK(frames[i].checksum == sluice::xxh3_64(s.data.data() + offsets[i], len));
    }
    // The cold blocks were read past the page cache: only what the test cached is there (at
    // most: on a machine short of memory, reclaim may take some of it back).
    CHECK(unit_test::cached_pages(s.f.path, size) <= 1 + kMiB / 4096);
}

TEST_CASE("a file that shrinks or grows between its cold blocks is an error naming it") {
    unit_test::TempDir dir;
    unit_test::Source shrinks = unit_test::make_source(dir.path.string(), 1, 2 * kMiB + 100, true);
    unit_test::Source grows = unit_test::make_source(dir.path.string(), 2, 2 * kMiB, true);
    Wire w;
    ColdBlockSender cold(w.tx.get(), 60000);

    REQUIRE(cold.try_send(Segment{&shrinks.f, 0, kMiB}, true));
    REQUIRE(::truncate(shrinks.f.path.c_str(), kMiB + 5) == 0);
    const std::string shrank = source_error([&] { cold.try_send(Segment{&shrinks.f, kMiB, kMiB}, true); });
    CHECK(shrank.find(shrinks.f.path) != std::string::npos);
    CHECK(shrank.find("shrank while being sent") != std::string::npos);
    CHECK(shrank.find("got 5") != std::string::npos);

    REQUIRE(cold.try_send(Segment{&grows.f, 0, kMiB}, true));
    {
        sluice::UniqueFd fd(::open(grows.f.path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
        REQUIRE(::write(fd.get(), "more", 4) == 4);
    }
    const std::string grew = source_error([&] { cold.try_send(Segment{&grows.f, kMiB, kMiB}, true); });
    CHECK(grew.find(grows.f.path) != std::string::npos);
    CHECK(grew.find("changed while it was being sent") != std::string::npos);
    CHECK(cold.blocks() == 2);
    cold.drain();
    CHECK(unit_test::parse_frames(w.close()).size() == 2); // only the blocks read whole reached the socket
}

TEST_CASE("a block at an offset O_DIRECT cannot read stays on the page-cache path, counted") {
    unit_test::TempDir dir;
    unit_test::Source s = unit_test::make_source(dir.path.string(), 3, 2 * kMiB, true);
    sluice::UniqueFd fd(::open(s.f.path.c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(fd);
    // A caller's fd source whose data starts 100 bytes into its file.
    s.f.fd = fd.get();
    s.f.base = 100;
    s.f.file_size = 2 * kMiB;
    s.f.file_mtime_ns = s.f.mtime_ns;
    s.f.size = kMiB;
    Wire w;
    ColdBlockSender cold(w.tx.get(), 60000);
    CHECK(!cold.try_send(Segment{&s.f, 0, kMiB}, false));
    CHECK(cold.unaligned() == 1);
    CHECK(cold.blocks() == 0);
    CHECK(unit_test::parse_frames(w.close()).empty());
}

TEST_CASE("the next cold block's read is queued ahead and its block sent from it; a wrong guess is dropped") {
    unit_test::TempDir dir;
    const uint64_t size = 5 * kMiB + 4000; // the last block ends inside a page
    unit_test::Source s = unit_test::make_source(dir.path.string(), 9, size, true);
    std::vector<Segment> segs;
    for (uint64_t off = 0; off < size; off += kMiB) segs.push_back(Segment{&s.f, off, std::min(kMiB, size - off)});
    REQUIRE(segs.size() == 6);
    // Sent in this order, each naming the block after it in segs: block 4 is named after block
    // 3 but block 5 goes first (the guess dropped, block 5 read on the spot), then 4.
    const size_t order[] = {0, 1, 2, 3, 5, 4};
    Wire w;
    uint64_t ahead = 0, on_open_fd = 0;
    {
        ColdBlockSender cold(w.tx.get(), 60000);
        for (size_t k = 0; k < 6; ++k) {
            const size_t i = order[k];
            const Segment* next = i + 1 < segs.size() ? &segs[i + 1] : nullptr;
            REQUIRE(cold.try_send(segs[i], true, next));
        }
        cold.drain();
        ahead = cold.read_ahead();
        on_open_fd = cold.ahead_on_open_fd();
        CHECK(cold.blocks() == 6);
        CHECK(cold.fallback().empty());
    }
    CHECK(!s.f.held()); // neither the current fd nor the dropped read ahead keeps the file
    // Blocks 1, 2 and 3 came from reads queued ahead; 0 had none, 5 and 4 were not the ones named.
    CHECK(ahead == 3);
    CHECK(on_open_fd == 5); // every guess (after blocks 0-4) was of the file open: no fd of its own
    const auto frames = unit_test::parse_frames(w.close());
    REQUIRE(frames.size() == 6);
    for (size_t k = 0; k < 6; ++k) {
        const Segment& g = segs[order[k]];
        CHECK(frames[k].offset == g.offset);
        REQUIRE(frames[k].data.size() == g.length);
        CHECK(std::equal(frames[k].data.begin(), frames[k].data.end(), s.data.begin() + static_cast<long>(g.offset)));
        CHECK(frames[k].checksum == sluice::xxh3_64(s.data.data() + g.offset, g.length));
    }
    CHECK(unit_test::cached_pages(s.f.path, size) == 0); // read ahead past the page cache too
}

TEST_CASE("a read ahead is a guess: a file changed before it opens, or shrunk after its read was queued, is an error in its block's turn") {
    unit_test::TempDir dir;
    unit_test::Source a = unit_test::make_source(dir.path.string(), 11, 2 * kMiB, true);
    unit_test::Source changed = unit_test::make_source(dir.path.string(), 12, kMiB, true);
    unit_test::Source shrinks = unit_test::make_source(dir.path.string(), 13, 2 * kMiB, true);
    {
        sluice::UniqueFd fd(::open(changed.f.path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
        REQUIRE(::write(fd.get(), "more", 4) == 4);
    }
    const Segment next_changed{&changed.f, 0, kMiB};
    const Segment shrinks_second{&shrinks.f, kMiB, kMiB};
    Wire w;
    {
        ColdBlockSender cold(w.tx.get(), 60000);
        // The guess's open fails: no error yet, the block named goes out whole.
        REQUIRE(cold.try_send(Segment{&a.f, 0, kMiB}, true, &next_changed));
        const std::string grew = source_error([&] { cold.try_send(next_changed, true); });
        CHECK(grew.find(changed.f.path) != std::string::npos);
        CHECK(grew.find("changed after it was listed") != std::string::npos);
        // The second block's read is queued, then the file shrinks under it: whatever the read
        // got, the block is refused naming the file, and nothing of it is sent.
        REQUIRE(cold.try_send(Segment{&shrinks.f, 0, kMiB}, true, &shrinks_second));
        REQUIRE(::truncate(shrinks.f.path.c_str(), kMiB + 5) == 0);
        const std::string shrank = source_error([&] { cold.try_send(shrinks_second, true); });
        CHECK(shrank.find(shrinks.f.path) != std::string::npos);
        const bool said = shrank.find("shrank while being sent") != std::string::npos ||
                          shrank.find("changed while it was being sent") != std::string::npos;
        CHECK_MESSAGE(said, shrank);
        cold.drain();
        CHECK(cold.blocks() == 2);
        CHECK(cold.read_ahead() == 1); // the shrunk block's read was the one queued ahead
    }
    CHECK(!a.f.held());
    CHECK(!changed.f.held());
    CHECK(!shrinks.f.held());
    const auto frames = unit_test::parse_frames(w.close());
    REQUIRE(frames.size() == 2); // a's block and shrinks' first, read whole
    CHECK(frames[0].offset == 0);
    CHECK(std::equal(frames[0].data.begin(), frames[0].data.end(), a.data.begin()));
    CHECK(std::equal(frames[1].data.begin(), frames[1].data.end(), shrinks.data.begin()));
}

TEST_CASE("a read ahead of the open file's next block uses its fd; another file's opens its own") {
    unit_test::TempDir dir;
    unit_test::Source a = unit_test::make_source(dir.path.string(), 21, 2 * kMiB, true);
    unit_test::Source b = unit_test::make_source(dir.path.string(), 22, 2 * kMiB, true);
    const Segment segs[] = {{&a.f, 0, kMiB}, {&a.f, kMiB, kMiB}, {&b.f, 0, kMiB}, {&b.f, kMiB, kMiB}};
    Wire w;
    {
        ColdBlockSender cold(w.tx.get(), 60000);
        for (size_t i = 0; i < 4; ++i) REQUIRE(cold.try_send(segs[i], true, i + 1 < 4 ? &segs[i + 1] : nullptr));
        cold.drain();
        CHECK(cold.blocks() == 4);
        CHECK(cold.read_ahead() == 3);       // every block but the first came from a read ahead
        CHECK(cold.ahead_on_open_fd() == 2); // a's and b's second blocks; b's first opened b
        CHECK(cold.fallback().empty());
    }
    CHECK(!a.f.held());
    CHECK(!b.f.held());
    const auto frames = unit_test::parse_frames(w.close());
    REQUIRE(frames.size() == 4);
    for (size_t i = 0; i < 4; ++i) {
        const unit_test::Source& s = segs[i].file == &a.f ? a : b;
        CHECK(frames[i].offset == segs[i].offset);
        REQUIRE(frames[i].data.size() == kMiB);
        CHECK(std::equal(frames[i].data.begin(), frames[i].data.end(), s.data.begin() + static_cast<long>(segs[i].offset)));
    }
}
