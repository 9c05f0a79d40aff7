// sluice: the command-line mover. `sluice send`, `sluice recv`, `sluice trace`.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "commands.hpp"
#include "sluice/error.hpp"
#include "sluice/printable.hpp"

#ifdef SLUICE_HAVE_TRACE
#include "trace/trace_main.hpp"
#endif

namespace {

const char* kUsage = R"(usage: sluice COMMAND [options]

commands:
  recv DIR                      receive one transfer into DIR (prints the sluice:// line to give the sender)
  send PATH... sluice://...     send files and directories to a receiver
  serve DIR --http PORT         serve DIR to many clients over HTTP/1.1 until SIGTERM
  get sluice://HOST:PORT/PATH DEST  fetch a file or tree from `sluice serve --port`
  trace [--json] -- COMMAND...  count copies, syscalls and CPU per stage of a command (eBPF)

`sluice COMMAND --help` describes each. Exit status: 0 success, 2 usage, 3 authentication,
4 network, 5 source, 6 destination, 7 protocol, 8 integrity, 1 other.
)";

int exit_status(sluice::ErrorCode c) {
    using sluice::ErrorCode;
    switch (c) {
    case ErrorCode::usage: return 2;
    case ErrorCode::auth: return 3;
    case ErrorCode::network: return 4;
    case ErrorCode::source: return 5;
    case ErrorCode::destination: return 6;
    case ErrorCode::protocol: return 7;
    case ErrorCode::integrity: return 8;
    case ErrorCode::cancelled: return 130;
    case ErrorCode::internal: return 1;
    }
    return 1;
}

} // namespace

int main(int argc, char** argv) {
    std::signal(SIGPIPE, SIG_IGN);
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
        std::fputs(kUsage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!std::strcmp(argv[1], "--version")) {
        std::puts("sluice 0.1.0");
        return 0;
    }
    std::string cmd = argv[1];
    try {
        if (cmd == "send") return sluice::cli::cmd_send(argc - 2, argv + 2);
        if (cmd == "recv") return sluice::cli::cmd_recv(argc - 2, argv + 2);
        if (cmd == "serve") return sluice::cli::cmd_serve(argc - 2, argv + 2);
        if (cmd == "get") return sluice::cli::cmd_get(argc - 2, argv + 2);
        if (cmd == "trace") {
#ifdef SLUICE_HAVE_TRACE
            return sluice_trace_main(argc - 1, argv + 1);
#else
            std::fputs("sluice: error: this build has no eBPF tracer (libbpf, clang or bpftool were missing at build time)\n",
                       stderr);
            return 1;
#endif
        }
        throw sluice::Error(sluice::ErrorCode::usage, "unknown command '" + cmd + "' (expected send, recv, serve, get or trace)");
    } catch (const sluice::Error& e) {
        // what() is already printable (sluice::Error escapes its message); printing through it
        // again costs nothing and keeps this the one place every error line passes.
        std::cerr << "sluice " << sluice::printable(cmd) << ": error: " << sluice::printable(e.what()) << "\n";
        return exit_status(e.code());
    } catch (const std::exception& e) {
        std::cerr << "sluice " << sluice::printable(cmd) << ": error: " << sluice::printable(e.what()) << "\n";
        return 1;
    }
}
