#include "preflight.hpp"

#include "error.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <linux/capability.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sluice::trace {

void throw_errno(const std::string& what, int err, int exit_status) {
    throw TraceError(what + ": " + std::strerror(err), exit_status);
}

namespace {

bool has_cap(int cap) {
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (syscall(SYS_capget, &hdr, data) != 0) return false;
    return data[cap / 32].effective & (1u << (cap % 32));
}

bool exists(const char* path) {
    struct stat st;
    return stat(path, &st) == 0;
}

} // namespace

void check_privileges() {
    if (geteuid() == 0) return;
    // CAP_BPF (39) loads the programs, CAP_PERFMON (38) attaches them to tracepoints.
    if (has_cap(39) && has_cap(38)) return;
    throw TraceError("eBPF tracing needs root or CAP_BPF and CAP_PERFMON; run as root "
                     "(sudo sluice trace ...) or grant them: setcap cap_bpf,cap_perfmon+ep $(which sluice)");
}

void check_btf() {
    if (!exists("/sys/kernel/btf/vmlinux"))
        throw TraceError("kernel BTF is missing (/sys/kernel/btf/vmlinux): the probe needs a kernel "
                         "built with CONFIG_DEBUG_INFO_BTF=y (Debian and most distributions ship one)");
}

void ensure_tracefs() {
    // libbpf finds tracepoint ids under tracefs (or the old debugfs mount point).
    if (exists("/sys/kernel/tracing/events") || exists("/sys/kernel/debug/tracing/events")) return;
    if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr) == 0 && exists("/sys/kernel/tracing/events")) return;
    int err = errno;
    throw TraceError(std::string("tracefs is not mounted and mounting it failed (") + std::strerror(err) +
                     "); mount it: mount -t tracefs nodev /sys/kernel/tracing");
}

std::string lockdown_mode() {
    std::ifstream f("/sys/kernel/security/lockdown");
    if (!f) {
        // securityfs is often unmounted; mounting it is harmless and lets us read the mode.
        mount("none", "/sys/kernel/security", "securityfs", 0, nullptr);
        f.open("/sys/kernel/security/lockdown");
    }
    std::string line;
    if (!f || !std::getline(f, line)) return "";
    auto open = line.find('['), close = line.find(']');
    if (open == std::string::npos || close == std::string::npos) return "";
    return line.substr(open + 1, close - open - 1);
}

} // namespace sluice::trace
