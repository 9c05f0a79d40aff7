#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <iostream>

#include "cli_args.hpp"
#include "commands.hpp"
#include "progress_line.hpp"
#include "summary_line.hpp"
#include "sluice/sluice.hpp"

namespace sluice::cli {

const char* const kRecvHelp = R"(usage: sluice recv [options] DIR

Listens for one transfer, prints the connection string a sender needs
(sluice://HOST:PORT/?token=SECRET) on the first line of stdout, receives into DIR, and
exits 0 once every file is complete, verified and renamed into place.

options:
  --port P             port to listen on (default: one chosen by the system)
  --bind ADDR          address to listen on (default: all)
  --host NAME          host name or address to print in the connection string
  --token SECRET       use this token instead of a random one (lets a resume reuse it)
  --recv-path PATH     direct (default: O_DIRECT writes from the receive buffers),
                       recv_write (buffered writes), splice, or null (discard the data)
  --sink null          same as --recv-path null: measure the sender alone
  --sync               fsync files and directories before reporting success
  --verify             before renaming a file into place, read it back from disk (O_DIRECT)
                       and check every block received in this run against the sender's checksum
  --max-files N        refuse manifests with more entries (default 10000000)
  --idle-timeout S     fail if the sender is silent this long (default 60)
  --json               print final stats as one JSON object (last line of stdout)
  -v, --verbose        say which data path is used and every refused connection
)";

int cmd_recv(int argc, char** argv) {
    Args a(argc, argv, {"--port", "--bind", "--host", "--token", "--recv-path", "--sink", "--idle-timeout", "--max-files"},
           {"--json", "--sync", "--verify", "--verbose", "-v", "--help", "-h"});
    if (a.flag("--help") || a.flag("-h")) {
        std::fputs(kRecvHelp, stdout);
        return 0;
    }
    if (a.positionals().size() != 1) throw Error(ErrorCode::usage, "expected exactly one DIR (see sluice recv --help)");
    RecvOptions o;
    o.port = static_cast<uint16_t>(a.uint_value("--port", 0, 0, 65535));
    if (auto v = a.value("--bind")) o.bind_address = *v;
    if (auto v = a.value("--host")) o.advertise_host = *v;
    if (auto v = a.value("--token")) {
        if (v->empty()) throw Error(ErrorCode::usage, "--token must not be empty");
        o.token = *v;
    }
    if (auto v = a.value("--recv-path")) o.path = parse_recv_path(*v);
    if (auto v = a.value("--sink")) {
        if (*v != "null") throw Error(ErrorCode::usage, "--sink '" + *v + "': only 'null' is supported");
        o.path = RecvPath::null_sink;
    }
    o.sync = a.flag("--sync");
    o.verify = a.flag("--verify");
    o.max_files = a.uint_value("--max-files", 10'000'000, 1, 1'000'000'000);
    o.idle_timeout_ms = static_cast<int>(a.uint_value("--idle-timeout", 60, 1, 86400)) * 1000;
    o.verbose = a.flag("--verbose") || a.flag("-v");
    o.log = [](std::string_view line) { std::cerr << "sluice: " << line << "\n"; };
    Progress progress;
    o.progress = &progress;

    Receiver rx(a.positionals()[0], o);
    std::cout << rx.url() << std::endl;
    if (o.verbose) std::cerr << "sluice: receive path: " << recv_path_name(o.path) << "\n";
    Stats s;
    {
        ProgressLine line(progress, ::isatty(STDERR_FILENO));
        s = rx.wait();
    }
    if (a.flag("--json")) {
        std::cout << s.to_json() << std::endl;
    } else {
        print_summary(s, "received");
    }
    return 0;
}

} // namespace sluice::cli
