#include "options.hpp"

#include "error.hpp"

#include <charconv>
#include <cstring>
#include <string_view>

namespace sluice::trace {

const char* usage() {
    return "usage: sluice trace [--json] [-o FILE] [--no-kernel-reads] -- COMMAND [ARG...]\n"
           "       sluice trace [--json] [-o FILE] [--no-kernel-reads] -p PID[,PID...] [--duration S]\n"
           "Traces COMMAND (or the running PIDs) and every process it starts, and reports per stage\n"
           "the bytes copied between user and kernel space, the bytes moved without a user copy,\n"
           "syscalls, context switches and CPU time. The report goes to stderr unless -o is given.\n"
           "  --json             machine-readable report (schema: docs/trace-json.md)\n"
           "  -o FILE            write the report to FILE\n"
           "  --no-kernel-reads  use the probe that reads no kernel memory (fd classes from the\n"
           "                     syscalls that create the fds; /proc for fds made before tracing)\n"
           "  -p PID[,PID...]    attach to running processes (and the processes they start)\n"
           "  --duration S       with -p: stop after S seconds (default: when they have all exited)\n"
           "  --payload BYTES    payload size for the summary, when the trace holds both ends of a\n"
           "                     socket or file (the derived figure would count it twice)\n";
}

namespace {

pid_t parse_pid(std::string_view s) {
    int v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size() || v <= 0) throw TraceError("bad pid '" + std::string(s) + "'");
    return v;
}

} // namespace

Options parse_options(int argc, char** argv) {
    Options o;
    int i = 1;
    auto value = [&](const char* flag) -> std::string {
        if (i + 1 >= argc) throw TraceError(std::string(flag) + " needs a value");
        return argv[++i];
    };
    for (; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a == "--") {
            ++i;
            break;
        } else if (a == "--json") {
            o.json = true;
        } else if (a == "--no-kernel-reads") {
            o.no_kernel_reads = true;
        } else if (a == "-o" || a == "--output") {
            o.output = value("-o");
        } else if (a == "-p" || a == "--pid") {
            std::string list = value("-p");
            std::string_view rest = list;
            while (!rest.empty()) {
                auto comma = rest.find(',');
                o.pids.push_back(parse_pid(rest.substr(0, comma)));
                rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
            }
        } else if (a == "--duration") {
            std::string v = value("--duration");
            char* end = nullptr;
            o.duration_s = std::strtod(v.c_str(), &end);
            if (!end || *end || o.duration_s <= 0) throw TraceError("bad --duration '" + v + "'");
        } else if (a == "--payload") {
            std::string v = value("--payload");
            uint64_t n = 0;
            auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
            if (ec != std::errc{} || p != v.data() + v.size() || n == 0) throw TraceError("bad --payload '" + v + "' (bytes)");
            o.payload_bytes = n;
        } else if (a == "-h" || a == "--help") {
            o.help = true;
            return o;
        } else if (!a.empty() && a[0] == '-') {
            throw TraceError("unknown option '" + std::string(a) + "'");
        } else {
            break; // the command starts here (the "--" is optional before a non-option)
        }
    }
    for (; i < argc; ++i) o.command.emplace_back(argv[i]);
    if (o.command.empty() == o.pids.empty()) throw TraceError("give either a command (after --) or -p PID");
    if (o.duration_s > 0 && o.pids.empty()) throw TraceError("--duration only applies to -p");
    return o;
}

} // namespace sluice::trace
