// The cold-read pool's registry (issue 15): a range a pool read is filling is joined, not sent
// from (cachestat counts its pages before they are readable); ranges of other files or beside
// it are not; reads ahead are not duplicated; when a read ends, its connection and every
// joiner are woken exactly once.
#include <doctest/doctest.h>

#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "core/io/unique_fd.hpp"
#include "serve/engine/cold_reads.hpp"

using namespace sluice;
using namespace sluice::serve;

namespace {

ColdJob read_job(int fd, const FileKey& key, uint64_t off, uint64_t len, WakeQueue* back, uint32_t conn) {
    return ColdJob{fd, off, len, back, conn, 7, nullptr, key, 0, nullptr};
}

// Every ColdDone pushed to q within a generous deadline, until `want` of them came.
std::vector<ColdDone> wakes(WakeQueue& q, size_t want) {
    std::vector<ColdDone> all, got;
    for (int i = 0; i < 600 && all.size() < want; ++i) { // 600 x 100 ms: a loaded machine is slow
        pollfd p{q.fd(), POLLIN, 0};
        ::poll(&p, 1, 100);
        uint64_t v;
        if (p.revents & POLLIN) (void)!::read(q.fd(), &v, sizeof v);
        q.take(got);
        all.insert(all.end(), got.begin(), got.end());
        got.clear();
    }
    return all;
}

} // namespace

TEST_CASE("a range a pool read is filling is joined; other files and ranges beside it are not") {
    ColdReads pool(0, false); // no thread: what is submitted stays in flight for the checks
    WakeQueue q;
    const FileKey a{1, 10}, b{1, 11};
    pool.submit(read_job(-1, a, 4 << 20, 4 << 20, &q, 1));
    CHECK(pool.reading_joined(a, 4 << 20, 1 << 20, &q, 2, 7));
    CHECK(pool.reading_joined(a, (8 << 20) - 1, 1 << 20, &q, 3, 7)); // overlaps its last byte
    CHECK_FALSE(pool.reading_joined(a, 8 << 20, 1 << 20, &q, 4, 7)); // just after it
    CHECK_FALSE(pool.reading_joined(a, 3 << 20, 1 << 20, &q, 4, 7)); // just before it
    CHECK_FALSE(pool.reading_joined(b, 4 << 20, 1 << 20, &q, 4, 7)); // another file
}

TEST_CASE("a finished read wakes its connection and its joiners once, and is forgotten") {
    CHECK(probe_null_sink() == 0); // sendfile into /dev/null works on any kernel this builds for
    for (bool null_sink : {true, false}) {
        CAPTURE(null_sink);
        UniqueFd f(::memfd_create("cold-reads-test", MFD_CLOEXEC));
        REQUIRE(f);
        const std::string data(3 << 20, 'x');
        REQUIRE(::pwrite(f.get(), data.data(), data.size(), 0) == static_cast<ssize_t>(data.size()));
        const FileKey key{2, 20};
        WakeQueue q;
        ColdReads pool(1, null_sink);
        pool.submit(read_job(f.get(), key, 0, data.size(), &q, 1));
        // Joined while in flight, or not at all once it ended: each way, one wake per party.
        size_t joined = 0;
        while (joined < 1000 && pool.reading_joined(key, 0, 4096, &q, 100 + static_cast<uint32_t>(joined), 7)) ++joined;
        const std::vector<ColdDone> got = wakes(q, 1 + joined);
        REQUIRE(got.size() == 1 + joined);
        size_t owner = 0;
        for (const ColdDone& d : got) {
            CHECK(d.gen == 7);
            CHECK(d.err == 0);
            owner += d.conn == 1;
        }
        CHECK(owner == 1);
        CHECK_FALSE(pool.reading_joined(key, 0, 4096, &q, 9, 7));
    }
}

TEST_CASE("a read ahead overlapping a read in flight is not submitted again") {
    ColdReads pool(0, false);
    WakeQueue q;
    const FileKey key{3, 30};
    pool.submit(read_job(-1, key, 0, 4 << 20, &q, 1));
    pool.read_ahead(read_job(-1, key, 2 << 20, 4 << 20, nullptr, 0)); // overlaps: dropped
    CHECK_FALSE(pool.reading_joined(key, 5 << 20, 1 << 20, &q, 2, 7));
    pool.read_ahead(read_job(-1, key, 4 << 20, 4 << 20, nullptr, 0)); // beside it: in flight now
    CHECK(pool.reading_joined(key, 5 << 20, 1 << 20, &q, 2, 7));
}
