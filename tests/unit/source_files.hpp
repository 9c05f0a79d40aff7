#pragma once
// Source files for the send paths' tests (written, fsynced and optionally dropped from the page
// cache), their cached pages, and the BLOCK frames a path wrote to a socket.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/io/file_times.hpp"
#include "core/io/unique_fd.hpp"
#include "core/wire/codec.hpp"
#include "send/plan/source_tree.hpp"

namespace unit_test {

struct Source {
    std::vector<unsigned char> data;
    sluice::SourceFile f;
};

inline Source make_source(const std::string& dir, uint64_t id, size_t size, bool cold) {
    Source s;
    s.data.resize(size);
    std::mt19937_64 rng(id * 7919 + size);
    for (auto& b : s.data) b = static_cast<unsigned char>(rng());
    s.f.file_id = id;
    s.f.size = size;
    s.f.path = dir + "/f" + std::to_string(id);
    s.f.rel = "f" + std::to_string(id);
    sluice::UniqueFd fd(::open(s.f.path.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644));
    REQUIRE(fd);
    REQUIRE(::write(fd.get(), s.data.data(), size) == static_cast<ssize_t>(size));
    REQUIRE(::fsync(fd.get()) == 0);
    if (cold) REQUIRE(::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED) == 0);
    struct stat st = {};
    REQUIRE(::fstat(fd.get(), &st) == 0);
    s.f.mtime_ns = sluice::ns_of(st.st_mtim);
    return s;
}

// Reads [offset, offset + length) of path into the page cache without read-ahead beyond it.
inline void cache_range(const std::string& path, uint64_t offset, uint64_t length) {
    sluice::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(fd);
    REQUIRE(::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_RANDOM) == 0);
    std::vector<unsigned char> b(length);
    REQUIRE(::pread(fd.get(), b.data(), length, static_cast<off_t>(offset)) == static_cast<ssize_t>(length));
}

inline size_t cached_pages(const std::string& path, size_t size) {
    sluice::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
    REQUIRE(p != MAP_FAILED);
    std::vector<unsigned char> vec((size + 4095) / 4096);
    REQUIRE(::mincore(p, size, vec.data()) == 0);
    ::munmap(p, size);
    size_t n = 0;
    for (unsigned char v : vec) n += v & 1;
    return n;
}

// BLOCK frames: (file_id, offset, checksum, data).
struct Frame {
    uint64_t file_id, offset, checksum;
    std::vector<unsigned char> data;
};
// The BLOCK frames in plain bytes `in` (all of them whole), in order.
inline std::vector<Frame> parse_frames(const std::vector<unsigned char>& in) {
    std::vector<Frame> out;
    size_t at = 0;
    while (at < in.size()) {
        REQUIRE(in.size() - at >= sluice::wire::kFrameHeaderBytes + sluice::wire::kBlockPrefixBytes);
        auto h = sluice::wire::decode_frame_header({in.data() + at, sluice::wire::kFrameHeaderBytes});
        at += sluice::wire::kFrameHeaderBytes;
        auto p = sluice::wire::decode_block_prefix({in.data() + at, sluice::wire::kBlockPrefixBytes});
        at += sluice::wire::kBlockPrefixBytes;
        const size_t len = h.length - sluice::wire::kBlockPrefixBytes;
        REQUIRE(in.size() - at >= len);
        out.push_back(Frame{p.file_id, p.offset, p.checksum, {in.begin() + at, in.begin() + at + len}});
        at += len;
    }
    return out;
}

// All bytes of fd until it closes.
inline std::vector<unsigned char> read_all(int fd) {
    std::vector<unsigned char> in;
    unsigned char buf[1 << 16];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        REQUIRE(n >= 0);
        if (n == 0) break;
        in.insert(in.end(), buf, buf + n);
    }
    return in;
}

inline std::vector<Frame> read_frames(int fd) { return parse_frames(read_all(fd)); }

// A socket pair whose far end a thread reads until the near end (tx, the path's socket) closes.
struct Wire {
    sluice::UniqueFd tx, rx;
    std::vector<unsigned char> bytes;
    std::thread reader;
    Wire() {
        int sv[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        tx = sluice::UniqueFd(sv[0]);
        rx = sluice::UniqueFd(sv[1]);
        reader = std::thread([this] { bytes = read_all(rx.get()); });
    }
    // Closes tx; all the far end read.
    const std::vector<unsigned char>& close() {
        if (reader.joinable()) {
            tx.reset();
            reader.join();
        }
        return bytes;
    }
    ~Wire() { close(); }
};

} // namespace unit_test
