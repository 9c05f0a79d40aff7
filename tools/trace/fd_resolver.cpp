#include "fd_resolver.hpp"

#include <fstream>
#include <string>
#include <sys/stat.h>
#include <sys/sysmacros.h>

namespace sluice::trace {

FdInfo FdResolver::resolve(uint32_t pid, int32_t fd)
{
    FdInfo info;
    std::string base = "/proc/" + std::to_string(pid);
    struct stat st;
    if (fd < 0 || stat((base + "/fd/" + std::to_string(fd)).c_str(), &st) != 0)
        return info;  // closed already, or the process is gone
    switch (st.st_mode & S_IFMT) {
    case S_IFREG:
    case S_IFBLK: info.cls = FdClass::file; break;
    case S_IFIFO: info.cls = FdClass::pipe; break;
    case S_IFSOCK: info.cls = FdClass::socket; break;
    case S_IFCHR:
        if (major(st.st_rdev) == 1 && minor(st.st_rdev) == 3)
            info.cls = FdClass::devnull;
        else if (major(st.st_rdev) == 1 && minor(st.st_rdev) == 5)
            info.cls = FdClass::devzero;
        else
            info.cls = FdClass::other;
        break;
    default: info.cls = FdClass::other; break;
    }
    // "flags:\t0100001" (octal): the access mode is in the low two bits.
    std::ifstream fi(base + "/fdinfo/" + std::to_string(fd));
    for (std::string key; fi >> key;) {
        if (key == "flags:") {
            std::string v;
            fi >> v;
            unsigned long flags = std::stoul(v, nullptr, 8);
            info.writable = (flags & 3) != 0;  // O_WRONLY or O_RDWR
            info.direct = (flags & 040000) != 0; // O_DIRECT (asm-generic and x86)
            break;
        }
    }
    return info;
}

void FdResolver::seen(uint32_t tgid, int32_t fd, uint32_t gen, uint16_t epoch)
{
    Key k{tgid, fd, gen, epoch};
    if (cache_.count(k))
        return;
    FdInfo info = resolve(tgid, fd);
    if (current_ && current_(tgid, fd) != std::make_pair(gen, epoch))
        info = FdInfo{};  // closed, dup'ed over or exec'd since the probe saw it: do not guess
    cache_[k] = info;
}

FdInfo FdResolver::lookup(uint32_t tgid, int32_t fd, uint32_t gen, uint16_t epoch) const
{
    auto it = cache_.find(Key{tgid, fd, gen, epoch});
    return it == cache_.end() ? FdInfo{} : it->second;
}

}  // namespace sluice::trace
