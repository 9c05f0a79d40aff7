#include "core/session/memory_budget.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace sluice {

namespace {

// The memory.max of this process's cgroup (v2) and of its ancestors, the lowest; 0 if none.
uint64_t cgroup_memory_limit() {
    std::ifstream self("/proc/self/cgroup");
    std::string line, path;
    while (std::getline(self, line))
        if (line.rfind("0::", 0) == 0) path = line.substr(3);
    if (path.empty()) return 0;
    uint64_t lowest = 0;
    for (;;) {
        std::ifstream f("/sys/fs/cgroup" + path + "/memory.max");
        uint64_t v = 0;
        if (f >> v && v > 0 && (lowest == 0 || v < lowest)) lowest = v; // "max" reads as no number
        if (path.empty() || path == "/") break;
        path = path.substr(0, path.rfind('/'));
    }
    return lowest;
}

} // namespace

uint64_t usable_memory() {
    long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    uint64_t mem = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
    if (uint64_t cg = cgroup_memory_limit(); cg && (mem == 0 || cg < mem)) mem = cg;
    return mem;
}

uint64_t default_manifest_budget() { return std::max<uint64_t>(usable_memory() / 4, kMinManifestBudget); }

} // namespace sluice
