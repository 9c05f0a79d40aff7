#pragma once
// What a get session sends: the file or tree a request names, opened confined to DIR
// (open_beneath, then one component at a time with O_NOFOLLOW), as FdSources for the public
// send(). Every fd is opened before the transfer starts, so a rename inside DIR during the
// transfer cannot redirect it outside. Directories are sent (empty ones too); symlinks as links
// (opened O_PATH, never followed) when their target stays inside the tree that lands.
#include <cstdint>
#include <string>
#include <vector>

#include "core/io/unique_fd.hpp"
#include "core/wire/protocol.hpp"
#include "sluice/sluice.hpp"

namespace sluice::serve {

struct GetSources {
    std::vector<UniqueFd> fds;    // owned here; list borrows them
    std::vector<FdSource> list;   // names relative to the client's destination
    // The manifest of list, entry i for list[i] (file_id i): what the get ring announces (kind,
    // size, mtime and mode from the walk's fstat, a symlink's target as the walk read it), as
    // send() would announce list.
    std::vector<wire::ManifestEntry> entries;
    uint64_t bytes = 0;
    uint64_t files = 0;           // regular files among list (the rest: directories, symlinks)
    uint64_t skipped = 0;         // fifos, sockets, devices, symlinks out of the tree: not sent (said in the reply)
    uint64_t links_out = 0;       // of skipped: symlinks whose target leads out of what lands at the client
    int status = 0;               // 0, or 404 / 403 for the path itself (then message says why)
    std::string message;
};

// rel: "" (all of DIR: its entries land directly in the destination), "a/f" (lands as "f"),
// "a/d" (a tree: lands as "d/..."). A path that does not exist or is not served gives status
// 404 or 403; a failure inside the tree throws Error(source) naming it. max_files bounds the
// open fds (files, directories and symlinks).
GetSources open_get_sources(int root_fd, const std::string& rel, uint64_t max_files);

} // namespace sluice::serve
