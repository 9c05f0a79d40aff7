#include "recv/session/resume.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include "recv/store/dest_tree.hpp"
#include "recv/store/dir_replacer.hpp"
#include "recv/store/journal.hpp"

namespace sluice {

Resumed resume_file(int dir, FileTable& files, RecvFile& f, bool verify, std::vector<wire::ByteRange>& already,
                    bool quick_check) {
    struct stat st {};
    if (quick_check && ::fstatat(dir, f.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
        static_cast<uint64_t>(st.st_size) == f.entry.size &&
        static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec == f.entry.mtime_ns) {
        if (f.entry.size) already.push_back({f.entry.file_id, 0, f.entry.size});
        files.set_complete(f);
        return {.complete = true, .bytes = f.entry.size, .in_place = st};
    }
    // A directory where the source now has a file: an empty one goes when the file is put in
    // place (put_in_place); a non-empty one gives way then with --delete (dir_replacer.hpp)
    // unless the filters protect something in it, and is refused otherwise: both refusals now,
    // before any of the file is sent.
    if (quick_check && S_ISDIR(st.st_mode) && ::unlinkat(dir, f.name.c_str(), AT_REMOVEDIR) != 0 &&
        (errno == ENOTEMPTY || errno == EEXIST)) {
        if (!files.dir_replacer()) throw dir_in_the_way(f.entry.path, "file");
        files.dir_replacer()->check(dir, f.name, f.entry.path);
    }
    // An older version with blocks: finish_file leaves freeing them to the reaper.
    f.replaces = quick_check && S_ISREG(st.st_mode) && st.st_blocks > 0;
    if (f.entry.size == 0) return {};
    journal::Contents journal = journal::load(dir, f.temp, f.entry.size, f.entry.mtime_ns);
    if (journal.ranges.empty()) {
        if (journal.present) journal::remove(dir, f.temp); // another version of the file, or nothing verified
        return {};
    }
    // --verify reads the blocks an earlier run received back from disk as well, against the
    // checksums the sender sent then.
    if (verify)
        for (auto& b : journal.blocks) files.record_checksum(f, b.offset, b.length, b.checksum);
    Resumed r;
    for (auto [b, e] : journal.ranges) {
        files.mark_verified(f, b, e - b);
        already.push_back({f.entry.file_id, b, e - b});
        r.bytes += e - b;
    }
    f.journaled = true;
    return r;
}

} // namespace sluice
