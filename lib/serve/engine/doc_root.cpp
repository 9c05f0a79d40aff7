#include "serve/engine/doc_root.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace sluice::serve {

Opened open_beneath(int root_fd, const std::string& rel) {
    open_how how{};
    // O_NONBLOCK: opening a FIFO someone planted must not wait for a writer; the file type
    // is checked after (fstat) and only regular files and directories are served.
    how.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    int fd;
    do {
        fd = static_cast<int>(::syscall(SYS_openat2, root_fd, rel.empty() ? "." : rel.c_str(), &how, sizeof how));
    } while (fd < 0 && errno == EINTR);
    Opened o;
    if (fd >= 0) {
        o.fd.reset(fd);
        return o;
    }
    switch (errno) {
    case ENOENT:
    case ENOTDIR:
    case ENAMETOOLONG: o.status = 404; break;
    case EXDEV: // RESOLVE_BENEATH: the path (a symlink in it) leads out of DIR
    case ELOOP:
    case EACCES:
    case EPERM:
    case ENXIO: o.status = 403; break;
    default: o.status = 500;
    }
    return o;
}

} // namespace sluice::serve
