// An encrypted stream's send path (paths/tls_record_sender.cpp) reads blocks not in the page
// cache with O_DIRECT, the next block's read queued ahead (paths/direct_block_reader.hpp), and
// cached blocks through the page cache. Checked here, on the records' plain content: every
// block arrives whole as one BLOCK frame with its bytes and their XXH3, a last block that is
// not a multiple of 4096 included; which blocks were read direct and which ahead (counted by
// the reader, from the cache state the test set); the cold reads leave no pages cached; a block
// larger than the writer is hashed in the O_DIRECT buffer (one read) when cold, read twice and
// said so when cached.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "core/checksum/xxh3.hpp"
#include "core/io/unique_fd.hpp"
#include "core/tls/record_reader.hpp"
#include "core/tls/record_writer.hpp"
#include "send/paths/block_sender.hpp"
#include "send/paths/direct_block_reader.hpp"
#include "source_files.hpp"
#include "temp_dir.hpp"

namespace {

using sluice::Segment;
namespace tls = sluice::tls;
constexpr uint64_t kMiB = 1 << 20;

tls::TrafficKey key() {
    tls::TrafficKey k;
    for (size_t i = 0; i < k.key.size(); ++i) k.key[i] = static_cast<unsigned char>(11 + i);
    for (size_t i = 0; i < k.iv.size(); ++i) k.iv[i] = static_cast<unsigned char>(40 + i);
    return k;
}

// The plain content of the records in `in` (opened in order: a record altered, dropped or
// reordered fails its tag).
std::vector<unsigned char> open_all(const std::vector<unsigned char>& in) {
    tls::RecordReader r(key(), "data stream 1", 1 << 20);
    std::vector<unsigned char> plain, out(2 << 20);
    size_t at = 0;
    while (at < in.size()) {
        const size_t n = std::min(r.room_bytes(), in.size() - at);
        std::memcpy(r.room(), in.data() + at, n);
        at += n;
        const size_t got = r.open(n, out.data());
        plain.insert(plain.end(), out.begin(), out.begin() + static_cast<long>(got));
    }
    CHECK(!r.holding());
    return plain;
}

using unit_test::Wire;

void check_frame(const unit_test::Frame& fr, const unit_test::Source& s, uint64_t offset, uint64_t len) {
    CHECK(fr.file_id == s.f.file_id);
    CHECK(fr.offset == offset);
    REQUIRE(fr.data.size() == len);
    CHECK(std::equal(fr.data.begin(), fr.data.end(), s.data.begin() + static_cast<long>(offset)));
    CHECK(fr.checksum == sluice::xxh3_64(s.data.data() + offset, len));
}

} // namespace

TEST_CASE("an encrypted stream reads cold blocks with O_DIRECT, the next one ahead, and cached ones through the page cache") {
    unit_test::TempDir dir;
    const uint64_t size = 4 * kMiB + 123; // the last block is not a multiple of 4096
    unit_test::Source s = unit_test::make_source(dir.path.string(), 7, size, true);
    unit_test::cache_range(s.f.path, 2 * kMiB, kMiB); // block 2 cached, the others cold
    std::vector<Segment> segs;
    for (uint64_t off = 0; off < size; off += kMiB) segs.push_back(Segment{&s.f, off, std::min(kMiB, size - off)});

    Wire w;
    {
        tls::RecordWriter writer(w.tx.get(), key(), "data stream 1", kMiB);
        auto sender = sluice::make_tls_record_sender(writer, 60000);
        for (size_t i = 0; i < segs.size(); ++i) sender->send(segs[i], true, i + 1 < segs.size() ? &segs[i + 1] : nullptr);
        sender->reader().check_unchanged();
        const sluice::DirectBlockReader* direct = sender->direct_reader();
        REQUIRE(direct);
        CHECK(direct->blocks() == 4);
        CHECK(direct->bytes() == size - kMiB);
        CHECK(direct->unaligned() == 0);
        // Blocks 1 and 4 were read while the block before them was sealed and sent; block 3's
        // read was not queued ahead, as block 2 (before it) was cached and read on its own.
        CHECK(direct->read_ahead() == 2);
        CHECK(direct->ahead_on_open_fd() == 2);
        CHECK(sender->fallback().empty());
    }
    CHECK(!s.f.held());
    const auto frames = unit_test::parse_frames(open_all(w.close()));
    REQUIRE(frames.size() == segs.size());
    for (size_t i = 0; i < segs.size(); ++i) check_frame(frames[i], s, segs[i].offset, segs[i].length);
    // The cold blocks were read past the page cache: only what the test cached is there (at
    // most: on a machine short of memory, reclaim may take some of it back, 255 of 256 seen).
    CHECK(unit_test::cached_pages(s.f.path, size) <= kMiB / 4096);
}

TEST_CASE("a block larger than the writer: hashed in the O_DIRECT buffer when cold, read twice and said so when cached") {
    unit_test::TempDir dir;
    const uint64_t size = kMiB + 5;
    unit_test::Source s = unit_test::make_source(dir.path.string(), 3, size, true);
    for (bool cached : {false, true}) {
        CAPTURE(cached);
        if (cached) unit_test::cache_range(s.f.path, 0, size);
        Wire w;
        std::string fallback;
        {
            tls::RecordWriter writer(w.tx.get(), key(), "data stream 1", 256 << 10);
            auto sender = sluice::make_tls_record_sender(writer, 60000);
            sender->send(Segment{&s.f, 0, size}, false, nullptr);
            CHECK(sender->direct_reader()->blocks() == (cached ? 0 : 1));
            fallback = sender->fallback();
        }
        CHECK((fallback.find("read twice") != std::string::npos) == cached);
        const auto frames = unit_test::parse_frames(open_all(w.close()));
        REQUIRE(frames.size() == 1);
        check_frame(frames[0], s, 0, size);
    }
}
