// The small-file batch queues many reads at once (O_DIRECT for files not cached, the page cache
// for cached ones, sendfile for cached files above kInlineBytes) and sends the files in chunks
// with sendmsg. Whatever the mix, the stream must carry every file once, in the order added,
// each as one BLOCK frame with its bytes and their XXH3; the buffer's alignment padding must
// never reach the wire; cold files must be read with O_DIRECT and leave no pages cached.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <deque>
#include <random>
#include <thread>
#include <vector>

#include "core/checksum/xxh3.hpp"
#include "core/io/file_times.hpp"
#include "core/io/page_cache.hpp"
#include "core/io/unique_fd.hpp"
#include "core/wire/codec.hpp"
#include "send/paths/small_file_batch.hpp"
#include "sluice/error.hpp"
#include "source_files.hpp"
#include "temp_dir.hpp"

namespace {

using sluice::SmallFileBatch;
using unit_test::Frame;
using unit_test::Source;
using unit_test::cached_pages;
using unit_test::make_source;
using unit_test::read_frames;

// cachestat(2)'s dirty and writeback pages of the whole file (0 where the kernel lacks it).
uint64_t dirty_pages(const std::string& path) {
    sluice::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    const auto c = fd ? sluice::page_cache_counts(fd.get(), 0, 0) : std::nullopt;
    return c ? c->dirty : 0;
}


void send_all(std::deque<Source>& files, std::vector<Frame>& got, uint64_t& direct, uint64_t& dropped,
              std::string& fallback) {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    sluice::UniqueFd tx(sv[0]), rx(sv[1]);
    std::thread reader([&] { got = read_frames(rx.get()); });
    {
        SmallFileBatch batch(tx.get());
        for (auto& s : files) {
            sluice::Segment seg{&s.f, 0, s.f.size};
            REQUIRE(SmallFileBatch::fits(seg));
            batch.add(seg);
        }
        batch.flush(false);
        direct = batch.direct_reads();
        dropped = batch.dropped();
        fallback = batch.fallback();
    }
    tx.reset();
    reader.join();
}

} // namespace

