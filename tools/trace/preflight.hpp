// What must be in place before the probe can load: privileges, kernel BTF, tracefs.
// Each check throws TraceError naming what is missing and how to fix it.
#pragma once
#include <string>

namespace sluice::trace {

void check_privileges(); // root, or CAP_BPF + CAP_PERFMON
void check_btf();        // /sys/kernel/btf/vmlinux (CO-RE relocations need it)
void ensure_tracefs();   // mounts tracefs when it is merely unmounted
// "none", "integrity", "confidentiality", or "" when unknown (securityfs not readable).
std::string lockdown_mode();

} // namespace sluice::trace
