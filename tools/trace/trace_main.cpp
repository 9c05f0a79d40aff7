// sluice trace: parse, trace, report. Errors surface here as "sluice trace: error: ...".
#include "trace_main.hpp"

#include "error.hpp"
#include "options.hpp"
#include "report.hpp"
#include "session.hpp"

#include <cerrno>
#include <cstdio>
#include <exception>
#include <fmt/format.h>

int sluice_trace_main(int argc, char** argv) {
    using namespace sluice::trace;
    Options opts;
    try {
        opts = parse_options(argc, argv);
    } catch (const TraceError& e) {
        // Every error of the command line is the caller's to fix: show how it is used.
        fmt::print(stderr, "sluice trace: error: {}\n", e.what());
        std::fputs(usage(), stderr);
        return e.status;
    }
    try {
        if (opts.help) {
            std::fputs(usage(), stdout);
            return 0;
        }
        // Open the output before tracing, so a bad path fails before the command runs.
        std::FILE* out = stderr;
        if (!opts.output.empty()) {
            out = std::fopen(opts.output.c_str(), "we"); // close-on-exec: not the command's
            if (!out) throw_errno("cannot write " + opts.output, errno);
        }
        struct Closer {
            std::FILE* f;
            ~Closer() {
                if (f != stderr) std::fclose(f);
            }
        } closer{out};
        Report report = run_trace(opts);
        if (opts.json)
            write_json(out, report);
        else
            write_table(out, report);
        std::fflush(out);
        return report.exit_status >= 0 ? report.exit_status : 0;
    } catch (const TraceError& e) {
        fmt::print(stderr, "sluice trace: error: {}\n", e.what());
        return e.status;
    } catch (const std::exception& e) {
        fmt::print(stderr, "sluice trace: error: {}\n", e.what());
        return 2;
    }
}
