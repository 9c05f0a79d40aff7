#pragma once
// Opens source files for a data stream (one open per file, not per block) and computes
// block checksums by reading the file with pread into one buffer the stream keeps for the
// whole transfer.
//
// Not through a mapping: a file truncated while a mapping of it is read (logrotate's
// copytruncate does exactly that) raises SIGBUS, which kills the process (and a Python
// interpreter with it) with no message. pread returns a short count instead, which becomes
// an error naming the file. The buffer is allocated once and reused, so there is no
// per-file or per-block allocation or mapping (mmap set-up and munmap's TLB flush per file
// were a measured cost of their own).
#include <sys/uio.h>

#include <cstdint>
#include <memory>

#include "core/io/unique_fd.hpp"
#include "core/checksum/xxh3.hpp"
#include "send/plan/source_tree.hpp"

namespace sluice {

// Throws Error(source) "source 'PATH' shrank while being sent: expected N bytes at offset X,
// got Y": a read of f found end of file before the listed size (offset is in the file).
[[noreturn]] void throw_source_shrank(const SourceFile& f, uint64_t file_offset, uint64_t expected, uint64_t got);

class SourceReader {
public:
    SourceReader() = default;
    // The open file is held (SourceFile::hold) while it is current: it is checked again when
    // the reader moves on, so its record must outlive the segment that opened it.
    ~SourceReader();
    SourceReader(const SourceReader&) = delete;
    SourceReader& operator=(const SourceReader&) = delete;
    // Bytes read per pread for a checksum: small enough to stay in the CPU's L2 cache, so the
    // hash reads what the copy just wrote while it is hot; large enough that the syscalls are
    // few (32 per 8 MiB block).
    static constexpr size_t kBufferBytes = size_t{256} << 10;

    // The fd of f, opened on first use; checks that f still has the size and mtime the
    // manifest announced (a changed source is an error, never sent torn).
    int open(const SourceFile& f);
    // XXH3-64 of [offset, offset+length) of the open file. A file that ends before
    // offset+length (it shrank) is an Error(source) naming it, never a signal.
    uint64_t checksum(const SourceFile& f, uint64_t offset, uint64_t length);
    // Checks that the file this reader has open still has its listed size and mtime: a file
    // written to while it was being sent is reported, never delivered torn. Called when the
    // reader moves to another file and when the stream ends.
    void check_unchanged();
    // Reads all of f (offset 0, f.size bytes) into out with pread and checks, after the read,
    // that f still has its listed size and mtime: the bytes read are the file as listed.
    void read_whole(const SourceFile& f, unsigned char* out);

    // For callers that keep several files open at once (small_file_batch.cpp reads many in
    // flight): opens f as open() does, with its checks, and hands the fd over.
    static UniqueFd open_checked(const SourceFile& f);
    // Throws Error(source) if the open file fd no longer has f's listed size and mtime.
    static void check_unchanged(int fd, const SourceFile& f);
    // pread of fd until want bytes are in out or the file ends; returns the bytes read. A read
    // error is an Error(source) naming f.
    static size_t pread_full(int fd, const SourceFile& f, unsigned char* out, size_t want, uint64_t file_offset);
    // The same with preadv into n iovecs, which it advances as it reads (pass a copy).
    static size_t preadv_full(int fd, const SourceFile& f, iovec* iov, size_t n, uint64_t file_offset);

private:
    const SourceFile* current_ = nullptr;
    Xxh3 hash_;
    UniqueFd fd_;
    // The checksum's read buffer: allocated on the first checksum (a zc stream hashes its own
    // buffers and never needs it), then kept for the stream's life.
    std::unique_ptr<unsigned char[]> buf_;
};

} // namespace sluice
