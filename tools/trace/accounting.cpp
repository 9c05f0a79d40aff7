#include "accounting.hpp"

#include "bpf_session.hpp"
#include "fd_resolver.hpp"

#include <algorithm>
#include <cstring>

namespace sluice::trace {

const char* class_name(FdClass c) {
    switch (c) {
    case FdClass::unknown: return "unknown";
    case FdClass::file: return "file";
    case FdClass::pipe: return "pipe";
    case FdClass::socket: return "socket";
    case FdClass::devnull: return "/dev/null";
    case FdClass::devzero: return "/dev/zero";
    case FdClass::other: return "other";
    case FdClass::none: return "user";
    case FdClass::unresolved: return "unresolved";
    case FdClass::fixed: return "fixed-file";
    }
    return "?";
}

const char* kind_name(Kind k) {
    switch (k) {
    case Kind::copy_in: return "copy kernel->user";
    case Kind::copy_out: return "copy user->kernel";
    case Kind::zero_copy: return "zero-copy";
    case Kind::kernel_copy: return "kernel copy";
    case Kind::no_data: return "no data";
    case Kind::calls_only: return "calls only";
    case Kind::not_data: return "not data";
    }
    return "?";
}

Classified classify(OpFamily family, const std::string& op, FdClass src, FdClass dst, bool writable) {
    switch (family) {
    case OpFamily::read:
        if (src == FdClass::devzero)
            return {Kind::no_data, "/dev/zero: the kernel zero-fills the buffer, no data moves, not a copy"};
        if (src == FdClass::devnull) return {Kind::no_data, "/dev/null: nothing to read"};
        return {Kind::copy_in, ""};
    case OpFamily::write:
        if (dst == FdClass::devnull || dst == FdClass::devzero)
            return {Kind::no_data, std::string(class_name(dst)) + ": discarded, no data moves, not a copy"};
        return {Kind::copy_out, ""};
    case OpFamily::read_mmsg:
    case OpFamily::write_mmsg: return {Kind::calls_only, "returns a message count: bytes not measured"};
    case OpFamily::splice:
        if (dst == FdClass::devnull) return {Kind::no_data, "/dev/null: discarded, no data moves"};
        if (dst == FdClass::file)
            return {Kind::kernel_copy, op.find("copy_file_range") != std::string::npos && src == FdClass::file
                                           ? "page cache to page cache: the kernel copies (unless the filesystem reflinks)"
                                           : "into the page cache: the kernel copies each byte"};
        if (src == FdClass::devzero) return {Kind::zero_copy, "zero pages, no data read"};
        if (src == FdClass::socket) return {Kind::zero_copy, "socket buffers passed by reference"};
        if (src == FdClass::file) return {Kind::zero_copy, "page-cache pages passed by reference"};
        if (src == FdClass::pipe) return {Kind::zero_copy, "pipe buffers passed by reference"};
        return {Kind::zero_copy, "fd classes not resolved: assumed by reference"};
    case OpFamily::vmsplice:
        if (writable) return {Kind::zero_copy, "user pages mapped into the pipe"};
        return {Kind::copy_in, "vmsplice from a pipe copies into user memory"};
    case OpFamily::send_zc: return {Kind::zero_copy, "zero-copy requested; see send_zc notifications for what the kernel did"};
    case OpFamily::other: return {Kind::not_data, ""};
    }
    return {Kind::not_data, ""};
}

namespace {

bool is_pipe(FdClass c) { return c == FdClass::pipe; }

void add_class(Stage& s, FdClass c, bool read_side, const Flow& f) {
    if (c == FdClass::none) return;
    ClassBytes& cb = s.by_class[class_name(c)];
    switch (f.kind) {
    case Kind::copy_in:
    case Kind::copy_out: (read_side ? cb.copied_read : cb.copied_written) += f.bytes; break;
    case Kind::zero_copy:
    case Kind::kernel_copy: (read_side ? cb.zero_copy_read : cb.zero_copy_written) += f.bytes; break;
    case Kind::no_data: cb.no_data += f.bytes; break;
    default: break;
    }
}

} // namespace

Stage build_stage(uint32_t pid) {
    Stage s;
    s.pid = pid;
    return s;
}

void add_flow(Stage& s, Flow f) {
    switch (f.kind) {
    case Kind::copy_in: s.copied_in += f.bytes; break;
    case Kind::copy_out: s.copied_out += f.bytes; break;
    case Kind::zero_copy: s.zero_copy += f.bytes; break;
    case Kind::kernel_copy:
        s.zero_copy += f.bytes;
        s.kernel_copy += f.bytes;
        break;
    case Kind::no_data: s.no_data += f.bytes; break;
    default: break;
    }
    add_class(s, f.from, true, f);
    add_class(s, f.to, false, f);
    auto& op = (f.via == "io_uring" ? s.by_uring_op : s.by_syscall)[f.op];
    op.ops += f.calls;
    op.bytes += f.kind == Kind::not_data ? 0 : f.bytes;
    op.errors += f.errors;
    op.kind = f.kind;
    // One row per (op, from, to, kind): merge counters the probe kept apart by fd.
    for (auto& g : s.flows)
        if (g.op == f.op && g.from == f.from && g.to == f.to && g.kind == f.kind) {
            g.bytes += f.bytes;
            g.calls += f.calls;
            g.errors += f.errors;
            return;
        }
    s.flows.push_back(std::move(f));
}

std::vector<Stage> build_stages(const BpfSession& probe, const FdResolver& resolver,
                                const std::map<uint32_t, ProcTimes>& proc_times) {
    std::map<uint32_t, Stage> stages;
    for (const auto& [pid, p] : probe.procs()) {
        Stage& s = stages[pid];
        s.pid = pid;
        s.ppid = p.ppid;
        s.comm.assign(p.comm, strnlen(p.comm, sizeof(p.comm)));
        s.exited = p.exited;
        s.syscalls = p.syscalls;
        s.cpu_ns = p.cpu_ns;
        s.nvcsw = p.nvcsw;
        s.nivcsw = p.nivcsw;
        s.zc_notif = p.zc_notif;
        s.zc_notif_copied = p.zc_notif_copied;
        if (probe.kernel_reads() && p.utime_ns + p.stime_ns > 0) {
            // utime/stime are tick samples; like the kernel's cputime_adjust, split the exact
            // on-CPU time in their proportion.
            double total = static_cast<double>(std::max(p.cpu_ns, p.sum_exec_ns)) / 1e9;
            double ufrac = static_cast<double>(p.utime_ns) / static_cast<double>(p.utime_ns + p.stime_ns);
            s.user_s = total * ufrac;
            s.sys_s = total - s.user_s;
        } else if (auto it = proc_times.find(pid); it != proc_times.end()) {
            s.user_s = it->second.user_s;
            s.sys_s = it->second.sys_s;
        }
    }
    for (const auto& [tid, t] : probe.threads()) {
        auto it = stages.find(t.tgid);
        if (it == stages.end() || tid == t.tgid || t.cpu_ns == 0) continue;
        it->second.threads.push_back({tid, std::string(t.comm, strnlen(t.comm, sizeof(t.comm))), t.cpu_ns});
    }

    auto side = [&](const sl_flow_key& k, bool first) -> FdInfo {
        uint8_t cls = first ? k.cls_a : k.cls_b;
        uint32_t id = first ? k.id_a : k.id_b;
        if (cls != SL_CLS_UNKNOWN || id == 0) {
            FdInfo info;
            info.cls = static_cast<FdClass>(cls);
            info.writable = (k.flags & SL_FLAG_FD_WRITABLE) != 0;
            info.direct = first && (k.flags & SL_FLAG_FD_DIRECT) != 0;
            return info;
        }
        return resolver.lookup(id);
    };
    for (const auto& [k, v] : probe.flows()) {
        auto it = stages.find(k.tgid);
        if (it == stages.end()) continue;
        OpInfo info = op_info(k.op);
        FdInfo a = side(k, true), b = side(k, false);
        if (info.swap_sides) std::swap(a, b);
        Flow f;
        f.op = info.name;
        f.via = info.uring ? "io_uring" : "syscall";
        switch (info.family) {
        case OpFamily::read:
        case OpFamily::read_mmsg:
            f.from = a.cls;
            f.to = FdClass::none;
            break;
        case OpFamily::write:
        case OpFamily::write_mmsg:
        case OpFamily::send_zc:
            f.from = FdClass::none;
            f.to = a.cls;
            break;
        case OpFamily::vmsplice:
            f.from = a.writable ? FdClass::none : a.cls;
            f.to = a.writable ? a.cls : FdClass::none;
            break;
        default:
            f.from = a.cls;
            f.to = b.cls;
            break;
        }
        auto c = classify(info.family, info.name, f.from, f.to, a.writable);
        f.kind = c.kind;
        f.note = c.note;
        const bool plain_io = info.family == OpFamily::read || info.family == OpFamily::write;
        if (plain_io && a.direct && a.cls == FdClass::file && (f.kind == Kind::copy_in || f.kind == Kind::copy_out)) {
            f.kind = Kind::zero_copy;
            f.note = "O_DIRECT: the device's DMA moves these bytes, no CPU copy";
        }
        f.bytes = v.bytes;
        f.calls = v.calls;
        f.errors = v.errors;
        Stage& s = it->second;
        if (info.family == OpFamily::send_zc && s.zc_notif > 0 && s.zc_notif_copied > 0) {
            // The kernel said it copied some zero-copy sends (always so on loopback and veth):
            // count that share, estimated by notification count, as user->kernel copies.
            uint64_t copied = static_cast<uint64_t>(static_cast<double>(f.bytes) * static_cast<double>(s.zc_notif_copied) /
                                                    static_cast<double>(s.zc_notif));
            Flow c2 = f;
            c2.kind = Kind::copy_out;
            c2.bytes = copied;
            c2.calls = 0;
            c2.note = "send_zc the kernel reported as copied (share of notifications)";
            f.bytes -= copied;
            add_flow(s, c2);
        }
        add_flow(s, f);
    }
    std::vector<Stage> out;
    for (auto& [pid, s] : stages) {
        std::sort(s.flows.begin(), s.flows.end(), [](const Flow& x, const Flow& y) { return x.bytes > y.bytes; });
        out.push_back(std::move(s));
    }
    return out;
}

Summary summarize(const std::vector<Stage>& stages, uint64_t payload_override) {
    Summary sum;
    uint64_t in_ext = 0, out_ext = 0, in_pipe = 0, out_pipe = 0;
    for (const auto& s : stages) {
        sum.copied_bytes += s.copied();
        sum.kernel_copy_bytes += s.kernel_copy;
        sum.zero_copy_bytes += s.zero_copy;
        sum.no_data_bytes += s.no_data;
        sum.cpu_s += static_cast<double>(s.cpu_ns) / 1e9;
        for (const auto& f : s.flows) {
            if (f.kind == Kind::not_data || f.kind == Kind::calls_only) continue;
            if (f.from == FdClass::unresolved || f.to == FdClass::unresolved || f.from == FdClass::unknown ||
                f.to == FdClass::unknown)
                sum.unresolved_bytes += f.bytes;
            // Payload enters the traced stages through their reads and leaves through their
            // writes; pipes between stages are internal, so count them only when nothing else moved.
            if (f.from != FdClass::none) (is_pipe(f.from) ? in_pipe : in_ext) += f.bytes;
            if (f.to != FdClass::none) (is_pipe(f.to) ? out_pipe : out_ext) += f.bytes;
        }
    }
    sum.payload_bytes = std::max(in_ext, out_ext);
    if (sum.payload_bytes == 0) sum.payload_bytes = std::max(in_pipe, out_pipe);
    if (payload_override > 0) sum.payload_bytes = payload_override;
    if (sum.payload_bytes > 0) {
        double gb = static_cast<double>(sum.payload_bytes) / 1e9;
        sum.copies_per_byte =
            static_cast<double>(sum.copied_bytes + sum.kernel_copy_bytes) / static_cast<double>(sum.payload_bytes);
        sum.cpu_s_per_gb = sum.cpu_s / gb;
    }
    return sum;
}

} // namespace sluice::trace
