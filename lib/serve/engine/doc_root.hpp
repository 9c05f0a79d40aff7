#pragma once
// Opening what a request names, confined to DIR by the kernel: openat2 with RESOLVE_BENEATH
// (as lib/recv/store's confined tree does), so no '..', absolute or symlinked path resolves
// outside it, whatever the request's text. Symlinks that stay inside DIR are followed.
#include <string>

#include "core/io/unique_fd.hpp"

namespace sluice::serve {

struct Opened {
    UniqueFd fd;
    int status = 0; // 0, or 403 (out of DIR, not a file or directory, no permission), 404, 500
};

// rel: "a/b" or "" for DIR itself (serve/http/target.hpp made it). Never blocks on a FIFO.
Opened open_beneath(int root_fd, const std::string& rel);

} // namespace sluice::serve
