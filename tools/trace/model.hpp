// What the tracer reports: stages (processes) with their flows of bytes, and a summary.
// Shared by accounting (fills it) and the table/JSON reports (print it).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sluice::trace {

// Mirrors enum sl_fd_class in trace.h.
enum class FdClass : uint8_t { unknown, file, pipe, socket, devnull, devzero, other, none, unresolved, fixed };
const char* class_name(FdClass c);

// What a flow did to the bytes it moved.
enum class Kind : uint8_t {
    copy_in,     // kernel -> user copy (read family)
    copy_out,    // user -> kernel copy (write family)
    zero_copy,   // moved by page reference, no CPU copy (splice file->pipe, sendfile file->socket...)
    kernel_copy, // moved without a user copy, but the kernel copies inside (splice pipe->file...)
    no_data,     // /dev/null write, /dev/zero read: nothing moved, not a copy
    calls_only,  // bytes not known (recvmmsg/sendmmsg return message counts)
    not_data,    // io_uring ops that move no payload (accept, timeout, nop...)
};
const char* kind_name(Kind k);

struct Flow {
    std::string op;               // "read", "splice", "io_uring:send_zc", ...
    std::string via;              // "syscall" or "io_uring"
    FdClass from = FdClass::none; // none = user memory
    FdClass to = FdClass::none;
    Kind kind = Kind::copy_in;
    uint64_t bytes = 0, calls = 0, errors = 0;
    std::string note;
};

struct ClassBytes {
    uint64_t copied_read = 0, copied_written = 0;       // through user memory
    uint64_t zero_copy_read = 0, zero_copy_written = 0; // splice & co (kernel copies included)
    uint64_t no_data = 0;
};

struct OpCount {
    uint64_t ops = 0, bytes = 0, errors = 0;
    Kind kind = Kind::not_data;
};

struct ThreadInfo {
    uint32_t tid = 0;
    std::string comm;
    uint64_t cpu_ns = 0;
};

struct Stage {
    uint32_t pid = 0, ppid = 0;
    std::string comm;
    bool exited = false;
    std::vector<Flow> flows;
    uint64_t copied_in = 0, copied_out = 0;  // user<->kernel copies
    uint64_t zero_copy = 0, kernel_copy = 0; // kernel_copy is the part of zero_copy the kernel copied
    uint64_t no_data = 0;
    uint64_t syscalls = 0, nvcsw = 0, nivcsw = 0, cpu_ns = 0;
    double user_s = -1, sys_s = -1; // -1: not measured
    uint64_t zc_notif = 0, zc_notif_copied = 0;
    std::map<std::string, ClassBytes> by_class;
    std::map<std::string, OpCount> by_syscall, by_uring_op;
    std::vector<ThreadInfo> threads; // threads other than the main one that ran (iou-wrk, iou-sqp...)
    uint64_t copied() const { return copied_in + copied_out; }
};

struct Methods {
    std::string variant;  // "kernel-reads" or "no-kernel-reads"
    std::string fd_class; // how fd classes were found
    std::string bytes = "syscall return values (raw_syscalls:sys_exit) and io_uring_complete results";
    std::string cpu = "on-CPU time between sched:sched_switch events, all threads";
    std::string user_sys; // how user/system seconds were found
    std::string syscalls = "raw_syscalls:sys_enter";
    std::string context_switches = "sched:sched_switch (prev_state running = involuntary)";
    std::string payload = "max(bytes in from, bytes out to non-pipe fds, summed over stages); pipes if nothing "
                          "else; a socket or file between two traced stages counts twice (use --payload)";
    std::string fallback_reason; // why the no-kernel-reads variant ran, when it was not forced
};

struct Summary {
    uint64_t payload_bytes = 0;
    uint64_t copied_bytes = 0, kernel_copy_bytes = 0, zero_copy_bytes = 0, no_data_bytes = 0;
    double copies_per_byte = 0;
    double cpu_s = 0, cpu_s_per_gb = 0;
    uint64_t unresolved_bytes = 0; // bytes on fds whose class could not be resolved
};

struct Report {
    std::vector<std::string> command;
    std::vector<uint32_t> attached_pids;
    int exit_status = -1; // -1 when attached with -p
    double wall_s = 0;
    std::vector<Stage> stages;
    Summary summary;
    Methods methods;
};

} // namespace sluice::trace
