#pragma once
// The Stats fields both sides fill the same way.
#include "core/stats/process_usage.hpp"
#include "sluice/stats.hpp"

namespace sluice {

// CPU and peak memory of the whole process, read last so that they cover the transfer.
inline void add_process_usage(Stats& s) {
    auto u = ProcessUsage::now();
    s.cpu_user_s = u.user_s;
    s.cpu_sys_s = u.sys_s;
    s.peak_rss_kb = static_cast<uint64_t>(u.peak_rss_kb);
}

} // namespace sluice
