#include "recv/store/sums_cache.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "core/checksum/xxh3.hpp"
#include "core/io/file_times.hpp"

namespace sluice {

namespace {

constexpr char kMagic[8] = {'S', 'L', 'S', 'U', 'M', 'S', '0', '1'};
constexpr size_t kHeader = 64; // magic and 7 fields of 8 bytes
// The largest entry read: as many sums as one BLOCK_SUMS frame holds (docs/protocol.md).
constexpr uint64_t kMaxSums = 1u << 20;


void put64(std::vector<unsigned char>& out, uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}

uint64_t get64(const unsigned char* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
    return v;
}

bool read_all(int fd, unsigned char* p, size_t n) {
    for (size_t got = 0; got < n;) {
        ssize_t k = ::pread(fd, p + got, n - got, static_cast<off_t>(got));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        got += static_cast<size_t>(k);
    }
    return true;
}

bool write_all(int fd, const unsigned char* p, size_t n) {
    while (n) {
        ssize_t k = ::write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        n -= static_cast<size_t>(k);
    }
    return true;
}

bool kernel_has_multigrain() {
    static const bool yes = [] {
        struct utsname u {};
        int major = 0, minor = 0;
        if (::uname(&u) != 0 || std::sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
        return major > 6 || (major == 6 && minor >= 13);
    }();
    return yes;
}

// Creates each missing component of path, 0700 (only the last one must be ours: see open_dir).
void make_dirs(const std::string& path) {
    for (size_t at = 1; at <= path.size(); ++at)
        if (at == path.size() || path[at] == '/') ::mkdir(path.substr(0, at).c_str(), 0700);
}

} // namespace

bool fine_grained_ctime(int fd) {
    struct statfs s {};
    if (!kernel_has_multigrain() || ::fstatfs(fd, &s) != 0) return false;
    switch (static_cast<unsigned long>(s.f_type)) {
    // ext2 and ext3 share ext4's magic: mounted by the ext4 driver (the usual way) they have
    // multigrain ctime too; a kernel's separate ext2 driver does not, and cannot be told
    // apart here (docs/guarantees.md names it).
    case EXT4_SUPER_MAGIC:
    case XFS_SUPER_MAGIC:
    case BTRFS_SUPER_MAGIC:
    case TMPFS_MAGIC: return true;
    default: return false;
    }
}

std::string SumsCache::entry_name(uint64_t dev, uint64_t ino) {
    char b[48];
    std::snprintf(b, sizeof b, "%llx-%llx", static_cast<unsigned long long>(dev), static_cast<unsigned long long>(ino));
    return b;
}

std::vector<unsigned char> SumsCache::encode(const struct stat& st, uint64_t block_size, const std::vector<uint64_t>& sums) {
    std::vector<unsigned char> out(kMagic, kMagic + sizeof kMagic);
    put64(out, st.st_dev);
    put64(out, st.st_ino);
    put64(out, static_cast<uint64_t>(st.st_size));
    put64(out, static_cast<uint64_t>(ns_of(st.st_mtim)));
    put64(out, static_cast<uint64_t>(ns_of(st.st_ctim)));
    put64(out, block_size);
    put64(out, sums.size());
    for (uint64_t s : sums) put64(out, s);
    put64(out, xxh3_64(out.data(), out.size()));
    return out;
}

UniqueFd SumsCache::open_dir(bool create, std::string* why) const {
    if (create) make_dirs(dir_);
    UniqueFd d(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (!d || ::fstat(d.get(), &st) != 0) {
        if (why && create) *why = "update: the block-sums cache '" + dir_ + "' cannot be opened: " + std::strerror(errno);
        return UniqueFd();
    }
    // Entries are trusted once their key matches: a directory someone else can write to could
    // hold planted ones.
    if (st.st_uid != ::geteuid() || (st.st_mode & 022)) {
        if (why) *why = "update: the block-sums cache '" + dir_ + "' is not a directory owned by this user and writable by it alone: not used";
        return UniqueFd();
    }
    return d;
}

std::optional<std::vector<uint64_t>> SumsCache::load(const struct stat& st, uint64_t block_size) const {
    if (!enabled() || block_size == 0 || st.st_size <= 0) return std::nullopt;
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    const uint64_t count = (size + block_size - 1) / block_size;
    if (count < kMinBlocks || count > kMaxSums) return std::nullopt;
    UniqueFd dir = open_dir(false, nullptr);
    if (!dir) return std::nullopt;
    UniqueFd fd(::openat(dir.get(), entry_name(st.st_dev, st.st_ino).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    struct stat es {};
    const size_t want = kHeader + 8 * count + 8;
    if (!fd || ::fstat(fd.get(), &es) != 0 || !S_ISREG(es.st_mode) || es.st_uid != ::geteuid() ||
        static_cast<uint64_t>(es.st_size) != want)
        return std::nullopt;
    std::vector<unsigned char> b(want);
    if (!read_all(fd.get(), b.data(), want)) return std::nullopt;
    if (std::memcmp(b.data(), kMagic, sizeof kMagic) != 0 || get64(&b[want - 8]) != xxh3_64(b.data(), want - 8)) return std::nullopt;
    const unsigned char* h = b.data() + 8;
    if (get64(h) != st.st_dev || get64(h + 8) != st.st_ino || get64(h + 16) != size ||
        get64(h + 24) != static_cast<uint64_t>(ns_of(st.st_mtim)) || get64(h + 32) != static_cast<uint64_t>(ns_of(st.st_ctim)) ||
        get64(h + 40) != block_size || get64(h + 48) != count)
        return std::nullopt; // stale: the file (or the block size) changed since it was stored
    std::vector<uint64_t> sums(count);
    for (uint64_t i = 0; i < count; ++i) sums[i] = get64(b.data() + kHeader + 8 * i);
    return sums;
}

bool SumsCache::wants(uint64_t size) const {
    const uint64_t b = block_size();
    if (!enabled() || b == 0 || size == 0) return false;
    const uint64_t count = (size + b - 1) / b;
    return count >= kMinBlocks && count <= kMaxSums;
}

void SumsCache::keep(const RecvFile& f) {
    const uint64_t block_size = block_size_.load(), size = f.entry.size;
    if (!wants(size) || f.unnamed) return;
    const uint64_t count = (size + block_size - 1) / block_size;
    std::vector<uint64_t> sums(count);
    std::vector<bool> have(count);
    uint64_t filled = 0;
    // Only a layout of whole blocks (what `sluice send` sends and REUSE reuses) gives one sum
    // per block; any other (blocks of another size, a resume) is not kept.
    for (const auto& [off, len, sum] : f.sums) {
        if (off % block_size != 0 || off >= size || len != std::min(block_size, size - off)) return;
        const uint64_t i = off / block_size;
        if (have[i]) return;
        have[i] = true;
        sums[i] = sum;
        ++filled;
    }
    if (filled != count) return;
    std::lock_guard lk(mu_);
    kept_.push_back({f.parent, f.name, size, f.entry.mtime_ns, block_size, std::move(sums)});
}

uint64_t SumsCache::flush(const DestTree& tree, const std::function<void()>& working, std::string& note) {
    std::vector<Kept> kept;
    {
        std::lock_guard lk(mu_);
        kept.swap(kept_);
    }
    if (kept.empty()) return 0;
    std::string why;
    UniqueFd dir = open_dir(true, &why);
    uint64_t stored = 0;
    for (const Kept& k : kept) {
        if (!dir) break;
        UniqueFd parent = tree.find_dir(k.parent);
        if (!parent) continue;
        UniqueFd fd(::openat(parent.get(), k.name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
        struct stat st {};
        // This stat is the read of ctime that the next change must move past (multigrain).
        if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != k.size ||
            ns_of(st.st_mtim) != k.mtime_ns)
            continue; // replaced or written meanwhile: its sums are not these
        if (!fine_grained_ctime(fd.get())) {
            if (why.empty())
                why = "update: block sums not cached: the file system of '" + tree.display() +
                      "' does not give every change a new ctime (multigrain timestamps: ext4, XFS, btrfs, tmpfs on Linux 6.13+)";
            continue;
        }
        const std::vector<unsigned char> bytes = encode(st, k.block_size, k.sums);
        const std::string name = entry_name(st.st_dev, st.st_ino);
        const std::string temp = "." + name + ".tmp" + std::to_string(::getpid());
        UniqueFd out(::openat(dir.get(), temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
        // Written whole under another name and renamed: a reader sees an old entry or this one.
        if (!out || !write_all(out.get(), bytes.data(), bytes.size()) || ::renameat(dir.get(), temp.c_str(), dir.get(), name.c_str()) != 0) {
            ::unlinkat(dir.get(), temp.c_str(), 0);
            if (why.empty()) why = "update: cannot store block sums in '" + dir_ + "': " + std::strerror(errno);
            continue;
        }
        ++stored;
        if (working) working();
    }
    if (dir && stored) prune(dir.get());
    if (!why.empty()) note = why;
    return stored;
}

// Beyond kMaxEntries, the least recently stored entries go (down to three quarters of it).
void SumsCache::prune(int dir) const {
    UniqueFd d(::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    DIR* ds = d ? ::fdopendir(d.get()) : nullptr;
    if (!ds) return;
    d.release(); // owned by ds now
    std::vector<std::pair<int64_t, std::string>> entries;
    while (dirent* e = ::readdir(ds)) {
        if (e->d_name[0] == '.') continue;
        struct stat st {};
        if (::fstatat(dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) entries.emplace_back(ns_of(st.st_mtim), e->d_name);
    }
    ::closedir(ds);
    if (entries.size() <= kMaxEntries) return;
    std::sort(entries.begin(), entries.end());
    for (size_t i = 0; i < entries.size() - kMaxEntries * 3 / 4; ++i) ::unlinkat(dir, entries[i].second.c_str(), 0);
}

} // namespace sluice
