#pragma once
// How much memory a receiver may hold for one transfer's manifest by default: a quarter of what
// this process may use (physical memory, or its cgroup v2 memory.max where lower), at least
// 256 MiB. One place, because a server receiving several transfers at once (pushes into
// `sluice serve`) must split the same budget instead of granting each transfer all of it.
#include <cstdint>

namespace sluice {

inline constexpr uint64_t kMinManifestBudget = 256ull << 20;

// The memory this process may use: physical memory, or its cgroup's limit if lower (0: unknown).
uint64_t usable_memory();

// max(usable_memory() / 4, kMinManifestBudget).
uint64_t default_manifest_budget();

} // namespace sluice