TEST_CASE("the small-file batch sends every file whole, in order, cold and cached, across chunk boundaries") {
    unit_test::TempDir dir;
    // Sizes around the alignment unit, the inline limit and the largest batched file, and
    // enough small files to wrap the chunk ring and the reads in flight several times.
    const size_t a = SmallFileBatch::kAlign;
    std::vector<size_t> sizes = {1,      a - 25, a - 24, a - 1, a, a + 1, 3 * a + 17, SmallFileBatch::kInlineBytes - 1,
                                 SmallFileBatch::kInlineBytes, SmallFileBatch::kInlineBytes + 1, 200'000,
                                 SmallFileBatch::kMaxFileBytes - 1, SmallFileBatch::kMaxFileBytes};
    for (int i = 0; i < 700; ++i) sizes.push_back(1 + (i * 977) % 9000);
    for (int i = 0; i < 24; ++i) sizes.push_back(300'000 + i * 4099);
    std::deque<Source> files;
    for (size_t i = 0; i < sizes.size(); ++i) files.push_back(make_source(dir.path.string(), i, sizes[i], i % 3 != 1));
    size_t cold = 0, cold_pages_before = 0;
    for (size_t i = 0; i < files.size(); ++i)
        if (i % 3 != 1) {
            ++cold;
            cold_pages_before += cached_pages(files[i].f.path, files[i].f.size);
        }
    std::vector<Frame> got;
    uint64_t direct = 0, dropped = 0;
    std::string fallback;
    send_all(files, got, direct, dropped, fallback);
    REQUIRE(got.size() == files.size());
    for (size_t i = 0; i < files.size(); ++i) {
        CAPTURE(i);
        CAPTURE(files[i].f.size);
        CHECK(got[i].file_id == files[i].f.file_id);
        CHECK(got[i].offset == 0);
        CHECK(got[i].data == files[i].data);
        CHECK(got[i].checksum == sluice::xxh3_64(files[i].data.data(), files[i].data.size()));
    }
    // Every cold file was read with O_DIRECT (this test's /tmp takes it), or, where the file
    // system refused, through the page cache with its pages dropped and the reason given.
    // A cached file may have left the page cache before its read (memory pressure, or another
    // process dropping caches: a busy CI machine did): it is then read as cold, and is not
    // cached afterwards. Any other cached file must have been read through the cache.
    size_t evicted = 0;
    for (size_t i = 0; i < files.size(); ++i)
        if (i % 3 == 1 && cached_pages(files[i].f.path, files[i].f.size) < (files[i].f.size + 4095) / 4096) ++evicted;
    CAPTURE(evicted);
    CHECK(direct + dropped >= cold);
    CHECK(direct + dropped <= cold + evicted);
    if (fallback.empty()) CHECK(direct >= cold);
    size_t cold_pages_after = 0;
    for (size_t i = 0; i < files.size(); ++i)
        if (i % 3 != 1) cold_pages_after += cached_pages(files[i].f.path, files[i].f.size);
    CHECK(cold_pages_after <= cold_pages_before + cold); // at most a page per file left by a partial read
}

// A caller's range longer than what its file holds there, identity (size, mtime) unchanged:
// the O_DIRECT read ends early, pread finds the end of file too, and the error names the file.
TEST_CASE("a batched range past the end of its file is an Error(source) naming it") {
    unit_test::TempDir dir;
    std::deque<Source> files;
    files.push_back(make_source(dir.path.string(), 0, 3 * 4096 + 100, true));
    sluice::UniqueFd fd(::open(files[0].f.path.c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(fd);
    sluice::SourceFile& f = files[0].f;
    f.fd = fd.get();
    f.file_size = 3 * 4096 + 100;
    f.file_mtime_ns = f.mtime_ns;
    f.path = "fd " + std::to_string(fd.get());
    f.base = 8192;           // the range starts 8192 bytes in (aligned: read with O_DIRECT)...
    f.size = 4 * 4096 + 100; // ...and claims more than the 4196 bytes the file has there
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    sluice::UniqueFd tx(sv[0]), rx(sv[1]);
    std::thread reader([&] { (void)read_frames(rx.get()); });
    try {
        SmallFileBatch batch(tx.get());
        batch.add(sluice::Segment{&f, 0, f.size});
        batch.flush(false);
        FAIL("no error");
    } catch (const sluice::Error& e) {
        CHECK(e.code() == sluice::ErrorCode::source);
        CHECK(std::string(e.what()) ==
              "source '" + f.path + "' shrank while being sent: expected 16484 bytes at offset 8192, got 4196"
              "; run the transfer again once nothing truncates it");
    }
    tx.reset();
    reader.join();
}

// A file just written (an update's changed file) has dirty pages: an O_DIRECT read would write
// them back and wait for the disk first, so it is read through the page cache even though the
// rest of it is not cached, and its bytes are the new ones.
TEST_CASE("a file with dirty pages is read through the page cache, not with O_DIRECT") {
    unit_test::TempDir dir;
    std::deque<Source> files;
    files.push_back(make_source(dir.path.string(), 1, 40000, true)); // written, synced, dropped: cold
    Source& s = files.back();
    sluice::UniqueFd fd(::open(s.f.path.c_str(), O_WRONLY | O_CLOEXEC));
    REQUIRE(fd);
    for (size_t i = 8192; i < 12288; ++i) s.data[i] ^= 0x5a;
    REQUIRE(::pwrite(fd.get(), s.data.data() + 8192, 4096, 8192) == 4096); // one dirty page
    struct stat st = {};
    REQUIRE(::fstat(fd.get(), &st) == 0);
    s.f.mtime_ns = sluice::ns_of(st.st_mtim);
    fd.reset();
    const uint64_t dirty = dirty_pages(s.f.path);
    std::vector<Frame> got;
    uint64_t direct = 0, dropped = 0;
    std::string fallback;
    send_all(files, got, direct, dropped, fallback);
    REQUIRE(got.size() == 1);
    CHECK(got[0].data == s.data);
    CHECK(got[0].checksum == sluice::xxh3_64(s.data.data(), s.data.size()));
    // Dirty a moment before the batch looked (only a `sync` elsewhere in those microseconds
    // could clean it: then nothing is checked but the bytes). After the read the page is clean
    // if O_DIRECT wrote it back, which is what this checks against.
    if (dirty > 0) CHECK(direct == 0);
}
