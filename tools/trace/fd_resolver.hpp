// Resolves what an fd is from user space, for the probe variant that reads no kernel memory:
// stat(/proc/PID/fd/N) gives the same inode mode and rdev the kernel-read probe looks at.
#pragma once
#include "model.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <tuple>

namespace sluice::trace {

struct FdInfo {
    FdClass cls = FdClass::unresolved;
    bool writable = false;  // decides vmsplice's direction
    bool direct = false;    // O_DIRECT: file reads and writes are DMA, not CPU copies
};

class FdResolver {
public:
    // Returns the probe's current (generation, epoch) of an fd: a resolution is kept only if
    // they did not change while /proc was read, i.e. the fd still named the same open file.
    using Incarnation = std::function<std::pair<uint32_t, uint16_t>(uint32_t tgid, int32_t fd)>;
    explicit FdResolver(Incarnation current = {}) : current_(std::move(current)) {}

    // Resolve now (the probe just saw the fd in use) and remember it under its incarnation.
    void seen(uint32_t tgid, int32_t fd, uint32_t gen, uint16_t epoch);
    // unresolved when seen() never ran for it or failed.
    FdInfo lookup(uint32_t tgid, int32_t fd, uint32_t gen, uint16_t epoch) const;
    static FdInfo resolve(uint32_t pid, int32_t fd);

private:
    using Key = std::tuple<uint32_t, int32_t, uint32_t, uint16_t>;
    std::map<Key, FdInfo> cache_;
    Incarnation current_;
};

}  // namespace sluice::trace
