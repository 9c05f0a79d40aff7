#include "recv/store/journal.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/io/sys_error.hpp"
#include "core/io/unique_fd.hpp"

namespace sluice::journal {

namespace {

constexpr size_t kHeader = 24, kRecord = 32;
constexpr char kMagic[4] = {'S', 'L', 'J', '2'};
constexpr uint64_t kMaxJournalBytes = 64ull << 20;

void put64(unsigned char* p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint64_t get64(const unsigned char* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return v;
}

uint64_t check(uint64_t size, int64_t mtime, uint64_t off, uint64_t len, uint64_t sum) {
    uint64_t f[5] = {size, static_cast<uint64_t>(mtime), off, len, sum};
    return XXH3_64bits(f, sizeof f);
}

void write_all(int fd, const unsigned char* p, size_t n, const std::string& what) {
    while (n) {
        ssize_t w = ::write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            throw_errno(ErrorCode::destination, what);
        }
        p += w;
        n -= static_cast<size_t>(w);
    }
}

} // namespace

std::string name_for(const std::string& temp_name) { return temp_name + ".j"; }

Contents load(int dir, const std::string& temp, uint64_t size, int64_t mtime) {
    UniqueFd fd(::openat(dir, name_for(temp).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    const bool absent = !fd && errno == ENOENT;
    Contents c;
    c.present = !absent; // a symlink there (ELOOP) is removed too
    if (!fd) return c;
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) > kMaxJournalBytes) return c;
    std::vector<unsigned char> buf(static_cast<size_t>(st.st_size));
    if (::pread(fd.get(), buf.data(), buf.size(), 0) != static_cast<ssize_t>(buf.size())) return c;
    if (buf.size() < kHeader || std::memcmp(buf.data(), kMagic, 4) != 0) return c;
    if (get64(&buf[8]) != size || static_cast<int64_t>(get64(&buf[16])) != mtime) return c;
    // The temporary file must still be there and long enough for what the journal claims.
    struct stat data {};
    if (::fstatat(dir, temp.c_str(), &data, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(data.st_mode)) return c;
    for (size_t at = kHeader; at + kRecord <= buf.size(); at += kRecord) {
        uint64_t off = get64(&buf[at]), len = get64(&buf[at + 8]), sum = get64(&buf[at + 16]);
        if (get64(&buf[at + 24]) != check(size, mtime, off, len, sum)) break; // torn tail
        if (off > size || len > size - off || len == 0 || off + len > static_cast<uint64_t>(data.st_size)) break;
        c.blocks.push_back({off, len, sum});
    }
    // Sorted and merged; overlapping records (a block received twice) collapse.
    Ranges r;
    for (auto& b : c.blocks) r.emplace_back(b.offset, b.offset + b.length);
    std::sort(r.begin(), r.end());
    for (auto& x : r) {
        if (!c.ranges.empty() && x.first <= c.ranges.back().second)
            c.ranges.back().second = std::max(c.ranges.back().second, x.second);
        else
            c.ranges.push_back(x);
    }
    return c;
}

void create(int dir, const std::string& temp, uint64_t size, int64_t mtime) {
    std::string name = name_for(temp);
    UniqueFd fd(::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) throw_errno(ErrorCode::destination, "cannot create journal '" + name + "'");
    unsigned char h[kHeader] = {};
    std::memcpy(h, kMagic, sizeof kMagic);
    put64(&h[8], size);
    put64(&h[16], static_cast<uint64_t>(mtime));
    write_all(fd.get(), h, sizeof h, "cannot write journal '" + name + "'");
}

void append(int dir, const std::string& temp, uint64_t size, int64_t mtime, uint64_t off, uint64_t len, uint64_t sum) {
    std::string name = name_for(temp);
    UniqueFd fd(::openat(dir, name.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) throw_errno(ErrorCode::destination, "cannot open journal '" + name + "'");
    unsigned char rec[kRecord];
    put64(&rec[0], off);
    put64(&rec[8], len);
    put64(&rec[16], sum);
    put64(&rec[24], check(size, mtime, off, len, sum));
    write_all(fd.get(), rec, sizeof rec, "cannot write journal '" + name + "'");
}

void remove(int dir, const std::string& temp) { ::unlinkat(dir, name_for(temp).c_str(), 0); }

} // namespace sluice::journal
