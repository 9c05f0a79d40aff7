#include "report.hpp"

#include <fmt/format.h>

namespace sluice::trace {
namespace {

std::string quote(const std::string& s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\')
            o += '\\', o += static_cast<char>(c);
        else if (c < 0x20)
            o += fmt::format("\\u{:04x}", c);
        else
            o += static_cast<char>(c);
    }
    return o + "\"";
}

// Kind names in JSON are identifiers, not the table's prose.
const char* kind_id(Kind k) {
    switch (k) {
    case Kind::copy_in: return "copy_in";
    case Kind::copy_out: return "copy_out";
    case Kind::zero_copy: return "zero_copy";
    case Kind::kernel_copy: return "kernel_copy";
    case Kind::no_data: return "no_data";
    case Kind::calls_only: return "calls_only";
    case Kind::not_data: return "not_data";
    }
    return "unknown";
}

std::string opt_num(double v) { return v < 0 ? "null" : fmt::format("{:.6f}", v); }

template <class Map, class Fn> std::string object(const Map& m, Fn fn) {
    std::string o = "{";
    bool first = true;
    for (const auto& [k, v] : m) {
        o += (first ? "" : ", ") + quote(k) + ": " + fn(v);
        first = false;
    }
    return o + "}";
}

std::string op_count(const OpCount& c) {
    return fmt::format("{{\"ops\": {}, \"bytes\": {}, \"errors\": {}, \"kind\": \"{}\"}}", c.ops, c.bytes, c.errors,
                       kind_id(c.kind));
}

} // namespace

void write_json(std::FILE* out, const Report& r) {
    std::string cmd = "[";
    for (size_t i = 0; i < r.command.size(); ++i) cmd += (i ? ", " : "") + quote(r.command[i]);
    cmd += "]";
    std::string pids = "[";
    for (size_t i = 0; i < r.attached_pids.size(); ++i) pids += (i ? ", " : "") + std::to_string(r.attached_pids[i]);
    pids += "]";

    fmt::print(out,
               "{{\n  \"schema\": \"sluice-trace/1\",\n  \"command\": {},\n  \"attached_pids\": {},\n"
               "  \"exit_status\": {},\n  \"wall_s\": {:.6f},\n  \"stages\": [",
               cmd, pids, r.exit_status < 0 ? "null" : std::to_string(r.exit_status), r.wall_s);
    for (size_t i = 0; i < r.stages.size(); ++i) {
        const Stage& s = r.stages[i];
        std::string flows = "[";
        for (size_t j = 0; j < s.flows.size(); ++j) {
            const Flow& f = s.flows[j];
            flows += fmt::format("{}\n        {{\"op\": {}, \"via\": \"{}\", \"from\": {}, \"to\": {}, \"kind\": \"{}\", "
                                 "\"bytes\": {}, \"calls\": {}, \"errors\": {}, \"note\": {}}}",
                                 j ? "," : "", quote(f.op), f.via, quote(class_name(f.from)), quote(class_name(f.to)),
                                 kind_id(f.kind), f.bytes, f.calls, f.errors, quote(f.note));
        }
        flows += s.flows.empty() ? "]" : "\n      ]";
        std::string threads = "[";
        for (size_t j = 0; j < s.threads.size(); ++j)
            threads += fmt::format("{}{{\"tid\": {}, \"comm\": {}, \"cpu_ns\": {}}}", j ? ", " : "", s.threads[j].tid,
                                   quote(s.threads[j].comm), s.threads[j].cpu_ns);
        threads += "]";
        std::string by_class = object(s.by_class, [](const ClassBytes& c) {
            return fmt::format("{{\"copied_read\": {}, \"copied_written\": {}, \"zero_copy_read\": {}, "
                               "\"zero_copy_written\": {}, \"no_data\": {}}}",
                               c.copied_read, c.copied_written, c.zero_copy_read, c.zero_copy_written, c.no_data);
        });
        fmt::print(out,
                   "{}\n    {{\n      \"pid\": {}, \"ppid\": {}, \"comm\": {}, \"exited\": {},\n"
                   "      \"copied_bytes\": {}, \"copied_in_bytes\": {}, \"copied_out_bytes\": {},\n"
                   "      \"zero_copy_bytes\": {}, \"kernel_copy_bytes\": {}, \"no_data_bytes\": {},\n"
                   "      \"syscalls\": {}, \"cpu_ns\": {}, \"user_s\": {}, \"sys_s\": {},\n"
                   "      \"context_switches\": {{\"voluntary\": {}, \"involuntary\": {}}},\n"
                   "      \"send_zc_notifications\": {{\"total\": {}, \"copied\": {}}},\n"
                   "      \"threads\": {},\n      \"by_fd_class\": {},\n      \"by_syscall\": {},\n"
                   "      \"by_io_uring_op\": {},\n      \"flows\": {}\n    }}",
                   i ? "," : "", s.pid, s.ppid, quote(s.comm), s.exited ? "true" : "false", s.copied(), s.copied_in, s.copied_out,
                   s.zero_copy, s.kernel_copy, s.no_data, s.syscalls, s.cpu_ns, opt_num(s.user_s), opt_num(s.sys_s), s.nvcsw,
                   s.nivcsw, s.zc_notif, s.zc_notif_copied, threads, by_class, object(s.by_syscall, op_count),
                   object(s.by_uring_op, op_count), flows);
    }
    const auto& m = r.summary;
    const auto& me = r.methods;
    fmt::print(out,
               "\n  ],\n  \"summary\": {{\n    \"payload_bytes\": {}, \"copied_bytes\": {}, \"kernel_copy_bytes\": {},\n"
               "    \"zero_copy_bytes\": {}, \"no_data_bytes\": {}, \"unresolved_bytes\": {},\n"
               "    \"copies_per_byte\": {:.6f}, \"cpu_s\": {:.6f}, \"cpu_s_per_gb\": {:.6f},\n"
               "    \"method\": {}\n  }},\n",
               m.payload_bytes, m.copied_bytes, m.kernel_copy_bytes, m.zero_copy_bytes, m.no_data_bytes, m.unresolved_bytes,
               m.copies_per_byte, m.cpu_s, m.cpu_s_per_gb, quote(me.variant));
    fmt::print(out,
               "  \"methods\": {{\n    \"variant\": {}, \"fallback_reason\": {},\n    \"bytes\": {},\n    \"fd_class\": {},\n"
               "    \"cpu_ns\": {},\n    \"user_sys\": {},\n    \"syscalls\": {},\n    \"context_switches\": {},\n"
               "    \"payload\": {}\n  }}\n}}\n",
               quote(me.variant), quote(me.fallback_reason), quote(me.bytes), quote(me.fd_class), quote(me.cpu),
               quote(me.user_sys), quote(me.syscalls), quote(me.context_switches), quote(me.payload));
}

} // namespace sluice::trace
