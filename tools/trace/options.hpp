// Command line of `sluice trace`.
#pragma once
#include <cstdint>
#include <string>
#include <sys/types.h>
#include <vector>

namespace sluice::trace {

struct Options {
    bool json = false;
    bool no_kernel_reads = false;     // force the probe variant that works under lockdown=confidentiality
    std::string output;               // report destination; empty = stderr
    std::vector<pid_t> pids;          // -p: attach to running processes
    double duration_s = 0;            // -p: stop after this long (0 = until they exit or SIGINT)
    uint64_t payload_bytes = 0;       // --payload: the payload size when it cannot be derived
    std::vector<std::string> command; // -- COMMAND...: run and trace it
    bool help = false;
};

// Throws TraceError on a usage error.
Options parse_options(int argc, char** argv);
const char* usage();

} // namespace sluice::trace
