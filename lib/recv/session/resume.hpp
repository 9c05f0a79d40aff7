#pragma once
// What an earlier run of the same transfer left for one file (docs/guarantees.md): the file
// complete under its final name (same size and mtime: sluice sets the mtime only after
// verifying every block), or a journal of verified ranges beside its temporary file.
#include <sys/stat.h>

#include <cstdint>
#include <vector>

#include "recv/store/dest_tree.hpp"
#include "recv/store/file_table.hpp"

namespace sluice {

struct Resumed {
    bool complete = false; // in place already: marked complete in the table
    uint64_t bytes = 0;    // verified earlier, not to be sent again
    struct stat in_place {}; // with complete: the lstat of the file in place (its owner and mode)
};

// Appends what f already has to `already` (the MANIFEST_ACK's ranges) and marks it in the
// table. With verify, the journaled blocks' checksums are kept to read them back at the end.
// quick_check: a file in place with the same size and mtime is complete (false with the
// sender's --checksum: its content is compared instead, update_side.hpp). dir: f's parent
// directory (the caller caches it: a tree's files come in runs per directory, and a quick
// check should cost one fstatat, not an openat2 too).
Resumed resume_file(int dir, FileTable& files, RecvFile& f, bool verify, std::vector<wire::ByteRange>& already,
                    bool quick_check = true);

} // namespace sluice
