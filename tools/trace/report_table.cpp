#include "report.hpp"

#include <fmt/format.h>

namespace sluice::trace {

std::string human_bytes(uint64_t b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(b);
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        ++u;
    }
    return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.2f} {}", v, units[u]);
}

namespace {

std::string secs(double s) { return s < 0 ? "n/a" : fmt::format("{:.3f}", s); }

std::string flow_kind(const Flow& f) {
    std::string k = kind_name(f.kind);
    if (f.kind == Kind::no_data) k += " (not a copy)";
    return k;
}

} // namespace

void write_table(std::FILE* out, const Report& r) {
    fmt::print(out, "sluice trace: {} stage(s), {:.2f} s", r.stages.size(), r.wall_s);
    if (r.exit_status >= 0) fmt::print(out, ", command exit status {}", r.exit_status);
    fmt::print(out, "\n\n{:>7} {:<15} {:>11} {:>11} {:>11} {:>11} {:>11} {:>9} {:>7} {:>7} {:>7} {:>7} {:>7}\n", "pid", "comm",
               "copy k->u", "copy u->k", "zero-copy", "(kern copy)", "no data", "syscalls", "vcsw", "ivcsw", "cpu s", "user s",
               "sys s");
    for (const auto& s : r.stages)
        fmt::print(out, "{:>7} {:<15} {:>11} {:>11} {:>11} {:>11} {:>11} {:>9} {:>7} {:>7} {:>7} {:>7} {:>7}\n", s.pid, s.comm,
                   human_bytes(s.copied_in), human_bytes(s.copied_out), human_bytes(s.zero_copy), human_bytes(s.kernel_copy),
                   human_bytes(s.no_data), s.syscalls, s.nvcsw, s.nivcsw, secs(static_cast<double>(s.cpu_ns) / 1e9),
                   secs(s.user_s), secs(s.sys_s));

    for (const auto& s : r.stages) {
        if (s.flows.empty() && s.threads.empty()) continue;
        fmt::print(out, "\n{} {} (parent {}):\n", s.pid, s.comm, s.ppid);
        for (const auto& f : s.flows) {
            if (f.kind == Kind::not_data && f.errors == 0) continue;
            fmt::print(out, "  {:<22} {:>10} -> {:<10} {:>11} {:>9} calls  {:<30}{}\n", f.op, class_name(f.from),
                       class_name(f.to), human_bytes(f.bytes), f.calls, flow_kind(f), f.note.empty() ? "" : "  " + f.note);
        }
        for (const auto& [op, c] : s.by_uring_op)
            if (c.kind == Kind::not_data) fmt::print(out, "  {:<22} {} ops (no payload)\n", op, c.ops);
        if (s.zc_notif > 0)
            fmt::print(out, "  io_uring send_zc notifications: {}, of which the kernel copied: {}\n", s.zc_notif,
                       s.zc_notif_copied);
        for (const auto& t : s.threads)
            fmt::print(out, "  thread {} {}: {} s on CPU (charged to this stage)\n", t.tid, t.comm,
                       secs(static_cast<double>(t.cpu_ns) / 1e9));
    }

    const auto& m = r.summary;
    fmt::print(out,
               "\nsummary: payload {} ; CPU copies per payload byte {:.2f} (user<->kernel {}, in-kernel {}) ; "
               "CPU {:.3f} s = {:.3f} s/GB\n",
               human_bytes(m.payload_bytes), m.copies_per_byte, human_bytes(m.copied_bytes), human_bytes(m.kernel_copy_bytes),
               m.cpu_s, m.cpu_s_per_gb);
    if (m.unresolved_bytes > 0)
        fmt::print(out, "warning: {} moved on fds whose class was not resolved\n", human_bytes(m.unresolved_bytes));
    const auto& me = r.methods;
    fmt::print(out, "method: eBPF tracepoints, probe variant '{}'{}\n", me.variant,
               me.fallback_reason.empty() ? "" : " (" + me.fallback_reason + ")");
    fmt::print(out,
               "  bytes: {}\n  fd classes: {}\n  cpu s: {}\n  user/sys s: {}\n  syscalls: {}; context switches: {}\n"
               "  payload: {}\n",
               me.bytes, me.fd_class, me.cpu, me.user_sys, me.syscalls, me.context_switches, me.payload);
}

} // namespace sluice::trace
